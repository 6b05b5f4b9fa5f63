package main

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/authdns"
	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/hostcheck"
)

// partConfig is a server config of deploy/ as its server reads it: the
// ports it opens and how long its drain may take.
type partConfig struct {
	part                string // hub, edge or dns
	file                string // where it is, for messages
	listen, grpc, admin int    // ports; 0 for none
	drain               time.Duration
	hub                 *hub.Config
	edge                *edge.Config
	dns                 *authdns.Config
}

// loadPart validates text as the config of part with `corral <part>
// validate` (the server's own checks, strictly decoded) and reads it.
func loadPart(t *testing.T, part, name, text string) *partConfig {
	t.Helper()
	p := filepath.Join(t.TempDir(), part+".yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := corral(t, part, "validate", "--config", p); code != 0 {
		t.Errorf("%s: corral %s validate: %s", name, part, strings.ReplaceAll(errOut, p, name))
		return nil
	}
	pc := &partConfig{part: part, file: name}
	var err error
	switch part {
	case "hub":
		c := hub.DefaultConfig()
		err = config.Load(p, &c, config.Options{})
		pc.hub, pc.listen, pc.grpc, pc.admin = &c, port(t, c.Listen), port(t, c.GRPCListen), port(t, c.Admin.Addr)
		pc.drain = c.Drain.Deadline
		if pc.drain == 0 {
			pc.drain = hub.DefaultDrainDeadline
		}
	case "edge":
		c := edge.DefaultConfig()
		err = config.Load(p, &c, config.Options{})
		pc.edge, pc.listen, pc.grpc, pc.admin = &c, port(t, c.Listen), port(t, c.GRPCListen), port(t, c.Admin.Addr)
		pc.drain = c.Drain.Deadline
		if pc.drain == 0 {
			pc.drain = edge.DefaultDrainDeadline
		}
	case "dns":
		var c *authdns.Config
		c, err = authdns.LoadConfig(p)
		if c != nil {
			pc.dns, pc.listen, pc.admin = c, port(t, c.Listen), port(t, c.Admin.Addr)
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return pc
}

func port(t *testing.T, addr string) int {
	t.Helper()
	if addr == "" {
		return 0
	}
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return n
}

// secretEnv lists the environment variables the config reads secrets from.
func (p *partConfig) secretEnv() []string {
	var out []string
	if p.hub != nil {
		for _, k := range p.hub.Auth.Keys {
			out = append(out, k.SecretEnv)
		}
		for _, k := range p.hub.Auth.APIKeys {
			out = append(out, k.KeyEnv)
		}
		for _, k := range p.hub.Relay.Keys {
			out = append(out, k.KeyEnv)
		}
	}
	if p.edge != nil {
		out = append(out, p.edge.Relay.KeyEnv)
	}
	kept := out[:0]
	for _, v := range out {
		if v != "" {
			kept = append(kept, v)
		}
	}
	return kept
}

// ports returns the ports the config opens.
func (p *partConfig) ports() []int {
	var out []int
	for _, n := range []int{p.listen, p.grpc, p.admin} {
		if n != 0 {
			out = append(out, n)
		}
	}
	return out
}

// graceNeeded is the least grace period of a process of this config whose
// shutdown starts after pre (a preStop pause).
func (p *partConfig) graceNeeded(pre time.Duration) time.Duration {
	return pre + p.drain + shutdownAfterDrain + graceMargin
}

// m, l, s and n read a decoded YAML tree: a map, a list, a string, a number.
func m(v any) map[string]any { x, _ := v.(map[string]any); return x }
func l(v any) []any          { x, _ := v.([]any); return x }
func s(v any) string         { x, _ := v.(string); return x }
func n(v any) int {
	switch x := v.(type) {
	case uint64:
		return int(x)
	case int64:
		return int(x)
	case int:
		return x
	case float64:
		return int(x)
	}
	return -1
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		v = m(v)[k]
	}
	return v
}

// k8sEnv puts the stringData of the Secrets of the manifests in the
// environment, as envFrom does, for the configs' secret_env and key_env.
func k8sEnv(t *testing.T, d *deployFiles) map[string]bool {
	keys := map[string]bool{}
	for _, o := range d.objects {
		if o.doc["kind"] != "Secret" {
			continue
		}
		for k, v := range m(o.doc["stringData"]) {
			if strings.HasPrefix(k, "CORRAL_") {
				t.Setenv(k, s(v))
				keys[s(dig(o.doc, "metadata", "name"))+"/"+k] = true
			}
		}
	}
	return keys
}

func checkKubernetes(t *testing.T, d *deployFiles, help map[string]string) {
	secretKeys := k8sEnv(t, d)
	configMaps := map[string]map[string]any{}
	services := map[string]map[string]any{}
	for _, o := range d.objects {
		name := s(dig(o.doc, "metadata", "name"))
		if ns := s(dig(o.doc, "metadata", "namespace")); o.doc["kind"] != "Namespace" && ns != "corral" {
			t.Errorf("%s: %s %s is in namespace %q, not corral", o.file, o.doc["kind"], name, ns)
		}
		switch o.doc["kind"] {
		case "ConfigMap":
			configMaps[path.Dir(o.file)+"/"+name] = m(o.doc["data"])
		case "Service":
			services[path.Dir(o.file)+"/"+name] = o.doc
		}
	}
	// Every config in a ConfigMap passes its server's validation.
	parts := map[string]*partConfig{} // dir/configmap/key
	for key, data := range configMaps {
		for file, text := range data {
			part := strings.TrimSuffix(file, ".yaml")
			if part != "hub" && part != "edge" && part != "dns" {
				t.Errorf("ConfigMap %s holds %s, not a hub, edge or dns config", key, file)
				continue
			}
			if pc := loadPart(t, part, key+"/"+file, s(text)); pc != nil {
				parts[key+"/"+file] = pc
			}
		}
	}
	pods := 0
	for _, o := range d.objects {
		if o.doc["kind"] != "Deployment" && o.doc["kind"] != "DaemonSet" {
			continue
		}
		pods++
		checkPod(t, o, parts, services, secretKeys, help)
	}
	if pods < 4 {
		t.Errorf("%d workloads; want dns, the node tuning and both layouts", pods)
	}
	for key, svc := range services {
		checkService(t, d, key, svc)
	}
	// NATS: the official chart's values make a cluster with JetStream, at the
	// address the hubs dial.
	if dig(d.nats, "config", "cluster", "enabled") != true || n(dig(d.nats, "config", "cluster", "replicas")) < 3 ||
		dig(d.nats, "config", "jetstream", "enabled") != true {
		t.Errorf("nats-values.yaml: want config.cluster.enabled, replicas >= 3 and config.jetstream.enabled: %v", d.nats)
	}
	for key, pc := range parts {
		if pc.hub == nil {
			continue
		}
		want := "nats://" + s(d.nats["fullnameOverride"]) + ".corral.svc.cluster.local:4222"
		if pc.hub.NATS.URL != want {
			t.Errorf("%s: nats.url %q; the NATS chart's values serve %s", key, pc.hub.NATS.URL, want)
		}
		if pc.hub.History.Replicas != 0 && pc.hub.History.Replicas > n(dig(d.nats, "config", "cluster", "replicas")) {
			t.Errorf("%s: history.replicas %d above the NATS cluster's size", key, pc.hub.History.Replicas)
		}
	}
	// The node-level settings are set by the node tuning DaemonSet.
	node := map[string]string{}
	for _, o := range d.objects {
		if o.doc["kind"] == "DaemonSet" {
			for _, c := range l(dig(o.doc, "spec", "template", "spec", "initContainers")) {
				for k, v := range sysctlArgs(c) {
					node[k] = v
				}
			}
		}
	}
	checkSettings(t, "kubernetes node tuning", node, func(st hostcheck.Setting) bool { return st.Scope == hostcheck.Node })
	// RLIMIT_NOFILE is the container runtime's: the README says how much.
	checkNoFileLine(t, "deploy/README.md", d.texts["README.md"])
}

// sysctlArgs reads `sysctl -w k=v ...` of a container's command.
func sysctlArgs(c any) map[string]string {
	cmd := l(m(c)["command"])
	out := map[string]string{}
	if len(cmd) < 2 || s(cmd[0]) != "sysctl" || s(cmd[1]) != "-w" {
		return out
	}
	for _, a := range cmd[2:] {
		if k, v, ok := strings.Cut(s(a), "="); ok {
			out[k] = v
		}
	}
	return out
}

// checkSettings checks that have sets every setting of the table that want
// selects, to a value that meets it for hostcheck.DeployConnections.
func checkSettings(t *testing.T, where string, have map[string]string, want func(hostcheck.Setting) bool) {
	t.Helper()
	for _, st := range hostcheck.Settings {
		if st.Kind != hostcheck.Sysctl || !want(st) {
			continue
		}
		v, ok := have[st.Name]
		if !ok {
			t.Errorf("%s: %s is not set", where, st.Name)
			continue
		}
		if ok, err := st.Meets(hostcheck.DeployConnections, v); err != nil || !ok {
			t.Errorf("%s: %s = %q, want %s for %d connections (%v)", where, st.Name, v, st.WantString(hostcheck.DeployConnections), hostcheck.DeployConnections, err)
		}
	}
}

func checkNoFileLine(t *testing.T, where, text string) {
	t.Helper()
	st, _ := hostcheck.Lookup("RLIMIT_NOFILE")
	i := strings.Index(text, "LimitNOFILE=")
	if i < 0 {
		t.Errorf("%s does not say the LimitNOFILE the servers need", where)
		return
	}
	f := strings.FieldsFunc(text[i+len("LimitNOFILE="):], func(r rune) bool { return r < '0' || r > '9' })
	if len(f) == 0 {
		t.Errorf("%s: LimitNOFILE without a number", where)
		return
	}
	if ok, _ := st.Meets(hostcheck.DeployConnections, f[0]+" "+f[0]); !ok {
		t.Errorf("%s: LimitNOFILE=%s, want %s", where, f[0], st.WantString(hostcheck.DeployConnections))
	}
}

// checkPod checks a workload's pod template: each corral container's
// command, config, ports and probes, the grace period against the drains,
// and for hubs and edges the network-namespace host settings.
func checkPod(t *testing.T, o k8sObject, parts map[string]*partConfig, services map[string]map[string]any, secretKeys map[string]bool, help map[string]string) {
	name := o.file + ": " + s(dig(o.doc, "metadata", "name"))
	spec := m(dig(o.doc, "spec", "template", "spec"))
	volumes := map[string]string{} // volume -> ConfigMap
	for _, v := range l(spec["volumes"]) {
		if cm := s(dig(v, "configMap", "name")); cm != "" {
			volumes[s(m(v)["name"])] = cm
		}
	}
	grace := time.Duration(n(spec["terminationGracePeriodSeconds"])) * time.Second
	servesConnections := false
	for _, c := range l(spec["containers"]) {
		if !strings.HasPrefix(s(m(c)["image"]), "ghcr.io/corralhq/corral") {
			continue
		}
		cname := name + "/" + s(m(c)["name"])
		args := l(m(c)["args"])
		if len(args) == 0 {
			t.Errorf("%s: no args", cname)
			continue
		}
		part := s(args[0])
		var strArgs []string
		for _, a := range args {
			strArgs = append(strArgs, s(a))
		}
		checkFlags(t, cname, part, strArgs[1:], help)
		cfgPath := flagValue(strArgs, "--config")
		var pc *partConfig
		for _, vm := range l(m(c)["volumeMounts"]) {
			mp := s(m(vm)["mountPath"])
			if cm, ok := volumes[s(m(vm)["name"])]; ok && path.Dir(cfgPath) == mp {
				pc = parts[path.Dir(o.file)+"/"+cm+"/"+path.Base(cfgPath)]
			}
		}
		if pc == nil {
			t.Errorf("%s: --config %s is no config of a mounted ConfigMap", cname, cfgPath)
			continue
		}
		if pc.part != part {
			t.Errorf("%s: corral %s with the %s config %s", cname, part, pc.part, pc.file)
		}
		// Every variable the config reads a secret from comes from a Secret
		// the container takes its environment from.
		var secrets []string
		for _, ef := range l(m(c)["envFrom"]) {
			if sr := s(dig(ef, "secretRef", "name")); sr != "" {
				secrets = append(secrets, sr)
			}
		}
		for _, v := range pc.secretEnv() {
			found := false
			for _, sr := range secrets {
				found = found || secretKeys[sr+"/"+v]
			}
			if !found {
				t.Errorf("%s: %s names %s, which no Secret of its envFrom (%v) holds", cname, pc.file, v, secrets)
			}
		}
		named := map[string]int{}
		for _, p := range l(m(c)["ports"]) {
			cp := n(m(p)["containerPort"])
			named[s(m(p)["name"])] = cp
			if !containsInt(pc.ports(), cp) {
				t.Errorf("%s: containerPort %d is not a port of %s (%v)", cname, cp, pc.file, pc.ports())
			}
		}
		for probe, want := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
			g := dig(c, probe, "httpGet")
			p := n(m(g)["port"])
			if p < 0 {
				p = named[s(m(g)["port"])]
			}
			if s(m(g)["path"]) != want || p != pc.admin {
				t.Errorf("%s: %s %v; want %s on the admin port %d", cname, probe, g, want, pc.admin)
			}
		}
		pre := time.Duration(max(0, n(dig(c, "lifecycle", "preStop", "sleep", "seconds")))) * time.Second
		if need := pc.graceNeeded(pre); grace < need {
			t.Errorf("%s: terminationGracePeriodSeconds %v; the preStop %v, the drain (%v) and the stop after it need %v", cname, grace, pre, pc.drain, need)
		}
		if pc.part == "hub" || pc.part == "edge" {
			servesConnections = true
		}
		// The edge finds its hubs: a Service of the same layout, or the hub
		// beside it in the pod.
		if pc.edge != nil {
			checkOrigins(t, cname, pc, spec, parts, path.Dir(o.file), services, volumes)
		}
	}
	if !servesConnections {
		return
	}
	pod := map[string]string{}
	for _, sc := range l(dig(spec, "securityContext", "sysctls")) {
		pod[s(m(sc)["name"])] = s(m(sc)["value"])
	}
	init := map[string]string{}
	for _, c := range l(spec["initContainers"]) {
		for k, v := range sysctlArgs(c) {
			init[k] = v
		}
	}
	checkSettings(t, name+" securityContext.sysctls", pod, func(st hostcheck.Setting) bool { return st.Scope == hostcheck.NetNS && st.KubeSafe })
	checkSettings(t, name+" tune-netns", init, func(st hostcheck.Setting) bool { return st.Scope == hostcheck.NetNS && !st.KubeSafe })
}

