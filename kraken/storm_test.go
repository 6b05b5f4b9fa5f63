package kraken

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/limit"
)

// fixedAdmission admits its first free sessions (the warm-up), then new
// sessions at rate per second (a token bucket of one), refusing the rest
// with 1013 and no hint: the reconnect policy alone paces the devices.
type fixedAdmission struct {
	mu     sync.Mutex
	free   int
	rate   float64
	tokens float64
	last   time.Time
}

func (a *fixedAdmission) AdmitAt(_ limit.Priority, now time.Time) limit.Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.free > 0 {
		a.free--
		a.last = now
		return limit.Decision{Admit: true}
	}
	a.tokens = min(a.tokens+now.Sub(a.last).Seconds()*a.rate, 1)
	a.last = now
	if a.tokens >= 1 {
		a.tokens--
		return limit.Decision{Admit: true}
	}
	return limit.Decision{}
}

func (a *fixedAdmission) SeverQuotaAt(limit.Counts, time.Time) limit.Counts { return limit.Counts{} }
func (a *fixedAdmission) RetryWindowAt(limit.Priority, time.Time) limit.Retry {
	return limit.Retry{}
}

const stormScenario = `
name: storm-POLICY
duration: 30s
population: {devices: 60, initial: 60, protocol: websocket}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 20}]
client:
  backoff: {policy: POLICY, base: BASE, cap: 2s}
traffic:
  disconnects:
    - {at: 500ms, share: 1}
stop: {on_recovery: true, max_attempts: 150000}
`

// stormRun drops every session of 60 devices at once on a hub that takes
// 20 new sessions a second, with the given reconnect policy. The devices
// need 3 s to be back whatever the policy; with none they retry as fast
// as the machine turns refusals round (13,000 attempts/s on an idle
// 2-core machine, so 40,000 in those 3 s): max_attempts bounds the run
// well above that, not inside it (20,000 stopped an idle machine's none
// run with half the fleet out).
func stormRun(t *testing.T, policy string) *Result {
	h := startHub(t, hub.Options{Overload: &fixedAdmission{free: 60, rate: 20}})
	base := "100ms"
	if policy == "none" {
		base = "0s" // retry at once
	}
	sc := loadScenario(t, policy+".yaml", strings.NewReplacer("POLICY", policy, "BASE", base).Replace(stormScenario))
	return runScenario(t, sc, Config{Targets: []string{h.url()}, Token: testToken(testSecret)})
}

// meanAttempts is the mean of the attempts the devices back needed.
func meanAttempts(s *Storm) float64 {
	var n, sum int64
	for k, v := range s.AttemptsToBack {
		a, _ := strconv.Atoi(k)
		n += v
		sum += int64(a) * v
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// TestStormNoneVersusFullJitter: the same storm (every session dropped at
// once) against a hub with a fixed admission rate, once with backoff
// policy none (retry at once) and once with full jitter: kraken reports
// the larger peak of attempts per second and more attempts per device
// for none.
func TestStormNoneVersusFullJitter(t *testing.T) {
	if testing.Short() {
		t.Skip("two storms against a hub")
	}
	none, full := stormRun(t, "none"), stormRun(t, "full")
	t.Logf("none: failures %v disconnects %v terminal %v welcomes %v", none.Failures, none.Disconnects, none.Terminal, none.Welcomes)
	ns, fs := none.Storms[0], full.Storms[0]
	t.Logf("none: peak %d attempts/s, %.1f attempts per device back (%d of %d back), stopped by %s", none.PeakAttemptsPerSecond, meanAttempts(ns), ns.Back, ns.Dropped, none.Stopped)
	t.Logf("full: peak %d attempts/s, %.1f attempts per device back (%d of %d back), stopped by %s", full.PeakAttemptsPerSecond, meanAttempts(fs), fs.Back, fs.Dropped, full.Stopped)
	// At least the 60 cut by the drop: a session the hub loses later
	// under the herd (a ping answered late on a loaded machine) counts for
	// the storm too.
	if ns.Dropped < 60 || fs.Dropped < 60 || ns.Back != ns.Dropped || fs.Back != fs.Dropped {
		t.Fatalf("dropped %d and %d, back %d and %d; want all 60 each time, all back", ns.Dropped, fs.Dropped, ns.Back, fs.Back)
	}
	// The failures of the series are every failed attempt of the run
	// (none in the warm-up, which the hub admits freely).
	var series int64
	for _, v := range none.FailuresPerSecond["p0"] {
		series += v
	}
	var attemptFailures int64
	for reason, c := range none.Failures {
		if !strings.HasPrefix(reason, "subscribe_") {
			attemptFailures += c.Total()
		}
	}
	if series != attemptFailures || series == 0 {
		t.Errorf("failures per second add up to %d, the failures by reason to %d", series, attemptFailures)
	}
	if none.PeakAttemptsPerSecond <= full.PeakAttemptsPerSecond {
		t.Errorf("peak attempts/s: none %d, full %d; want none larger", none.PeakAttemptsPerSecond, full.PeakAttemptsPerSecond)
	}
	if none.AttemptsPerDevice <= full.AttemptsPerDevice || meanAttempts(ns) <= meanAttempts(fs) {
		t.Errorf("attempts per device: none %.2f (%.2f to back), full %.2f (%.2f); want more for none",
			none.AttemptsPerDevice, meanAttempts(ns), full.AttemptsPerDevice, meanAttempts(fs))
	}
	if none.Failures["close_1013"].Total() == 0 {
		t.Errorf("no 1013 refusal counted for none: %v", none.Failures)
	}
}
