package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/internal/testkit"
)

// TestStatusPagesOfHubAndEdge runs a hub and an edge in front of it as
// `corral hub` and `corral edge` build them: each admin root is an index
// naming /status, and each status page (HTML reloading itself, and JSON)
// follows a device session opened through the edge: the edge's origin
// carries it, the hub counts it and the edge's Relay stream.
func TestStatusPagesOfHubAndEdge(t *testing.T) {
	const secret = "status-secret-0123456789abcdef"
	hcfg := hub.DefaultConfig()
	hcfg.Listen, hcfg.GRPCListen, hcfg.Admin.Addr, hcfg.NodeID = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "hub-s"
	hcfg.History.Store = "memory"
	hcfg.Auth.Keys = []auth.KeyConfig{{ID: "k", Algorithm: "HS256", Secret: secret}}
	hcfg.Relay.Keys = []hub.RelayKeyConfig{{Name: "e", Key: "status-relay-key-0123"}}
	h, hadm, err := newHubParts(&hcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hubAdmin := runParts(t, "hub", h, hadm)

	ecfg := edge.DefaultConfig()
	ecfg.Listen, ecfg.GRPCListen, ecfg.Admin.Addr, ecfg.NodeID = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "edge-s"
	ecfg.Origins.Static = []string{h.GRPCAddr().String()}
	ecfg.Relay.Key = "status-relay-key-0123"
	e, eadm, err := newEdgeParts(&ecfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	edgeAdmin := runParts(t, "edge", e, eadm)

	for base, want := range map[string]string{hubAdmin: "corral hub hub-s", edgeAdmin: "corral edge edge-s"} {
		code, body := httpGet(base + "/")
		if code != 200 || !strings.Contains(body, "<h1>"+want+"</h1>") || !strings.Contains(body, `href="/status"`) || !strings.Contains(body, `href="/metrics"`) {
			t.Errorf("%s/: %d, want an index titled %q naming /status and /metrics:\n%s", base, code, want, body)
		}
		code, body = httpGet(base + "/status")
		if code != 200 || !strings.Contains(body, `<meta http-equiv="refresh" content="2">`) || !strings.Contains(body, "<h1>"+want+"</h1>") || !strings.Contains(body, "ready at") {
			t.Errorf("%s/status: %d, want a ready page reloading itself:\n%s", base, code, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + e.Addr().String() + "/v1/ws"}, Token: sessionToken(t, secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var hs hubStatusJSON
	testkit.WaitFor(t, 10*time.Second, "the hub's status page counting the relayed session", func() bool {
		getJSON(t, hubAdmin+"/status?format=json", &hs)
		return hs.Sessions == 1
	})
	if !hs.Ready || hs.Node != "hub-s" || hs.RelayStreams < 1 || hs.Stage != "normal" {
		t.Errorf("hub status %+v: want ready hub-s with the edge's Relay streams", hs)
	}
	var es edgeStatusJSON
	testkit.WaitFor(t, 10*time.Second, "the edge's status page counting the session", func() bool {
		getJSON(t, edgeAdmin+"/status?format=json", &es)
		return es.Sessions == 1 && len(es.Origins) == 1 && es.Origins[0].Sessions == 1
	})
	if !es.Ready || es.Node != "edge-s" || es.Origins[0].Addr != h.GRPCAddr().String() || es.Origins[0].Ejected {
		t.Errorf("edge status %+v", es)
	}
	_, body := httpGet(edgeAdmin + "/status")
	if !strings.Contains(body, "<td>"+h.GRPCAddr().String()+"</td>") {
		t.Errorf("the edge's page does not list its origin:\n%s", body)
	}
}
