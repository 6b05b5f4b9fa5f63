package health

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var errDown = errors.New("down")

func tcpCheck(name string) CheckConfig {
	return CheckConfig{Name: name, Kind: KindTCP, Address: "127.0.0.1:1", FailureThreshold: 1}
}

func TestCalculatedNOfM(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{
		tcpCheck("a"), tcpCheck("b"), tcpCheck("c"), tcpCheck("d"),
		{Name: "two-of-three", Kind: KindCalculated, Children: []string{"a", "b", "c"}, MinHealthy: 2},
		{Name: "all", Kind: KindCalculated, Children: []string{"two-of-three", "d"}},
	}}, Options{})
	var mu sync.Mutex
	var changes []string
	c.Subscribe(func(ch Change) {
		mu.Lock()
		changes = append(changes, fmt.Sprintf("%s=%v", ch.Name, ch.Healthy))
		mu.Unlock()
	})
	set := func(name string, up bool) {
		var err error
		if !up {
			err = errDown
		}
		if _, e := c.Observe(name, err); e != nil {
			t.Fatal(e)
		}
	}
	steps := []struct {
		name     string
		up       bool
		want2of3 bool
		wantAll  bool
	}{
		{"a", false, true, true},   // 2 of 3
		{"b", false, false, false}, // 1 of 3
		{"a", true, true, true},    // 2 of 3 again
		{"d", false, true, false},  // nested: d down
		{"d", true, true, true},
		{"c", false, false, false},
	}
	for i, s := range steps {
		set(s.name, s.up)
		if got := c.Healthy("two-of-three"); got != s.want2of3 {
			t.Fatalf("step %d (%s up=%v): two-of-three = %v", i, s.name, s.up, got)
		}
		if got := c.Healthy("all"); got != s.wantAll {
			t.Fatalf("step %d (%s up=%v): all = %v", i, s.name, s.up, got)
		}
	}
	st, _ := c.StatusOf("two-of-three")
	if st.LastError != "1 of 3 children healthy, need 2" || st.Successes != 1 || st.Failures != 2 {
		t.Errorf("status %+v", st)
	}
	want := []string{"a=false", "b=false", "two-of-three=false", "all=false", "a=true", "two-of-three=true", "all=true",
		"d=false", "all=false", "d=true", "all=true", "c=false", "two-of-three=false", "all=false"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(changes, want) {
		t.Errorf("changes\n got %v\nwant %v", changes, want)
	}
	if _, err := c.Observe("all", nil); err == nil {
		t.Error("Observe on a calculated check succeeded")
	}
}

func TestCalculatedInitialFromChildren(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{
		{Name: "x", Kind: KindTCP, Address: "h:1", Initial: InitialUnhealthy},
		{Name: "y", Kind: KindTCP, Address: "h:1"},
		{Name: "both", Kind: KindCalculated, Children: []string{"x", "y"}},
		{Name: "any", Kind: KindCalculated, Children: []string{"x", "y"}, MinHealthy: 1},
	}}, Options{})
	if c.Healthy("both") || !c.Healthy("any") {
		t.Errorf("both=%v any=%v, want false true", c.Healthy("both"), c.Healthy("any"))
	}
}

func TestForceAndUnforce(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{
		tcpCheck("a"), tcpCheck("b"),
		{Name: "any", Kind: KindCalculated, Children: []string{"a", "b"}, MinHealthy: 1},
	}}, Options{})
	if err := c.Force("a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Observe("a", nil); err != nil {
		t.Fatal(err)
	}
	if c.Healthy("a") {
		t.Fatal("a forced down turned healthy on a passed probe")
	}
	if st, _ := c.StatusOf("a"); !st.Forced || st.Successes != 1 {
		t.Errorf("status %+v", st)
	}
	_ = c.Force("b", false)
	if c.Healthy("any") {
		t.Fatal("calculated check healthy with both children forced down")
	}
	_ = c.Unforce("a") // one success >= threshold 1: healthy at once
	if !c.Healthy("a") || !c.Healthy("any") {
		t.Fatalf("after Unforce a=%v any=%v", c.Healthy("a"), c.Healthy("any"))
	}
	_ = c.Force("any", false)
	if c.Healthy("any") {
		t.Fatal("forced calculated check follows its children")
	}
	_ = c.Unforce("any")
	if !c.Healthy("any") {
		t.Fatal("unforced calculated check did not follow its children")
	}
	if err := c.Force("nope", true); err == nil {
		t.Error("Force of an unknown check succeeded")
	}
}

