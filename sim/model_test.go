package sim

import (
	"math"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/scenario"
)

// pooled is a surge of 500,000 devices in 10 s onto 2 origins whose TLS
// handshake rate alone (2,000/s each) could not take them, but whose
// stream set-up rate (100,000/s each) can.
func pooled(spc int) *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:       "pooled",
		Duration:   2 * time.Minute,
		Population: scenario.Population{Devices: 500_000},
		Geography:  scenario.Geography{PoPs: 4, HostsPerPoP: 4},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Edge:       scenario.Edge{Pick: "random", StreamsPerConnection: spc},
		Origins: []scenario.Origin{{Name: "lb", Count: 2, MaxConnections: 400_000,
			MaxNewPerSecond: 2_000, MaxNewStreamsPerSecond: 100_000, Backlog: 200_000}},
		Client:  scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic: scenario.Traffic{Arrivals: []scenario.Arrival{{At: 5 * time.Second, Over: 10 * time.Second, Devices: 500_000}}},
	}
	sc.WithDefaults()
	return sc
}

// TestPoolingChargesHandshakesPerConnection: over pooled upstream
// connections (100 streams each) the origins open about one connection
// per 100 devices and the surge connects without an error; with a
// connection per stream the handshake rate is the bound and attempts
// fail.
func TestPoolingChargesHandshakesPerConnection(t *testing.T) {
	r := mustNew(t, pooled(100)).Run(nil)
	var opened int64
	for _, st := range r.Steps {
		for _, o := range st.Origins {
			opened += o.NewConnections
		}
	}
	last := r.Steps[len(r.Steps)-1]
	held := last.Origins[0].Connections + last.Origins[1].Connections
	t.Logf("pooled: errors %d, connections opened %d, held %d, devices %d", r.Summary.AttemptErrors, opened, held, r.Summary.FinalConnected)
	if r.Summary.AttemptErrors != 0 || r.Summary.FinalConnected != 500_000 {
		t.Errorf("pooled: %d failed attempts, %d connected; want none failed, all connected", r.Summary.AttemptErrors, r.Summary.FinalConnected)
	}
	if math.Abs(float64(held)-5_000) > 10 || opened < 5_000 || opened > 5_100 {
		t.Errorf("pooled: %d connections held, %d opened; want about 500,000/100", held, opened)
	}
	u := mustNew(t, pooled(1)).Run(nil).Summary
	t.Logf("unpooled: errors %d of %d attempts", u.AttemptErrors, u.Attempts)
	if u.AttemptErrors < u.Attempts/4 {
		t.Errorf("unpooled: %d failed of %d attempts; the handshake rate should bound it", u.AttemptErrors, u.Attempts)
	}
}

// TestPooledAdmissionFollowsStreamRate: adaptive admission over pooled
// connections is sized by the stream set-up rate of the pooled mix, not
// by the handshake rate alone: the surge the origins set up without
// admission control is not shed with it.
func TestPooledAdmissionFollowsStreamRate(t *testing.T) {
	sc := pooled(100)
	sc.Overload.Mode = "adaptive"
	r := mustNew(t, sc).Run(nil).Summary
	if r.AttemptErrors != 0 || r.FinalConnected != 500_000 {
		t.Errorf("adaptive over pooled connections: %d failed attempts (%v), %d connected; want none failed, all connected", r.AttemptErrors, r.Errors, r.FinalConnected)
	}
}

// nextAddress is 400,000 devices arriving at once onto two origins under
// multi-value DNS; the first origin can hold only 100,000.
func nextAddress(attempts int) *scenario.Scenario {
	sc := &scenario.Scenario{
		Name:       "next-address",
		Duration:   time.Minute,
		Population: scenario.Population{Devices: 400_000},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Edge:       scenario.Edge{Pick: "first", Attempts: attempts},
		Origins: []scenario.Origin{
			{Name: "small", MaxConnections: 100_000, MaxNewPerSecond: 1e6},
			{Name: "big", MaxConnections: 1_000_000, MaxNewPerSecond: 1e6},
		},
		Client:  scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic: scenario.Traffic{Arrivals: []scenario.Arrival{{At: time.Second, Devices: 400_000}}},
	}
	sc.WithDefaults()
	return sc
}

// TestNextAddressBeforeBackoff: an edge host that may try two addresses
// sends what the full first address refuses to the next one in the same
// step, so no device sees an error; with one try the refused devices fail
// and back off.
func TestNextAddressBeforeBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		errors   int64
	}{{2, 0}, {1, 300_000}} {
		r := mustNew(t, nextAddress(tc.attempts)).Run(nil)
		st := r.Steps[1]
		t.Logf("attempts %d: step 1 errors %d, origin attempts %d/%d, refused at small %d", tc.attempts, st.AttemptErrors, st.Origins[0].Attempts, st.Origins[1].Attempts, st.Origins[0].Failures[CauseCapacity])
		if st.AttemptErrors != tc.errors {
			t.Errorf("edge.attempts %d: %d devices failed in the arrival step, want %d", tc.attempts, st.AttemptErrors, tc.errors)
		}
		if st.Origins[0].Failures[CauseCapacity] != 300_000 {
			t.Errorf("edge.attempts %d: the small origin refused %d, want 300,000", tc.attempts, st.Origins[0].Failures[CauseCapacity])
		}
	}
}

