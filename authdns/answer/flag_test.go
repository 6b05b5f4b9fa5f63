package answer

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
)

// upFlag is a FlagProbe: its flag is the state Healthy reports.
type upFlag struct{ up atomic.Bool }

func (f *upFlag) Healthy() bool             { return f.up.Load() }
func (f *upFlag) HealthyFlag() *atomic.Bool { return &f.up }

// hidden is the same probe seen without its flag: Select calls Healthy.
type hidden struct{ f *upFlag }

func (h hidden) Healthy() bool { return h.f.Healthy() }

// TestFlagProbesSelectAsHealthy builds every policy twice over the same
// probes, once as FlagProbes (Select loads the flags) and once hidden
// behind plain probes (Select calls Healthy), with a record without a
// probe among them, and checks that both select the same records under
// every health state of the checked records.
func TestFlagProbesSelectAsHealthy(t *testing.T) {
	const n = 6
	flags := make([]*upFlag, n)
	for i := range flags {
		flags[i] = &upFlag{}
	}
	locs := map[string][]netip.Prefix{"eu": {netip.MustParsePrefix("10.0.0.0/8")}}
	build := func(p *Policy, probe func(i int) Probe) *Set {
		recs := make([]Record, n)
		for i := range recs {
			if p.Uses(FieldWeight) {
				recs[i].Weight = uint32(i%3 + 1)
			}
			if p.Uses(FieldSecondary) {
				recs[i].Secondary = i >= n/2
			}
			if p.Uses(FieldLocation) && i < 2 {
				recs[i].Location = "eu"
			}
			if i != 2 { // record 2 has no probe: always healthy
				recs[i].Health = probe(i)
			}
		}
		cfg := Config{Policy: p, Records: recs}
		if p.Uses(FieldN) {
			cfg.N = 3
		}
		if p.Uses(FieldLocations) {
			cfg.Locations = locs
		}
		if p.Uses(FieldDealer) {
			cfg.Dealer = testDealer(t, n, 3, 2)
		}
		return mustSet(t, cfg)
	}
	q := Query{Client: netip.MustParseAddr("10.1.2.3"), Key: "acme"}
	for _, p := range Policies() {
		fast := build(p, func(i int) Probe { return flags[i] })
		slow := build(p, func(i int) Probe { return hidden{flags[i]} })
		if fast.flags == nil || slow.flags != nil {
			t.Fatalf("%s: flags read %v with FlagProbes and %v with plain probes, want true and false", p, fast.flags != nil, slow.flags != nil)
		}
		for state := range 1 << n {
			for i, f := range flags {
				f.up.Store(state&(1<<i) != 0)
			}
			a, ra := fast.Select(make([]int, 0, n), q, rand.NewPCG(uint64(state), 1))
			b, rb := slow.Select(make([]int, 0, n), q, rand.NewPCG(uint64(state), 1))
			if !slices.Equal(a, b) || ra != rb {
				t.Fatalf("%s, health %06b: flags select %v %+v, Healthy selects %v %+v", p, state, a, ra, b, rb)
			}
		}
	}
}

// TestFlagProbeWithoutFlag checks that one FlagProbe without a flag sends
// the whole set through Healthy.
func TestFlagProbeWithoutFlag(t *testing.T) {
	if got := flagsOf([]Probe{&upFlag{}, noFlag{}}); got != nil {
		t.Errorf("flags %v, want none", got)
	}
	if got := flagsOf([]Probe{nil, &upFlag{}}); len(got) != 2 || got[0] != nil || got[1] == nil {
		t.Errorf("flags %v, want [nil, a flag]", got)
	}
}

// noFlag is a FlagProbe that has no flag to give.
type noFlag struct{}

func (noFlag) Healthy() bool             { return true }
func (noFlag) HealthyFlag() *atomic.Bool { return nil }
