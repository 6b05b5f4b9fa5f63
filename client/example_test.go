package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/hub/auth"
)

// A client away for a while resumes a channel from the position it kept:
// it gets exactly the messages it missed.
func ExampleClient_SubscribeFrom() {
	const secret = "example-secret-0123456789"
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.Admin.Addr = "127.0.0.1:0", ""
	cfg.GRPCListen = "127.0.0.1:0"
	cfg.Auth.Keys = []auth.KeyConfig{{Algorithm: "HS256", Secret: secret}}
	h, _ := hub.New(cfg, hub.Options{})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = h.Run(ctx) }()
	<-h.Started()
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "acme", Channels: []string{">"}, Publish: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	addrs := []string{"grpc://" + h.GRPCAddr().String()}

	c, err := client.Dial(ctx, client.Config{Addrs: addrs, Token: token})
	if err != nil {
		panic(err)
	}
	first, _ := c.Publish(ctx, "scores", client.PriorityP2, []byte("1-0"), "")
	_ = c.Close() // gone

	other, _ := client.Dial(ctx, client.Config{Addrs: addrs, Token: token})
	_, _ = other.Publish(ctx, "scores", client.PriorityP2, []byte("1-1"), "")
	_, _ = other.Publish(ctx, "scores", client.PriorityP2, []byte("2-1"), "")

	back, _ := client.Dial(ctx, client.Config{Addrs: addrs, Token: token})
	s, _ := back.SubscribeFrom(ctx, "scores", first.GetEpoch(), first.GetOffset())
	fmt.Println("recovered:", s.GetRecovered())
	for n := 0; n < 2; {
		e := <-back.Events()
		if e.Kind == client.EventMessage {
			fmt.Println(e.Message.GetOffset(), string(e.Message.GetData()))
			n++
		}
	}
	_ = other.Close()
	_ = back.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.Shutdown(sctx)
	// Output:
	// recovered: true
	// 2 1-1
	// 3 2-1
}
