package kraken

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// feed records the same random events into each recorder given (one
// agent's and the whole run's).
func feed(rnd *rand.Rand, t0 time.Time, recs ...*recorder) {
	reasons := []string{"close_1013", "dial_refused", "timeout", "http_503"}
	nodes := []string{"hub-1", "hub-2", "hub-3"}
	for range 2000 {
		at := t0.Add(time.Duration(rnd.Int64N(int64(20 * time.Second))))
		p := rnd.IntN(3)
		d := time.Duration(rnd.Int64N(int64(3 * time.Second)))
		k := rnd.IntN(10)
		reason := reasons[rnd.IntN(len(reasons))]
		node := nodes[rnd.IntN(len(nodes))]
		for _, rec := range recs {
			switch k {
			case 0:
				rec.attempt(at)
			case 1:
				rec.failure(reason, p)
				rec.failedAt(at, p)
			case 2:
				rec.welcome(nodes[p], p)
				rec.res.Latency.Welcome.Record(d)
			case 3:
				rec.disconnect("cut", p)
				rec.res.Latency.Connect.Record(d)
			case 4:
				rec.dropped(p%2, p)
			case 5:
				rec.back(p%2, at, d, 1+p, p)
			case 6:
				rec.resume(p == 0)
				rec.res.Latency.Resume.Record(d)
			case 7:
				rec.messages(func(m *Messages) { m.Received[priorityLabels[p]]++; m.Delivered[priorityLabels[p]]++; m.P0Expected++ })
				rec.res.Latency.Deliver[priorityLabels[p]].Record(d)
			case 8:
				rec.terminal(p)
			case 9: // a poison's counts and a kill
				st := rec.res.Storms[2]
				ta := []*TenantAttempts{st.Poisoned, st.Others}[p%2]
				ta.Attempts, ta.Welcomes, ta.Failed, ta.Lost, ta.HeldAtEnd = ta.Attempts+2, ta.Welcomes+1, ta.Failed+1, ta.Lost+1, ta.HeldAtEnd+int64(p)
				if p == 2 && reason == "timeout" {
					st.Killed = append(st.Killed, KilledOrigin{Origin: node, AtSeconds: at.Sub(t0).Seconds()})
				}
			}
		}
	}
}

func testRecorder(t0 time.Time) *recorder {
	rec := &recorder{res: newResult("merge")}
	rec.start.Store(t0.UnixNano())
	rec.res.Storms = testStorms()
	return rec
}

// testStorms are a drop, a mass close and a poison.
func testStorms() []*Storm {
	p := newStorm("poison", 3*time.Second)
	p.Tenant, p.Poisoned, p.Others = "t0", &TenantAttempts{}, &TenantAttempts{}
	return []*Storm{newStorm("drop", time.Second), newStorm("mass_close", 5*time.Second), p}
}

