package edge_test

import (
	"context"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
)

// An edge embedded in a process in front of a hub of the same process: a
// device connects to the edge over WebSocket, subscribes and publishes,
// and cannot tell the edge from the hub but by Welcome's node id.
func Example() {
	const secret, relayKey = "example-secret-0123456789", "example-relay-key-0123456789"
	hc := hub.DefaultConfig()
	hc.Listen, hc.GRPCListen, hc.Admin.Addr, hc.NodeID = "127.0.0.1:0", "127.0.0.1:0", "", "hub-1"
	hc.History.Store = "memory"
	hc.Auth.Keys = []auth.KeyConfig{{Algorithm: "HS256", Secret: secret}}
	hc.Relay.Keys = []hub.RelayKeyConfig{{Name: "edges", Key: relayKey}}
	h, err := hub.New(hc, hub.Options{})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = h.Run(ctx) }()
	<-h.Started()

	ec := edge.DefaultConfig()
	ec.Listen, ec.GRPCListen, ec.Admin.Addr, ec.NodeID = "127.0.0.1:0", "", "", "edge-1"
	ec.Origins.Static = []string{h.GRPCAddr().String()}
	ec.Relay.Key = relayKey
	e, err := edge.New(ec, edge.Options{})
	if err != nil {
		panic(err)
	}
	go func() { _ = e.Run(ctx) }()
	<-e.Started()

	p0 := 0
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{"news.>"}, Publish: []string{"news.>"}, MaxPriority: &p0,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	c, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + e.Addr().String() + "/v1/ws"}, Token: token})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, "news.eu"); err != nil {
		panic(err)
	}
	res, _ := c.Publish(ctx, "news.eu", client.PriorityP0, []byte("hello"), "")
	fmt.Println("published at offset", res.GetOffset())
	for ev := range c.Events() {
		if ev.Kind == client.EventMessage {
			fmt.Println(ev.Message.GetChannel(), ev.Message.GetOffset(), string(ev.Message.GetData()))
			break
		}
	}
	fmt.Println("hub sessions:", h.Sessions(), "edge sessions:", e.Sessions())
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.Shutdown(sctx)
	_ = h.Shutdown(sctx)
	// Output:
	// published at offset 1
	// news.eu 1 hello
	// hub sessions: 1 edge sessions: 1
}