func TestUpdateKeepsUnchangedState(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Checks: []CheckConfig{tcpCheck("keep"), tcpCheck("change"), tcpCheck("drop")}}
	c := mustNew(t, cfg, Options{Registerer: reg})
	for _, n := range []string{"keep", "change", "drop"} {
		_, _ = c.Observe(n, errDown)
	}
	var got []string
	c.Subscribe(func(ch Change) { got = append(got, fmt.Sprintf("%s=%v %s", ch.Name, ch.Healthy, ch.Reason)) })
	changed := tcpCheck("change")
	changed.Address = "127.0.0.1:2"
	keepDefaults := tcpCheck("keep")
	keepDefaults.Interval = DefaultInterval // the same definition once defaults apply
	next := Config{Checks: []CheckConfig{keepDefaults, changed, tcpCheck("new"),
		{Name: "calc", Kind: KindCalculated, Children: []string{"keep", "new"}, MinHealthy: 1}}}
	if err := c.Update(next); err != nil {
		t.Fatal(err)
	}
	if c.Healthy("keep") {
		t.Error("unchanged check lost its unhealthy state")
	}
	if !c.Healthy("change") || !c.Healthy("new") || !c.Healthy("calc") {
		t.Error("changed or new check did not start in its initial state")
	}
	if c.Healthy("drop") {
		t.Error("removed check still answers")
	}
	if want := []string{"change=true configuration reloaded"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	// Removing a healthy check is a change to unhealthy.
	got = nil
	if err := c.Update(Config{Checks: []CheckConfig{keepDefaults, tcpCheck("new")}}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"change=false removed from the configuration", "calc=false removed from the configuration"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	if err := c.Update(next); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.StatusOf("keep"); st.Probes != 1 {
		t.Errorf("unchanged check lost its counters: %+v", st)
	}
	if n, _ := testutil.GatherAndCount(reg, "corral_health_check_healthy"); n != 4 {
		t.Errorf("state series = %d, want 4 (drop removed)", n)
	}
	bad := Config{Checks: []CheckConfig{tcpCheck("keep"), tcpCheck("keep")}}
	if err := c.Update(bad); err == nil {
		t.Fatal("Update accepted duplicate names")
	}
	if got := len(c.Status()); got != 4 {
		t.Errorf("a failed Update changed the checks: %d", got)
	}
}

// TestUpdateKeepsStateWhenTheTargetStays edits every field of a dead check
// but its target: it stays dead with its counters (it was re-admitted until
// it failed again). A new target starts over in the initial state.
func TestUpdateKeepsStateWhenTheTargetStays(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("lb")}}, Options{})
	if up, _ := c.Observe("lb", errDown); up {
		t.Fatal("a failed probe with threshold 1 left the check healthy")
	}
	before, _ := c.StatusOf("lb")
	edited := tcpCheck("lb")
	edited.Interval, edited.Timeout = 7*time.Second, 3*time.Second
	edited.FailureThreshold, edited.SuccessThreshold = 5, 4
	edited.Initial = InitialHealthy
	var changes []Change
	c.Subscribe(func(ch Change) { changes = append(changes, ch) })
	if err := c.Update(Config{Checks: []CheckConfig{edited}}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.StatusOf("lb")
	if c.Healthy("lb") || st.Healthy || st.Probes != before.Probes || !st.Since.Equal(before.Since) || len(changes) != 0 {
		t.Fatalf("after an edit that kept the target: healthy %v, status %+v (was %+v), changes %v; want the dead state kept", c.Healthy("lb"), st, before, changes)
	}
	moved := edited
	moved.Address = "127.0.0.1:2"
	if err := c.Update(Config{Checks: []CheckConfig{moved}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.StatusOf("lb"); !c.Healthy("lb") || st.Probes != 0 {
		t.Fatalf("a new target kept the old state: %+v", st)
	}
}

// TestUpdateWhileRunning adds and removes checks under Run and sees the
// new check probed and the removed one stop.
func TestUpdateWhileRunning(t *testing.T) {
	o := newOrigin(t)
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("old")}}, Options{})
	_, stop := startRun(t, c)
	defer stop()
	if err := c.Update(Config{Checks: []CheckConfig{{Name: "web", Kind: KindHTTP, URL: o.URL, Interval: 20 * time.Millisecond}}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the new check to be probed", func() bool {
		st, ok := c.StatusOf("web")
		return ok && st.Probes >= 2
	})
	if _, ok := c.StatusOf("old"); ok {
		t.Error("the removed check is still listed")
	}
}

