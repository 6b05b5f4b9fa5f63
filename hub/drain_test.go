package hub

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lxzan/gws"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/internal/testkit"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// drained is what one client saw of a drain.
type drained struct {
	goAway    bool
	drainFlag bool
	hint      time.Duration
	closeCode wire.CloseCode // from the close frame (WebSocket) or the status (gRPC); 0: none
}

// TestDrainReachesEverySessionWhateverTheDeadline holds 300 sessions (real
// clients on real sockets: WebSocket and gRPC, then WebSocket alone on a
// hub without a gRPC port, whose stop does not wait for gRPC handlers) on
// a hub whose drain rate (10/s) would need 30 s while its deadline is 2 s.
// Every session must get a GoAway marked drain with a retry hint in
// [1s, 2s] (spread, not one value), then a close frame 1001 (the gRPC
// status carrying 1001); the raised pace is logged.
func TestDrainReachesEverySessionWhateverTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ws, grpc int
	}{
		{"150 WebSocket and 150 gRPC sessions", 150, 150},
		{"300 WebSocket sessions, no gRPC port", 300, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testDrainReachesEverySession(t, tc.ws, tc.grpc) })
	}
}

func testDrainReachesEverySession(t *testing.T, nWS, nGRPC int) {
	var logs testkit.SyncBuffer
	th := startHub(t, func(c *Config, o *Options) {
		c.Drain = DrainConfig{Rate: 10, Deadline: 2 * time.Second, RetryAfter: time.Second}
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		if nGRPC == 0 {
			c.GRPCListen = ""
		}
	})
	codec, err := wire.NewCodec(wire.FormatProto, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tok := token(t, tokenOpts{})
	results := make([]drained, nWS+nGRPC)
	var wg sync.WaitGroup

	// WebSocket sessions.
	ws := make([]*rawWS, nWS)
	for i := range ws {
		r := dialRaw(t, th, wire.SubprotocolProto)
		if err := r.c.WriteMessage(gws.OpcodeBinary, helloFrame(t, tok)); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-r.frames:
			var f corralv1.ServerFrame
			if err := codec.DecodeServerFrame(b, &f); err != nil || f.GetWelcome() == nil {
				t.Fatalf("ws %d: %v %v, want Welcome", i, &f, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("ws %d: no Welcome", i)
		}
		ws[i] = r
	}

	// gRPC sessions, 15 streams on each of 10 connections.
	streams := make([]corralv1.Corral_ConnectClient, nGRPC)
	for i := range streams {
		if i%15 == 0 {
			cc, err := grpc.NewClient(th.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			api := corralv1.NewCorralClient(cc)
			for j := i; j < min(i+15, nGRPC); j++ {
				s, err := api.Connect(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Send(&corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: tok}}}); err != nil {
					t.Fatal(err)
				}
				if f, err := s.Recv(); err != nil || f.GetWelcome() == nil {
					t.Fatalf("grpc %d: %v %v, want Welcome", j, f, err)
				}
				streams[j] = s
			}
		}
	}
	for i, s := range streams {
		res := &results[nWS+i]
		wg.Go(func() {
			for {
				f, err := s.Recv()
				if err != nil {
					res.closeCode = wire.CloseFromStatus(err).Code
					return
				}
				if g := f.GetGoAway(); g != nil {
					res.goAway, res.drainFlag, res.hint = true, g.GetDrain(), time.Duration(g.GetRetryAfterMs())*time.Millisecond
				}
			}
		})
	}
	testkit.WaitFor(t, 15*time.Second, "every session counted", func() bool { return th.Sessions() == nWS+nGRPC })

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		done <- th.Shutdown(ctx)
	}()
	for i, r := range ws {
		res := &results[i]
		select {
		case <-r.closed:
		case <-time.After(60 * time.Second):
			t.Fatalf("ws %d: never closed", i)
		}
		r.mu.Lock()
		res.closeCode = r.code
		r.mu.Unlock()
		for more := true; more; {
			select {
			case b := <-r.frames:
				var f corralv1.ServerFrame
				if codec.DecodeServerFrame(b, &f) == nil && f.GetGoAway() != nil {
					g := f.GetGoAway()
					res.goAway, res.drainFlag, res.hint = true, g.GetDrain(), time.Duration(g.GetRetryAfterMs())*time.Millisecond
				}
			default:
				more = false
			}
		}
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	hints := map[time.Duration]bool{}
	bad := 0
	for i, res := range results {
		transport := "ws"
		if i >= nWS {
			transport = "grpc"
		}
		ok := res.goAway && res.drainFlag && res.hint >= time.Second && res.hint <= 2*time.Second && res.closeCode == wire.CloseGoingAway
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s session %d: %+v, want a drain GoAway with a hint in [1s, 2s], then close 1001", transport, i, res)
			}
		}
		hints[res.hint] = true
	}
	if bad > 0 {
		t.Fatalf("%d of %d sessions were not sent away properly", bad, len(results))
	}
	if len(hints) < 100 {
		t.Errorf("%d distinct retry hints over %d sessions: the hints are not spread", len(hints), len(results))
	}
	if got := th.metric("corral_hub_shed_total", "action", "drain"); got != float64(len(results)) {
		t.Errorf("shed{action=drain} = %v, want %d", got, len(results))
	}
	if !strings.Contains(logs.String(), "raising the drain pace") {
		t.Errorf("the raised pace was not logged:\n%s", logs.String())
	}
}

// TestSendAwayCountsASessionOnce sends one session away twice, as a stop
// does to a session the drain sent away that is still leaving when the
// drain deadline ends: it is counted once and sent one GoAway.
func TestSendAwayCountsASessionOnce(t *testing.T) {
	th := startHub(t, nil)
	codec, err := wire.NewCodec(wire.FormatProto, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, th, wire.SubprotocolProto)
	if err := r.c.WriteMessage(gws.OpcodeBinary, helloFrame(t, token(t, tokenOpts{}))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.frames: // Welcome
	case <-time.After(15 * time.Second):
		t.Fatal("no Welcome")
	}
	sessions := th.snapshotSessions()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(sessions))
	}
	th.sendAway(sessions[0], "hub draining")
	th.sendAway(sessions[0], "hub stopped")
	if code := r.waitClose(t); code != wire.CloseGoingAway {
		t.Fatalf("closed with %d, want %d", code, wire.CloseGoingAway)
	}
	goAways := 0
	for more := true; more; {
		select {
		case b := <-r.frames:
			var f corralv1.ServerFrame
			if codec.DecodeServerFrame(b, &f) == nil && f.GetGoAway() != nil {
				goAways++
			}
		default:
			more = false
		}
	}
	if goAways != 1 {
		t.Errorf("%d GoAways, want 1", goAways)
	}
	if got := th.metric("corral_hub_shed_total", "action", "drain"); got != 1 {
		t.Errorf("shed{action=drain} = %v, want 1", got)
	}
}
