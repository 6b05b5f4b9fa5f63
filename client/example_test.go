package client_test

import (
	"context"
	"fmt"
	"log"
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

// exampleHub runs a hub on a free port with a publisher that sends
// "hello" on news.eu of tenant demo every 20 ms, and returns its
// WebSocket URL and a token for it.
func exampleHub() (url, token string, stop func()) {
	const secret = "example-secret-0123456789"
	cfg := hub.DefaultConfig()
	cfg.Listen, cfg.GRPCListen, cfg.Admin.Addr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.History.Store = "memory"
	cfg.Auth.Keys = []auth.KeyConfig{{Algorithm: "HS256", Secret: secret}}
	h, err := hub.New(cfg, hub.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = h.Run(ctx) }()
	<-h.Started()
	token, _ = jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "demo", Channels: []string{"news.*"}, Publish: []string{"news.*"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
	}).SignedString([]byte(secret))
	url = "ws://" + h.Addr().String()
	pub, err := client.Dial(ctx, client.Config{Addrs: []string{url}, Token: token})
	if err != nil {
		panic(err)
	}
	go func() {
		for range pub.Events() {
		}
	}()
	go func() {
		for ctx.Err() == nil {
			_, _ = pub.Publish(ctx, "news.eu", client.PriorityP2, []byte("hello"), "")
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return url, token, func() {
		cancel()
		_ = pub.Close()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = h.Shutdown(sctx)
	}
}

// Subscribe to a channel and print its messages; the lines between the
// README markers are client/README.md's example, word for word
// (TestREADMEExample checks).
func Example() {
	url, token, stop := exampleHub()
	defer stop()
	// README example begins.
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Config{Addrs: []string{url}, Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctx, "news.eu"); err != nil {
		log.Fatal(err)
	}
	for e := range c.Events() {
		switch e.Kind {
		case client.EventMessage:
			fmt.Printf("%s: %s\n", e.Channel, e.Message.GetData())
			return // one is enough here
		case client.EventGap:
			log.Println("lost:", e) // resync e.Channel from its source of truth
		default:
			log.Println(e) // connecting, connected, disconnected (and when the next attempt is), resumed
		}
	}
	log.Fatal(c.Err()) // the server refused for good (errors.Is ErrUnauthorized, ErrForbidden, ErrPolicy)
	// README example ends.

	// Output:
	// news.eu: hello
}