func TestFirstProbesSpreadOverTheInterval(t *testing.T) {
	const n, interval = 1000, 30 * time.Second
	cfg := Config{}
	for i := range n {
		cfg.Checks = append(cfg.Checks, CheckConfig{Name: fmt.Sprintf("c%d", i), Kind: KindTCP, Address: "h:1"})
	}
	c := mustNew(t, cfg, Options{Rand: rand.New(rand.NewPCG(1, 2))})
	// The first delay of each check, as start draws it.
	const buckets = 10
	var count [buckets]int
	seen := map[time.Duration]bool{}
	for _, ch := range c.tab.Load().list {
		d := firstDelay(ch.cfg.Interval, ch.rng.Float64())
		if d < 0 || d >= interval {
			t.Fatalf("first delay %v outside [0, %v)", d, interval)
		}
		seen[d] = true
		count[int(d*buckets/interval)]++
	}
	if len(seen) < n-1 {
		t.Errorf("only %d distinct first delays of %d: checks share sources", len(seen), n)
	}
	// Chi-square against uniform, 9 degrees of freedom: 27.88 is p=0.001.
	chi := 0.0
	for _, k := range count {
		e := float64(n) / buckets
		chi += (float64(k) - e) * (float64(k) - e) / e
	}
	if chi > 27.88 {
		t.Errorf("first delays not uniform: buckets %v, chi-square %.1f", count, chi)
	}
}