func checkOrigins(t *testing.T, cname string, pc *partConfig, spec map[string]any, parts map[string]*partConfig, dir string, services map[string]map[string]any, volumes map[string]string) {
	o := pc.edge.Origins
	if len(o.Static) > 0 {
		// Static origins: the gRPC listener of the hub container of this pod.
		hubs := map[string]bool{}
		for _, cm := range volumes {
			for key, hp := range parts {
				if strings.HasPrefix(key, dir+"/"+cm+"/") && hp.hub != nil {
					hubs[hp.hub.GRPCListen] = true
				}
			}
		}
		for _, a := range o.Static {
			if !hubs[a] {
				t.Errorf("%s: origin %s is no hub's grpc_listen in the pod (%v)", cname, a, hubs)
			}
		}
		return
	}
	svcName, rest, _ := strings.Cut(o.Name, ".")
	svc := services[dir+"/"+svcName]
	if svc == nil || !strings.HasPrefix(rest, "corral.svc.") {
		t.Errorf("%s: origins.name %s is no Service of %s", cname, o.Name, dir)
		return
	}
	if dig(svc, "spec", "clusterIP") != "None" {
		t.Errorf("%s: origins.name %s is not a headless Service: the edge would see one address", cname, o.Name)
	}
	found := false
	for _, p := range l(dig(svc, "spec", "ports")) {
		found = found || n(m(p)["port"]) == o.Port
	}
	if !found {
		t.Errorf("%s: origins.port %d is not a port of Service %s", cname, o.Port, svcName)
	}
}

