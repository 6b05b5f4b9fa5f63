package drain

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestNewPlan(t *testing.T) {
	const rate, deadline = 1000, 30 * time.Second // the servers' defaults
	tests := []struct {
		name     string
		n, rate  int
		deadline time.Duration
		wantPace float64
		raised   bool
	}{
		{name: "the rate meets the deadline", n: 20_000, rate: rate, deadline: deadline, wantPace: 1000},
		{name: "exactly at the rate", n: 27_001, rate: rate, deadline: deadline, wantPace: 1000},
		{name: "40,000 sessions at the defaults", n: 40_000, rate: rate, deadline: deadline, wantPace: 39_999 / 27.0, raised: true},
		{name: "a short deadline", n: 300, rate: 10, deadline: 2 * time.Second, wantPace: 299 / 1.8, raised: true},
		{name: "a deadline of a nanosecond: all at once", n: 300, rate: 10, deadline: 1, wantPace: 300_000, raised: true},
		{name: "one session", n: 1, rate: 1, deadline: time.Millisecond, wantPace: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlan(tc.n, tc.rate, tc.deadline)
			if p.N != tc.n || p.Raised != tc.raised || p.Pace < tc.wantPace*0.999 || p.Pace > tc.wantPace*1.001 {
				t.Fatalf("plan %+v, want pace %v (raised %v)", p, tc.wantPace, tc.raised)
			}
			if last := time.Duration(float64(tc.n-1) / p.Pace * float64(time.Second)); last > p.SendBy+time.Millisecond || p.SendBy >= tc.deadline {
				t.Fatalf("last GoAway at %v, sendBy %v, deadline %v", last, p.SendBy, tc.deadline)
			}
		})
	}
}

// TestSendPacesInOrder runs a plan of 300 at 10/s within 2 s (raised to
// 299/1.8 s) in a bubble: every index is sent once, in order, the first at
// once and the last by SendBy, none ahead of the pace.
func TestSendPacesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPlan(300, 10, 2*time.Second)
		start := time.Now()
		next := 0
		p.Send(context.Background(), func(i int) {
			if i != next {
				t.Fatalf("sent %d, want %d", i, next)
			}
			next++
			el := time.Since(start)
			if ahead := float64(i) - el.Seconds()*p.Pace; ahead > 1 {
				t.Fatalf("session %d sent at %v: %.1f ahead of the pace %v", i, el, ahead, p.Pace)
			}
		})
		if next != 300 {
			t.Fatalf("sent %d of 300", next)
		}
		period := time.Duration(float64(time.Second) / p.Pace)
		if el := time.Since(start); el > p.SendBy+period {
			t.Fatalf("the last sent at %v, want by %v and a tick (%v)", el, p.SendBy, period)
		}
	})
}

// TestSendEndedContextSendsTheRestAtOnce: when ctx ends halfway, the rest
// go out at once, never left unsent.
func TestSendEndedContextSendsTheRestAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPlan(100, 10, time.Minute) // 10 s at the pace
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		sent := 0
		p.Send(ctx, func(int) { sent++ })
		if sent != 100 {
			t.Fatalf("sent %d of 100", sent)
		}
		if el := time.Since(start); el > 2*time.Second+minPeriod {
			t.Fatalf("returned after %v, want at the end of ctx (2s)", el)
		}
	})
}

func TestSendNothing(t *testing.T) {
	Plan{}.Send(context.Background(), func(int) { t.Fatal("sent with N 0") })
}

func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var left atomic.Int64
		left.Store(3)
		go func() {
			for left.Load() > 0 {
				time.Sleep(time.Second)
				left.Add(-1)
			}
		}()
		Await(context.Background(), func() int { return int(left.Load()) })
		if n := left.Load(); n != 0 {
			t.Fatalf("returned with %d left", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		Await(ctx, func() int { return 1 })
		if el := time.Since(start); el < time.Second {
			t.Fatalf("returned after %v with a session left, want at the end of ctx", el)
		}
	})
}

func TestHint(t *testing.T) {
	base := time.Second
	seen := map[time.Duration]bool{}
	for range 200 {
		h := Hint(base)
		if h < base || h > 2*base {
			t.Fatalf("hint %v, want in [%v, %v]", h, base, 2*base)
		}
		seen[h] = true
	}
	if len(seen) < 100 {
		t.Fatalf("%d distinct hints of 200: not spread", len(seen))
	}
	if h := Hint(0); h != 0 {
		t.Fatalf("Hint(0) = %v", h)
	}
}
