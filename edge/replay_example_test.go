package edge_test

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/wire/corralv1"
)

// A session's view of the replay cache: every relayed message goes through
// Add; a resume is answered by Resume, from the cache when it covers it,
// else by one leader upstream that the identical resumes wait for.
func ExampleReplayCache() {
	cache, err := edge.NewReplayCache(edge.ReplayConfig{}, edge.ReplayOptions{})
	if err != nil {
		panic(err)
	}
	for off := uint64(1); off <= 3; off++ { // relayed to some device
		cache.Add("acme", &corralv1.Message{Channel: "alerts", Epoch: "e1", Offset: off,
			Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("alert")})
	}

	// A device resumes from offset 1: covered.
	a := cache.Resume("acme", "alerts", &corralv1.Position{Epoch: "e1", Offset: 1})
	fmt.Println(a.Kind, len(a.Messages), "cached, upstream from", a.Last.GetOffset())

	// Two devices resume from an offset the cache has not seen: the first
	// leads upstream, the second waits for it.
	from := &corralv1.Position{Epoch: "e1", Offset: 5}
	lead := cache.Resume("acme", "news", from)
	wait := cache.Resume("acme", "news", from)
	fmt.Println(lead.Kind, wait.Kind)
	for off := uint64(6); off <= 7; off++ { // the leader's catch-up
		cache.Add("acme", &corralv1.Message{Channel: "news", Epoch: "e1", Offset: off,
			Priority: corralv1.Priority_PRIORITY_P0, Data: []byte("story")})
	}
	lead.Ticket.Done(&corralv1.Position{Epoch: "e1", Offset: 7}) // deliveries reached Subscribed.position
	b := wait.Wait.Answer(context.Background())
	fmt.Println(b.Kind, b.Coalesced, len(b.Messages), "cached")

	s := cache.Stats()
	fmt.Println("hits", s.Hits, "misses", s.Misses, "coalesced", s.Coalesced)
	// Output:
	// hit 2 cached, upstream from 3
	// lead wait
	// hit true 2 cached
	// hits 1 misses 1 coalesced 1
}