func TestNextDelayJitterBounds(t *testing.T) {
	const interval = 10 * time.Second
	tests := []struct {
		name     string
		jitter   float64
		lo, hi   time.Duration
		distinct bool
	}{
		{name: "no jitter", jitter: 0, lo: interval, hi: interval},
		{name: "10 percent", jitter: 0.1, lo: 9 * time.Second, hi: 11 * time.Second, distinct: true},
		{name: "max", jitter: MaxJitter, lo: 5 * time.Second, hi: 15 * time.Second, distinct: true},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
			for range 10000 {
				d := nextDelay(interval, tc.jitter, rng.Float64())
				lo, hi = min(lo, d), max(hi, d)
			}
			if lo < tc.lo || hi > tc.hi {
				t.Errorf("delays in [%v, %v], want within [%v, %v]", lo, hi, tc.lo, tc.hi)
			}
			if tc.distinct && hi-lo < (tc.hi-tc.lo)*9/10 {
				t.Errorf("delays in [%v, %v] do not cover [%v, %v]", lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

func TestRefFollowsTheNameAcrossUpdate(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("a"), tcpCheck("b")}}, Options{})
	ra, ok := c.Ref("a")
	if !ok || !ra.Healthy() {
		t.Fatal("Ref of a healthy check")
	}
	early, ok := c.Ref("later")
	if ok || early.Healthy() {
		t.Error("Ref of a check not configured yet: configured, or healthy")
	}
	if (Ref{}).Healthy() {
		t.Error("zero Ref is healthy")
	}
	_, _ = c.Observe("a", errDown)
	if ra.Healthy() {
		t.Fatal("Ref did not follow a transition")
	}
	// A changed definition starts in its initial state; the Ref follows.
	changed := tcpCheck("a")
	changed.Address = "127.0.0.1:2"
	if err := c.Update(Config{Checks: []CheckConfig{changed, tcpCheck("b")}}); err != nil {
		t.Fatal(err)
	}
	if !ra.Healthy() {
		t.Fatal("Ref kept the old definition's state")
	}
	_ = c.Update(Config{Checks: []CheckConfig{tcpCheck("b")}})
	if ra.Healthy() {
		t.Fatal("Ref of a removed check is healthy")
	}
	_ = c.Update(Config{Checks: []CheckConfig{tcpCheck("a"), tcpCheck("b"), tcpCheck("later")}})
	if !ra.Healthy() {
		t.Fatal("Ref did not follow the check's return")
	}
	if !early.Healthy() {
		t.Fatal("a Ref taken before its check was configured did not follow it")
	}
	_, _ = c.Observe("a", errDown)
	if ra.Healthy() != c.Healthy("a") || ra.Healthy() {
		t.Fatal("Ref and Healthy disagree")
	}
}

// TestSubscribersSeeChangesInOrder flips two children of a calculated
// check from two goroutines: every name's changes must alternate, and the
// last one delivered must be the state the Checker holds.
func TestSubscribersSeeChangesInOrder(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{
		tcpCheck("a"), tcpCheck("b"),
		{Name: "both", Kind: KindCalculated, Children: []string{"a", "b"}},
	}}, Options{})
	last := map[string]bool{"a": true, "b": true, "both": true}
	var mu sync.Mutex
	var inCall, broken atomic.Int32
	counts := map[string]int{}
	c.Subscribe(func(ch Change) {
		if inCall.Add(1) != 1 {
			broken.Add(1) // two calls at once
		}
		defer inCall.Add(-1)
		runtime.Gosched() // widen the window for an overlapping call
		mu.Lock()
		defer mu.Unlock()
		if last[ch.Name] == ch.Healthy {
			broken.Add(1) // not a change from the last delivered state
		}
		last[ch.Name] = ch.Healthy
		counts[ch.Name]++
	})
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Go(func() {
			for i := range 2000 {
				var err error
				if i%2 == 0 {
					err = errDown
				}
				if _, e := c.Observe(name, err); e != nil {
					t.Error(e)
				}
			}
		})
	}
	wg.Wait()
	if n := broken.Load(); n != 0 {
		t.Errorf("%d deliveries out of order or overlapping", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, v := range last {
		if v != c.Healthy(name) {
			t.Errorf("%s: last delivered %v, state %v", name, v, c.Healthy(name))
		}
	}
	if counts["a"] != 2000 || counts["b"] != 2000 || counts["both"] < 2 {
		t.Errorf("counts %v", counts)
	}
}

func TestSubscriberMayCallTheChecker(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("a"), tcpCheck("b")}}, Options{})
	var got []string
	c.Subscribe(func(ch Change) {
		got = append(got, fmt.Sprintf("%s=%v", ch.Name, ch.Healthy))
		if ch.Name == "a" && !ch.Healthy {
			if err := c.Force("b", false); err != nil {
				t.Error(err)
			}
			if err := c.Update(Config{Checks: []CheckConfig{tcpCheck("a"), tcpCheck("b"), tcpCheck("c")}}); err != nil {
				t.Error(err)
			}
		}
	})
	if _, err := c.Observe("a", errDown); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=false", "b=false"}; !slices.Equal(got, want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
	if !c.Healthy("c") {
		t.Error("Update from a subscriber did not apply")
	}
}