// checkService checks that every targetPort of a Service is a port of a
// container of the pods it selects, and that it selects some.
func checkService(t *testing.T, d *deployFiles, key string, svc map[string]any) {
	sel := m(dig(svc, "spec", "selector"))
	matched := 0
	for _, o := range d.objects {
		if (o.doc["kind"] != "Deployment" && o.doc["kind"] != "DaemonSet") || path.Dir(o.file) != path.Dir(key) && !strings.HasSuffix(path.Dir(o.file), "common") {
			continue
		}
		labels := m(dig(o.doc, "spec", "template", "metadata", "labels"))
		ok := len(sel) > 0
		for k, v := range sel {
			ok = ok && labels[k] == v
		}
		if !ok {
			continue
		}
		matched++
		ports := map[string]bool{}
		for _, c := range l(dig(o.doc, "spec", "template", "spec", "containers")) {
			for _, p := range l(m(c)["ports"]) {
				ports[s(m(p)["name"])] = true
				ports[strconv.Itoa(n(m(p)["containerPort"]))] = true
			}
		}
		for _, p := range l(dig(svc, "spec", "ports")) {
			tp := m(p)["targetPort"]
			k := s(tp)
			if k == "" {
				k = strconv.Itoa(n(tp))
			}
			if !ports[k] {
				t.Errorf("Service %s: targetPort %v is no container port of %s", key, tp, o.file)
			}
		}
	}
	if matched != 1 {
		t.Errorf("Service %s selects %d workloads, want 1", key, matched)
	}
}

// checkFlags checks that every --flag of args is in `corral <part> --help`.
func checkFlags(t *testing.T, where, part string, args []string, help map[string]string) {
	t.Helper()
	h, ok := help[part]
	if !ok {
		t.Errorf("%s: corral %s is not a server subcommand", where, part)
		return
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		f, _, _ := strings.Cut(a, "=")
		if !strings.Contains(h, "  "+f+" ") {
			t.Errorf("%s: flag %s is not in corral %s --help", where, f, part)
		}
	}
}

func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