func asJSON(t *testing.T, r *Result) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMergeIsExact: two agents' results merged equal the result of one
// agent that saw every event (counters, series, histograms, storms and the
// derived percentiles), directly and through the JSON result (its
// histograms travel in their HDR encoding).
func TestMergeIsExact(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a, b, whole := testRecorder(t0), testRecorder(t0), testRecorder(t0)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 6 {
		if i%2 == 0 {
			feed(rnd, t0, a, whole)
		} else {
			feed(rnd, t0, b, whole)
		}
	}
	for s := range 20 {
		at := t0.Add(time.Duration(s)*time.Second + time.Millisecond)
		na, nb := int64(10+s), int64(3*s)
		a.held(at, na)
		b.held(at, nb)
		whole.held(at, na+nb)
		a.heldByOrigin(at, map[string]int64{"hub-1": na, "hub-2": 1})
		b.heldByOrigin(at, map[string]int64{"hub-1": nb, "hub-3": 2})
		whole.heldByOrigin(at, map[string]int64{"hub-1": na + nb, "hub-2": 1, "hub-3": 2})
	}
	a.res.Devices, b.res.Devices, whole.res.Devices = 100, 50, 150
	whole.res.Agents = 2
	whole.res.derive()

	merged := newResult("merge")
	merged.Agents = 0
	merged.Storms = testStorms()
	for _, r := range []*Result{a.res, b.res} {
		if err := merged.Merge(r); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := asJSON(t, merged), asJSON(t, whole.res); !bytes.Equal(got, want) {
		t.Errorf("merged result differs from the whole run's:\n got %s\nwant %s", got, want)
	}

	// Through JSON, as agents will send their results.
	var ja, jb Result
	if err := json.Unmarshal(asJSON(t, a.res), &ja); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(asJSON(t, b.res), &jb); err != nil {
		t.Fatal(err)
	}
	if err := ja.Merge(&jb); err != nil {
		t.Fatal(err)
	}
	if got, want := asJSON(t, &ja), asJSON(t, whole.res); !bytes.Equal(got, want) {
		t.Errorf("merged JSON results differ from the whole run's:\n got %s\nwant %s", got, want)
	}
	if !ja.Latency.Welcome.Equal(whole.res.Latency.Welcome) || ja.Storms[0].Back != whole.res.Storms[0].Back {
		t.Error("histograms or storms not equal after the JSON round trip")
	}
	if p := ja.Storms[2]; p.Others.Attempts == 0 || p.OthersSuccess == nil || len(p.Killed) < 2 || p.Killed[0].AtSeconds > p.Killed[1].AtSeconds {
		t.Errorf("poison storm after the merge: others %+v, success %v, killed %v; want counts, a success, kills in time order", *p.Others, p.OthersSuccess, p.Killed)
	}
	if whole.res.Storms[0].Back50Ms == nil {
		t.Error("no back_50_ms in a storm with devices back")
	}
}

// TestMergeRefusesOtherRuns: results of another scenario or other storms
// do not merge.
func TestMergeRefusesOtherRuns(t *testing.T) {
	a, b := newResult("a"), newResult("b")
	if err := a.Merge(b); err == nil {
		t.Error("merged results of two scenarios")
	}
	c := newResult("a")
	c.Storms = []*Storm{newStorm("drop", time.Second)}
	if err := a.Merge(c); err == nil {
		t.Error("merged results with different storms")
	}
}

// TestBackWithin: the time until a share of the dropped devices is back is
// the rank-th smallest time, and not reached when fewer came back.
func TestBackWithin(t *testing.T) {
	s := newStorm("drop", 0)
	s.Dropped = 10
	for i := 1; i <= 9; i++ {
		s.Back++
		s.BackAfter.Record(time.Duration(i) * 100 * time.Millisecond)
	}
	for _, tc := range []struct {
		share float64
		want  time.Duration
		ok    bool
	}{{0.5, 500 * time.Millisecond, true}, {0.9, 900 * time.Millisecond, true}, {0.99, 0, false}, {1, 0, false}} {
		got, ok := s.BackWithin(tc.share)
		if ok != tc.ok || (ok && (got < tc.want-time.Millisecond || got > tc.want+time.Millisecond)) {
			t.Errorf("BackWithin(%v) = %v, %v; want %v, %v", tc.share, got, ok, tc.want, tc.ok)
		}
	}
}

// TestBackSinceCountsFromTheStorm: a device that saw its drop 2 s after
// the storm began (at 1 s into the run) and was back 1 s later is back
// 1 s after its drop and 3 s after the storm's start; since_99_ms reads
// the latter, back_99_ms the former.
func TestBackSinceCountsFromTheStorm(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	rec := testRecorder(t0)
	rec.dropped(0, 0)
	rec.back(0, t0.Add(4*time.Second), time.Second, 1, 0)
	rec.res.derive()
	s := rec.res.Storms[0]
	if s.Back99Ms == nil || s.Since99Ms == nil {
		t.Fatalf("back_99_ms %v, since_99_ms %v: want both", s.Back99Ms, s.Since99Ms)
	}
	if math.Abs(*s.Back99Ms-1000) > 5 || math.Abs(*s.Since99Ms-3000) > 15 {
		t.Errorf("back_99_ms %.1f, since_99_ms %.1f: want 1000 and 3000", *s.Back99Ms, *s.Since99Ms)
	}
}
