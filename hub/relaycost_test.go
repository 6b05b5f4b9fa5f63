package hub

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire/corralv1"
)

// TestRelayCosts measures, hub and test edge in one process, the Go heap
// that an idle relayed session holds (Hello and one subscription) and the
// allocations of one relayed delivery (hub and edge sides together: the
// Send, gRPC's framing, the edge's Recv). Run without -race:
//
//	go test -count=1 -run TestRelayCosts -v ./hub/
func TestRelayCosts(t *testing.T) {
	if relayRace {
		t.Skip("heap and allocation figures: run without -race")
	}
	th := startHub(t, nil)
	stream, _ := openRelay(t, th, "Bearer "+testRelayKey)
	var subscribed, delivered atomic.Int64
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				return
			}
			switch {
			case f.GetServer().GetMessage() != nil:
				delivered.Add(1)
			case f.GetServer().GetSubscribed() != nil:
				subscribed.Add(1)
			}
		}
	}()
	tok := token(t, tokenOpts{})
	const n = 2000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for tag := uint64(1); tag <= n; tag++ {
		_ = stream.Send(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Open{Open: &corralv1.RelayOpen{Transport: "ws"}}})
		_ = stream.Send(&corralv1.RelayFrame{Session: tag, Frame: &corralv1.RelayFrame_Client{Client: hello(tok, 0, "news")}})
	}
	testkit.WaitFor(t, 60*time.Second, "every session subscribed", func() bool { return subscribed.Load() == n })
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSession := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("heap per idle relayed session: %d B (%d sessions)", perSession, n)

	const msgs = 20
	runtime.ReadMemStats(&before)
	for i := range msgs {
		if _, err := th.Publish(context.Background(), PublishRequest{Tenant: "acme", Channel: "news", Data: make([]byte, 256)}); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 60*time.Second, "the message delivered", func() bool { return delivered.Load() == int64((i+1)*n) })
	}
	runtime.ReadMemStats(&after)
	d := float64(msgs * n)
	allocs, bytes := float64(after.Mallocs-before.Mallocs)/d, float64(after.TotalAlloc-before.TotalAlloc)/d
	t.Logf("per relayed delivery of 256 bytes, hub and edge: %.1f allocations, %.0f B", allocs, bytes)
	if perSession > 2048 { // 883 to 1,186 B measured
		t.Errorf("an idle relayed session holds %d B of heap, want at most 2 KiB", perSession)
	}
	if allocs > 24 { // 21.4 measured; most are gRPC's, on both sides
		t.Errorf("%.1f allocations per relayed delivery, want at most 24", allocs)
	}
}