// TestStreamHealthCheckSeesAFullOrigin: an origin that is up but full
// fails a stream health check (threshold checks in a row mark it
// unhealthy and DNS stops naming it); a tcp check sees it healthy.
func TestStreamHealthCheckSeesAFullOrigin(t *testing.T) {
	for _, kind := range []string{"stream", "tcp"} {
		sc := nextAddress(1)
		sc.DNS.HealthCheck.Kind = kind
		r := mustNew(t, sc).Run(nil)
		healthy := r.Steps[len(r.Steps)-1].Origins[0].Healthy
		t.Logf("%s: small origin healthy at the end: %v", kind, healthy)
		if healthy != (kind == "tcp") {
			t.Errorf("%s check: the full origin is healthy=%v", kind, healthy)
		}
		if kind == "stream" {
			// Marked at the third failed check (10 s apart, from the
			// step after it filled).
			for _, st := range r.Steps[:20] {
				if !st.Origins[0].Healthy {
					t.Fatalf("marked unhealthy at %v s, before three checks", st.T)
				}
			}
		}
	}
}

// TestNotSettledWhileRequestsFail: every device reconnects after a drop,
// but the origins serve half the requests the held streams send: the run
// is never shown settled (it was, at 99 % connected).
func TestNotSettledWhileRequestsFail(t *testing.T) {
	bounded := func() *scenario.Scenario {
		sc := storm("full", 100_000)
		sc.Origins[0].Backlog = int64(2 * sc.Origins[0].MaxNewPerSecond)
		return sc
	}
	sc := bounded()
	sc.Client.RequestsPerSecond = 1
	sc.Origins[0].MaxRequestsPerSecond = 100_000 / 4 / 2 // half of an even share
	r := mustNew(t, sc).Run(nil)
	last := r.Steps[len(r.Steps)-1]
	t.Logf("connected %d of %d, request errors %.2f, settle %v", last.Connected, r.Devices, last.RequestErrorRate, r.Summary.TimeToSettle)
	if last.Connected < r.Devices*99/100 || last.RequestErrorRate < 0.4 {
		t.Fatalf("setup: %d connected, request errors %.2f", last.Connected, last.RequestErrorRate)
	}
	if r.Summary.TimeToSettle >= 0 {
		t.Errorf("settled at %v s while %.0f %% of the requests fail", r.Summary.TimeToSettle, 100*last.RequestErrorRate)
	}
	if s := mustNew(t, bounded()).Run(nil).Summary; s.TimeToSettle < 0 {
		t.Errorf("the same storm without the request bound never settled")
	}
}

// TestPeakNeedsEnoughAttempts: the attempt error peak counts only steps
// with at least PeakMinAttempts attempts; the 5xx peak of the old mixed
// figure is not a peak of attempts.
func TestPeakNeedsEnoughAttempts(t *testing.T) {
	r := mustNew(t, storm("full", 100_000)).Run(nil)
	s := r.Summary
	if s.PeakMinAttempts != 100 {
		t.Fatalf("min attempts %d, want the least, 100 (100,000 devices / 10,000 is 10)", s.PeakMinAttempts)
	}
	max := 0.0
	for _, st := range r.Steps {
		if st.Attempts >= s.PeakMinAttempts {
			max = math.Max(max, st.AttemptErrorRate)
		}
	}
	if s.AttemptErrorPeak != max || s.AttemptErrorPeakAt < 0 {
		t.Errorf("peak %v at %v, want %v over the steps with at least %d attempts", s.AttemptErrorPeak, s.AttemptErrorPeakAt, max, s.PeakMinAttempts)
	}
	st := r.Steps[int(s.AttemptErrorPeakAt/r.Step)]
	if st.Attempts < s.PeakMinAttempts || st.AttemptErrorRate != s.AttemptErrorPeak {
		t.Errorf("the peak step has %d attempts, rate %v", st.Attempts, st.AttemptErrorRate)
	}
}

// TestFewAttemptsAreNoPeak: five devices that arrive at a full origin
// fail every attempt, but no step has PeakMinAttempts attempts: there is
// no attempt error peak, though the steps' rates are 1.
func TestFewAttemptsAreNoPeak(t *testing.T) {
	sc := &scenario.Scenario{
		Name:       "few",
		Duration:   time.Minute,
		Population: scenario.Population{Devices: 100_000, Initial: 99_995},
		DNS:        scenario.DNS{Policy: "multivalue"},
		Origins:    []scenario.Origin{{Name: "lb", MaxConnections: 99_995, MaxNewPerSecond: 1000}},
		Client:     scenario.Client{Backoff: backoff.Config{Policy: "full"}},
		Traffic:    scenario.Traffic{Arrivals: []scenario.Arrival{{At: 10 * time.Second, Devices: 5}}},
	}
	sc.WithDefaults()
	r := mustNew(t, sc).Run(nil)
	if r.Steps[10].AttemptErrorRate != 1 {
		t.Fatalf("setup: step 10 error rate %v", r.Steps[10].AttemptErrorRate)
	}
	if s := r.Summary; s.AttemptErrorPeak != 0 || s.AttemptErrorPeakAt != -1 || s.AttemptErrorSeconds != 0 {
		t.Errorf("peak %v at %v (%v s above 1 %%) from steps of at most 5 attempts", s.AttemptErrorPeak, s.AttemptErrorPeakAt, s.AttemptErrorSeconds)
	}
}
