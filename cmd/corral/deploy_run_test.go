package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/testkit"
)

// livenessInstance finds the liveness timers the deploy files name:
// corral-liveness@NAME:PORT.
var livenessInstance = regexp.MustCompile(`corral-liveness@([a-z]+):([0-9]+)`)

func checkSystemd(t *testing.T, d *deployFiles, help map[string]string) {
	for k, v := range d.env {
		t.Setenv(k, v)
	}
	parts := map[string]*partConfig{}
	for part, p := range d.configs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if pc := loadPart(t, part, "systemd/"+part+".yaml", string(b)); pc != nil {
			parts[part] = pc
		}
	}
	checkSettings(t, "systemd/99-corral.conf", d.sysctl, func(hostcheck.Setting) bool { return true })
	nrOpen, _ := hostcheck.ParseValue(d.sysctl["fs.nr_open"])
	for _, part := range []string{"hub", "edge", "dns"} {
		file := "corral-" + part + ".service"
		u, ok := d.units[file]
		if !ok {
			t.Errorf("systemd: no %s", file)
			continue
		}
		svc := u["Service"]
		start := strings.Fields(strings.Join(svc["ExecStart"], " "))
		if len(start) < 2 || start[0] != "/usr/local/bin/corral" || start[1] != part {
			t.Errorf("%s: ExecStart %q, want /usr/local/bin/corral %s ...", file, start, part)
			continue
		}
		checkFlags(t, file, part, start[2:], help)
		cfgPath := flagValue(start, "--config")
		pc := parts[strings.TrimSuffix(filepath.Base(cfgPath), ".yaml")]
		if pc == nil || filepath.Dir(cfgPath) != "/etc/corral" || pc.part != part {
			t.Errorf("%s: --config %s is no /etc/corral/<part>.yaml of deploy/systemd for %s", file, cfgPath, part)
			continue
		}
		// Readiness: ExecStartPost waits for /readyz on the admin port.
		post := strings.Join(svc["ExecStartPost"], " ")
		ready := false
		for _, f := range strings.Fields(post) {
			if u, err := url.Parse(f); err == nil && u.Scheme == "http" {
				ready = u.Path == "/readyz" && u.Port() == itoa(pc.admin)
			}
		}
		if !ready {
			t.Errorf("%s: ExecStartPost %q does not wait for /readyz on the admin port %d", file, post, pc.admin)
		}
		stop, err := time.ParseDuration(strings.Join(svc["TimeoutStopSec"], "") + "s")
		if err != nil || stop < pc.graceNeeded(0) {
			t.Errorf("%s: TimeoutStopSec %v; the drain (%v) and the stop after it need %v", file, svc["TimeoutStopSec"], pc.drain, pc.graceNeeded(0))
		}
		if env := strings.Join(svc["EnvironmentFile"], ""); (pc.part == "hub" || pc.part == "edge") && env != "/etc/corral/secrets.env" {
			t.Errorf("%s: EnvironmentFile %q, want /etc/corral/secrets.env (secrets.env.example)", file, env)
		}
		if pc.part == "hub" || pc.part == "edge" {
			nofile := strings.Join(svc["LimitNOFILE"], "")
			checkNoFileLine(t, file, "LimitNOFILE="+nofile)
			if v, err := hostcheck.ParseValue(nofile); err != nil || len(nrOpen) == 0 || v[0] > nrOpen[0] {
				t.Errorf("%s: LimitNOFILE=%s above fs.nr_open %v of 99-corral.conf: systemd could not set it", file, nofile, nrOpen)
			}
		}
	}
	// Every liveness timer named runs against the admin port of its unit.
	named := 0
	for file, text := range d.texts {
		for _, mt := range livenessInstance.FindAllStringSubmatch(text, -1) {
			named++
			if pc := parts[mt[1]]; pc == nil || itoa(pc.admin) != mt[2] {
				t.Errorf("%s: %s is not the admin port of corral-%s.service", file, mt[0], mt[1])
			}
		}
	}
	if named < 3 {
		t.Errorf("the liveness timers of hub, edge and dns are named %d times", named)
	}
	for _, f := range []string{"corral-liveness@.service", "corral-liveness@.timer"} {
		if _, ok := d.units[f]; !ok {
			t.Errorf("systemd: no %s", f)
		}
	}
	if !strings.Contains(strings.Join(d.units["corral-liveness@.service"]["Service"]["ExecStart"], ""), "/healthz") {
		t.Error("corral-liveness@.service does not get /healthz")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// scrapeDeployed starts a hub, an edge in front of it and a DNS server
// from the configs of deploy/kubernetes (the edge tier, and common/dns),
// on loopback (addresses, NATS, TLS files and health check targets moved
// there), opens a device session through the edge, publishes and asks the
// DNS server a question, then returns every metric name of their
// /metrics (a histogram's _bucket, _sum and _count included).
func scrapeDeployed(t *testing.T, d *deployFiles) map[string]bool {
	k8sEnv(t, d)
	text := func(file, cm, key string) string {
		for _, o := range d.objects {
			if o.file == file && o.doc["kind"] == "ConfigMap" && s(dig(o.doc, "metadata", "name")) == cm {
				return s(m(o.doc["data"])[key])
			}
		}
		t.Fatalf("%s: no ConfigMap %s with %s", file, cm, key)
		return ""
	}
	hp := loadPart(t, "hub", "hub", text("kubernetes/edge-tier/hub.yaml", "corral-hub", "hub.yaml"))
	ep := loadPart(t, "edge", "edge", text("kubernetes/edge-tier/edge.yaml", "corral-edge", "edge.yaml"))
	dp := loadPart(t, "dns", "dns", text("kubernetes/common/dns.yaml", "corral-dns", "dns.yaml"))
	if hp == nil || ep == nil || dp == nil {
		t.Fatal("a deployed config does not validate")
	}
	hc := hp.hub
	hc.Listen, hc.GRPCListen, hc.Admin.Addr, hc.NodeID = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "hub-deploy"
	hc.NATS.URL = ""               // embedded, in place of the NATS chart's cluster
	hc.NATS.StoreDir = t.TempDir() // JetStream on files, as the chart's
	hc.History.Replicas = 0        // one NATS server
	h, hadm, err := newHubParts(hc, nil)
	if err != nil {
		t.Fatal(err)
	}
	hubAdmin := runParts(t, "hub", h, hadm)

	ec := ep.edge
	ec.Listen, ec.GRPCListen, ec.Admin.Addr, ec.NodeID = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "edge-deploy"
	ec.Origins.Name, ec.Origins.Port, ec.Origins.Resolver = "", 0, ""
	ec.Origins.Static = []string{h.GRPCAddr().String()}
	cert, pool := testkit.SelfSignedCert(t, "edge.corral.test")
	ec.TLS.CertFile, ec.TLS.KeyFile = writeCert(t, cert)
	e, eadm, err := newEdgeParts(ec, nil)
	if err != nil {
		t.Fatal(err)
	}
	edgeAdmin := runParts(t, "edge", e, eadm)

	dc := dp.dns
	dc.Listen, dc.Admin.Addr = "127.0.0.1:"+freePort(t), "127.0.0.1:0"
	for i := range dc.Health.Checks {
		c := &dc.Health.Checks[i] // traffic stays on loopback: a closed port
		if c.Address != "" {
			c.Address = "127.0.0.1:1"
		}
		if c.URL != "" {
			c.URL = "http://127.0.0.1:1/"
		}
	}
	ds, dadm, err := newDNSParts(dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	dnsAdmin := runParts(t, "dns", ds, dadm)

	// Traffic: a session through the edge over wss, a publish, a message,
	// and a DNS question.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addrs: []string{"wss://" + e.Addr().String() + "/v1/ws"}, Token: sessionToken(t, os.Getenv("CORRAL_TOKEN_SECRET")),
		TLS: &tls.Config{RootCAs: pool, ServerName: "edge.corral.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, "news.eu"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "news.eu", client.PriorityP0, []byte("deployed"), ""); err != nil {
		t.Fatal(err)
	}
	for got := false; !got; {
		select {
		case ev := <-c.Events():
			got = ev.Kind == client.EventMessage
		case <-ctx.Done():
			t.Fatal("the published message did not come back through the edge")
		}
	}
	q := new(dns.Msg)
	q.SetQuestion("edge.corral.example.com.", dns.TypeA)
	if _, err := dns.Exchange(q, dc.Listen); err != nil {
		t.Fatal(err)
	}

	names := map[string]bool{}
	for _, base := range []string{hubAdmin, edgeAdmin, dnsAdmin} {
		code, body := httpGet(base + "/metrics")
		if code != 200 {
			t.Fatalf("%s/metrics: %d", base, code)
		}
		sc := bufio.NewScanner(strings.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
				continue
			}
			names[f[2]] = true
			switch f[3] {
			case "histogram":
				names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
			case "summary":
				names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
			}
		}
	}
	if !names["corral_hub_sessions"] || !names["corral_edge_sessions"] {
		t.Fatalf("the scrape lacks the servers' own metrics: %d names", len(names))
	}
	if testing.Verbose() {
		var list []string
		for k := range names {
			list = append(list, k)
		}
		t.Logf("exported: %s", strings.Join(slices.Sorted(slices.Values(list)), " "))
	}
	return names
}

// writeCert writes cert's chain and key as PEM files and returns their paths.
func writeCert(t *testing.T, cert tls.Certificate) (certFile, keyFile string) {
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
