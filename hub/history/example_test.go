package history_test

import (
	"context"
	"fmt"
	"time"

	"github.com/corralhq/corral/hub/history"
)

// A client saw offset 2 of a channel, went away, and asks what it missed.
func ExampleMemory() {
	now := time.Unix(1_800_000_000, 0)
	s := history.NewMemory(history.Config{Window: 30 * time.Second}, history.MemoryOptions{
		Now:      func() time.Time { return now },
		NewEpoch: func() string { return "e1" },
	})
	ctx := context.Background()
	for _, d := range []string{"a", "b", "c", "d"} {
		_, _ = s.Append(ctx, "acme.news", history.Message{Data: []byte(d)})
	}
	r, _ := s.Since(ctx, "acme.news", history.Position{Epoch: "e1", Offset: 2})
	for _, m := range r.Messages {
		fmt.Println(m.Offset, string(m.Data))
	}
	fmt.Println("recovered:", r.Recovered)

	now = now.Add(time.Minute) // beyond the window
	r, _ = s.Since(ctx, "acme.news", history.Position{Epoch: "e1", Offset: 2})
	fmt.Println("recovered:", r.Recovered)
	// Output:
	// 3 c
	// 4 d
	// recovered: true
	// recovered: false
}
