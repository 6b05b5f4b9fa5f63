package hub_test

import (
	"context"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
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
