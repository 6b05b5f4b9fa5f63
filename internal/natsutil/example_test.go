package natsutil_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/corralhq/corral/internal/natsutil"
)

// The zero Config runs NATS inside the process, with JetStream in memory
// and no port open.
func ExampleConnect() {
	ctx := context.Background()
	c, err := natsutil.Connect(ctx, natsutil.Config{}, "example", nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, err := natsutil.EnsureStream(ctx, c.JS, jetstream.StreamConfig{Name: "EX", Subjects: []string{"ex.>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		panic(err)
	}
	_, _ = c.JS.Publish(ctx, "ex.a", []byte("hello"))
	m, _ := s.GetLastMsgForSubject(ctx, "ex.a")
	fmt.Println(string(m.Data), c.Server().Addr() == nil)
	// Output: hello true
}
