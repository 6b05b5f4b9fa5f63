package limit

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

func TestLimiterNeverAdmitsAboveLimit(t *testing.T) {
	const limit = 7
	f, err := NewFixed(limit)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := NewLimiter(LimiterConfig{Limit: f})
	if err != nil {
		t.Fatal(err)
	}
	var (
		inUse    atomic.Int64
		maxInUse atomic.Int64
		admitted atomic.Int64
		wg       sync.WaitGroup
	)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				tok, ok := lim.TryAcquire()
				if !ok {
					continue
				}
				admitted.Add(1)
				n := inUse.Add(1)
				casMax(&maxInUse, n)
				if n > limit {
					t.Errorf("goroutine %d: %d tokens in use above limit %d", g, n, limit)
				}
				if l := lim.InFlight(); l > limit {
					t.Errorf("goroutine %d: in-flight %d above limit %d", g, l, limit)
				}
				runtime.Gosched() // let other goroutines try while this one holds a slot
				inUse.Add(-1)
				switch i % 3 {
				case 0:
					tok.Success()
				case 1:
					tok.Ignore()
				default:
					tok.Drop()
				}
			}
		}()
	}
	wg.Wait()
	if got := lim.InFlight(); got != 0 {
		t.Errorf("in-flight %d after every token was released, want 0", got)
	}
	if admitted.Load() == 0 || maxInUse.Load() < 2 {
		t.Errorf("admitted %d, max in use %d: the test did not exercise concurrency", admitted.Load(), maxInUse.Load())
	}
	s := lim.Snapshot()
	if s.Acquired != admitted.Load() {
		t.Errorf("snapshot acquired %d, admitted %d", s.Acquired, admitted.Load())
	}
	if s.Acquired+s.Rejected != 16*2000 {
		t.Errorf("acquired %d + rejected %d != %d attempts", s.Acquired, s.Rejected, 16*2000)
	}
}

func TestLimiterPriorityCeilings(t *testing.T) {
	f, _ := NewFixed(100)
	clock := testkit.NewClock(simEpoch)
	lim, err := NewLimiter(LimiterConfig{Limit: f, Clock: clock, Reserve: Reserve{P0: 0.1, P1: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	var held []Token
	take := func(p Priority) int {
		n := 0
		for {
			tok, ok := lim.TryAcquirePriorityAt(p, clock.Now())
			if !ok {
				return n
			}
			held = append(held, tok)
			n++
		}
	}
	if n := take(P2); n != 70 {
		t.Errorf("P2 took %d slots of 100 with reserves 0.1 + 0.2, want 70", n)
	}
	if n := take(P1); n != 20 {
		t.Errorf("P1 took %d more slots, want 20", n)
	}
	if n := take(P0); n != 10 {
		t.Errorf("P0 took %d more slots, want 10", n)
	}
	if _, ok := lim.TryAcquireAt(clock.Now()); ok {
		t.Error("admitted above the limit")
	}
	if got := lim.Snapshot().RejectedByPriority; got != (Counts{1, 1, 1}) {
		t.Errorf("rejections by priority %v, want one each", got)
	}
	for _, tok := range held {
		tok.SuccessAt(clock.Now())
	}
	// P0 was rejected: at the next flush its reserve doubles.
	clock.Advance(time.Second)
	lim.FlushAt(clock.Now())
	if c := lim.Snapshot().Ceilings; c[P1] >= 90 || c[P2] >= c[P1] {
		t.Errorf("ceilings after a P0 rejection %v: P1 ceiling should drop below 90", c)
	}
}

func TestZeroTokenIsNoop(t *testing.T) {
	var tok Token
	tok.Success()
	tok.SuccessAt(simEpoch)
	tok.Ignore()
	tok.Drop()
	tok.DropAt(simEpoch)
	if _, ok := tok.Priority(); ok {
		t.Error("zero token has a priority")
	}
}

func TestLimiterSamplesAtHighRates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeEvery bool
		min, max  int64 // timed tokens expected in the second interval
	}{
		{name: "sampled", min: 40, max: 64},
		{name: "time every", timeEvery: true, min: 6400, max: 6400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := NewFixed(100)
			clock := testkit.NewClock(simEpoch)
			lim, err := NewLimiter(LimiterConfig{Limit: f, Clock: clock, TimeEvery: tc.timeEvery})
			if err != nil {
				t.Fatal(err)
			}
			interval := func() {
				for range 6400 { // 320,000 per second
					tok, ok := lim.TryAcquireAt(clock.Now())
					if !ok {
						t.Fatal("refused below the limit")
					}
					clock.Advance(3 * time.Microsecond)
					tok.SuccessAt(clock.Now())
				}
				clock.Advance(time.Millisecond)
				lim.FlushAt(clock.Now())
			}
			interval()
			first := f.Stats().Samples
			interval()
			second := f.Stats().Samples - first
			if second < tc.min || second > tc.max {
				t.Errorf("%d tokens timed in the second interval, want [%d, %d]", second, tc.min, tc.max)
			}
			if s := lim.Snapshot(); s.Acquired != 12800 || s.InFlight != 0 {
				t.Errorf("snapshot acquired %d in-flight %d, want 12800 and 0", s.Acquired, s.InFlight)
			}
		})
	}
}

func TestP0AlwaysFindsItsSlot(t *testing.T) {
	f, _ := NewFixed(10)
	lim, err := NewLimiter(LimiterConfig{Limit: f})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var floodAdmitted atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := P1 + Priority(g%2)
			for {
				select {
				case <-stop:
					return
				default:
				}
				tok, ok := lim.TryAcquirePriority(p)
				runtime.Gosched()
				if ok {
					floodAdmitted.Add(1)
					tok.Success()
				}
			}
		}()
	}
	for i := range 2000 {
		tok, ok := lim.TryAcquirePriority(P0)
		if !ok {
			t.Fatalf("P0 attempt %d refused with one P0 in flight at most, under a P1/P2 flood (in-flight %d)", i, lim.InFlight())
		}
		runtime.Gosched()
		tok.Success()
	}
	close(stop)
	wg.Wait()
	if floodAdmitted.Load() == 0 {
		t.Error("the flood admitted nothing: the test did not compete for slots")
	}
	if s := lim.Snapshot(); s.RejectedByPriority[P0] != 0 || s.InFlight != 0 {
		t.Errorf("snapshot: %d P0 refusals, in-flight %d", s.RejectedByPriority[P0], s.InFlight)
	}
}
