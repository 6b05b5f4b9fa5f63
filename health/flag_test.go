package health

import "testing"

// TestRefHealthyFlag checks that the flag of a Ref reads what its Healthy
// reports, across a transition and an Update that changes the check, and
// that the zero Ref has none.
func TestRefHealthyFlag(t *testing.T) {
	c := mustNew(t, Config{Checks: []CheckConfig{tcpCheck("a")}}, Options{})
	r, _ := c.Ref("a")
	f := r.HealthyFlag()
	if f == nil || !f.Load() {
		t.Fatal("flag of a healthy check: missing or false")
	}
	_, _ = c.Observe("a", errDown)
	if f.Load() || f.Load() != r.Healthy() {
		t.Fatal("flag did not follow a transition")
	}
	changed := tcpCheck("a")
	changed.Address = "127.0.0.1:2"
	if err := c.Update(Config{Checks: []CheckConfig{changed}}); err != nil {
		t.Fatal(err)
	}
	if !f.Load() || f.Load() != r.Healthy() {
		t.Fatal("flag kept the old definition's state")
	}
	if (Ref{}).HealthyFlag() != nil {
		t.Error("zero Ref has a flag")
	}
}
