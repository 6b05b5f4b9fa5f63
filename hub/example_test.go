package hub_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/wire"
)

// A hub embedded in a process (NATS inside it too), and a client that
// subscribes and publishes over WebSocket.
func Example() {
	const secret = "example-secret-0123456789"
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	cfg.Auth.Keys = []auth.KeyConfig{{Algorithm: "HS256", Secret: secret}}
	h, err := hub.New(cfg, hub.Options{})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = h.Run(ctx) }()
	<-h.Started()

	p0 := 0
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{"news.>"}, Publish: []string{"news.>"}, MaxPriority: &p0,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	c, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + h.Addr().String() + "/v1/ws"}, Token: token})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, "news.eu"); err != nil {
		panic(err)
	}
	res, _ := c.Publish(ctx, "news.eu", client.PriorityP1, []byte("hello"), "")
	fmt.Println("published at offset", res.GetOffset())
	for e := range c.Events() {
		if e.Kind == client.EventMessage {
			fmt.Println(e.Message.GetChannel(), e.Message.GetOffset(), string(e.Message.GetData()))
			break
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.Shutdown(sctx)
	// Output:
	// published at offset 1
	// news.eu 1 hello
}

// A program that runs its own NATS hands its connection to the hub: here a
// nats-server with JetStream started in process, and a nats.go connection
// to its client port. The hub does not close the connection; a backend of
// the same program publishes with Hub.Publish.
func Example_ownNATS() {
	dir, err := os.MkdirTemp("", "corral-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		panic(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()

	const secret = "example-secret-0123456789"
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "", ""
	cfg.Auth.Keys = []auth.KeyConfig{{Algorithm: "HS256", Secret: secret}}
	h, err := hub.New(cfg, hub.Options{NATS: nc})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	<-h.Started()
	if err := h.Ready(); err != nil {
		panic(err)
	}

	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{"orders.>"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	c, err := client.Dial(ctx, client.Config{Addrs: []string{"ws://" + h.Addr().String() + "/v1/ws"}, Token: token})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, "orders.eu"); err != nil {
		panic(err)
	}
	res, err := h.Publish(ctx, hub.PublishRequest{Tenant: "acme", Channel: "orders.eu", Priority: wire.P0, Data: []byte("order 1"), ClientMessageID: "o-1"})
	if err != nil {
		panic(err)
	}
	again, _ := h.Publish(ctx, hub.PublishRequest{Tenant: "acme", Channel: "orders.eu", Priority: wire.P0, Data: []byte("order 1"), ClientMessageID: "o-1"})
	fmt.Println("published at offset", res.GetOffset(), "retry is a duplicate:", again.GetDuplicate())
	for e := range c.Events() {
		if e.Kind == client.EventMessage {
			fmt.Println(e.Message.GetChannel(), e.Message.GetOffset(), e.Message.GetPriority(), string(e.Message.GetData()))
			break
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.Shutdown(sctx)
	<-ran
	fmt.Println("hub stopped; the program's NATS connection is still up:", nc.IsConnected())
	// Output:
	// published at offset 1 retry is a duplicate: true
	// orders.eu 1 PRIORITY_P0 order 1
	// hub stopped; the program's NATS connection is still up: true
}
