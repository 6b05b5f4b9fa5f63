package shard

import (
	"fmt"
	"math/big"
)

// OverlapRow is one line of an overlap distribution.
type OverlapRow struct {
	// Members is the number of workers two hands share.
	Members int `json:"members"`
	// Probability is P(overlap = Members), rounded to a float64.
	Probability float64 `json:"probability"`
	// Exact is the same probability as a reduced fraction "p/q".
	Exact string `json:"exact"`
}

// Analysis holds the figures of a shuffle-sharding configuration. Every
// count is an exact decimal string (they overflow 64 bits); every share is
// a probability in [0, 1].
type Analysis struct {
	Workers  int `json:"workers"`
	HandSize int `json:"hand_size"`
	// Hands is C(n, k), the number of distinct hands.
	Hands string `json:"hands"`
	// EntropyBits is log2 C(n, k).
	EntropyBits float64 `json:"entropy_bits"`
	// DealerBits is log2 of the ordered hands n!/(n-k)! a Dealer consumes;
	// DealerOK says whether it is within MaxEntropyBits.
	DealerBits float64 `json:"dealer_bits"`
	DealerOK   bool    `json:"dealer_ok"`
	// ExpectedOverlap is k²/n.
	ExpectedOverlap float64 `json:"expected_overlap"`
	// Overlap is the hypergeometric distribution of the overlap of two
	// independent random hands, for 0..k shared workers.
	Overlap []OverlapRow `json:"overlap"`
	// DegradedShare is the share of other tenants that lose at least one
	// worker when one tenant's whole hand fails: 1 - P(overlap = 0).
	DegradedShare float64 `json:"degraded_share"`
	// DownShare is the share that lose their whole hand: 1/C(n, k).
	DownShare float64 `json:"down_share"`
	// Stored holds the assigner's figures when MaxOverlap >= 0.
	Stored *StoredAnalysis `json:"stored,omitempty"`
	// Lattice holds the zone lattice's figures when Zones > 1.
	Lattice *LatticeAnalysis `json:"lattice,omitempty"`
}

// StoredAnalysis holds the figures of stored hands with a maximum overlap.
type StoredAnalysis struct {
	// MaxOverlap is t.
	MaxOverlap int `json:"max_overlap"`
	// Capacity is the bound C(n, t+1)/C(k, t+1) on the number of tenants.
	Capacity string `json:"capacity"`
	// GuaranteedHealthy is k - t: the workers every other tenant keeps when
	// one tenant's whole hand fails; DownShare is therefore 0.
	GuaranteedHealthy int     `json:"guaranteed_healthy"`
	DownShare         float64 `json:"down_share"`
}

// LatticeAnalysis holds the figures of a zone lattice.
type LatticeAnalysis struct {
	Zones int `json:"zones"`
	// ZoneSizes are the workers per zone.
	ZoneSizes []int `json:"zone_sizes"`
	// PerZone is ceil(k/zones), the workers a hand takes from each zone,
	// and HandSize = PerZone·Zones.
	PerZone  int `json:"per_zone"`
	HandSize int `json:"hand_size"`
	// SurvivorsAfterZoneLoss is the hand members left when one zone fails.
	SurvivorsAfterZoneLoss int `json:"survivors_after_zone_loss"`
	// Hands, EntropyBits, ExpectedOverlap, Overlap, DegradedShare and
	// DownShare are as in Analysis, for lattice hands.
	Hands           string       `json:"hands"`
	EntropyBits     float64      `json:"entropy_bits"`
	ExpectedOverlap float64      `json:"expected_overlap"`
	Overlap         []OverlapRow `json:"overlap"`
	DegradedShare   float64      `json:"degraded_share"`
	DownShare       float64      `json:"down_share"`
}

// Analyze computes the exact figures of a configuration.
func Analyze(cfg AnalyzeConfig) (Analysis, error) {
	n, k := cfg.Workers, cfg.HandSize
	p, err := Overlap(n, k)
	if err != nil {
		return Analysis{}, err
	}
	eo, _ := ExpectedOverlap(n, k)
	a := Analysis{
		Workers:         n,
		HandSize:        k,
		Hands:           Hands(n, k).String(),
		EntropyBits:     EntropyBits(n, k),
		DealerBits:      OrderedEntropyBits(n, k),
		ExpectedOverlap: ratFloat(eo),
		Overlap:         overlapRows(p),
		DegradedShare:   degradedShare(p),
		DownShare:       ratFloat(p[k]),
	}
	a.DealerOK = a.DealerBits <= MaxEntropyBits
	if cfg.MaxOverlap >= 0 {
		c, err := Capacity(n, k, cfg.MaxOverlap)
		if err != nil {
			return Analysis{}, err
		}
		a.Stored = &StoredAnalysis{MaxOverlap: cfg.MaxOverlap, Capacity: c.String(), GuaranteedHealthy: k - cfg.MaxOverlap}
	}
	if cfg.Zones < 0 || cfg.Zones > n {
		return Analysis{}, fmt.Errorf("shard: zones %d must be in [0, workers %d]", cfg.Zones, n)
	}
	if cfg.Zones > 1 {
		l, err := analyzeLattice(n, k, cfg.Zones)
		if err != nil {
			return Analysis{}, err
		}
		a.Lattice = l
	}
	return a, nil
}

func analyzeLattice(n, k, z int) (*LatticeAnalysis, error) {
	sizes := zoneSizes(n, z)
	m := (k + z - 1) / z
	dist, err := LatticeOverlap(sizes, m)
	if err != nil {
		return nil, err
	}
	hands := big.NewInt(1)
	eo := new(big.Rat)
	for _, s := range sizes {
		hands.Mul(hands, Hands(s, m))
		eo.Add(eo, big.NewRat(int64(m*m), int64(s)))
	}
	return &LatticeAnalysis{
		Zones:                  z,
		ZoneSizes:              sizes,
		PerZone:                m,
		HandSize:               m * z,
		SurvivorsAfterZoneLoss: m * (z - 1),
		Hands:                  hands.String(),
		EntropyBits:            log2Big(hands),
		ExpectedOverlap:        ratFloat(eo),
		Overlap:                overlapRows(dist),
		DegradedShare:          degradedShare(dist),
		DownShare:              ratFloat(dist[len(dist)-1]),
	}, nil
}

func overlapRows(p []*big.Rat) []OverlapRow {
	rows := make([]OverlapRow, len(p))
	for o, r := range p {
		rows[o] = OverlapRow{Members: o, Probability: ratFloat(r), Exact: r.String()}
	}
	return rows
}

// degradedShare returns 1 - P(overlap = 0) of an overlap distribution: the
// share of other tenants that lose at least one worker when one hand fails.
func degradedShare(dist []*big.Rat) float64 {
	return ratFloat(new(big.Rat).Sub(big.NewRat(1, 1), dist[0]))
}

func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}
