package shard

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strings"
)

// SecretSize is the length in bytes of a dealer secret: the 128-bit
// SipHash-2-4 key.
const SecretSize = 16

// MaxHand bounds HandSize+Spill of a Dealer, so that a deal runs on fixed
// stack buffers without allocating.
const MaxHand = 64

// MaxWorkers bounds the number of workers of every dealer, stable hand set
// and assigner: worker indices are int32 inside the package.
const MaxWorkers = math.MaxInt32

// MaxEntropyBits is the entropy bound of the dealer. A deal draws an ordered
// hand, one of P = n·(n-1)···(n-k+1) equally likely tuples, from one 128-bit
// keyed hash by unbiased rejection. log2(P) may be at most 96 bits, which
// keeps at least 32 bits of slack: a deal needs a second hash with
// probability below P/2^128 <= 2^-32. The same bound applies to the spill
// draw. A configuration beyond it is refused rather than served biased.
const MaxEntropyBits = 96

// DealerConfig configures a Dealer. Workers and HandSize are required; the
// zero Spill and MinHealthy mean no spill and one healthy worker.
type DealerConfig struct {
	// Secret is the 16-byte SipHash key. Tenants cannot predict or steer
	// their hands without it; every process that must agree on the hands
	// (DNS servers, simulators) uses the same secret. ParseSecret decodes
	// the 32-hex-digit text form.
	Secret []byte `yaml:"secret"`
	// Workers is n, the size of the deck: hands hold indices in [0, n).
	Workers int `yaml:"workers"`
	// HandSize is k, the number of distinct workers in a hand, 1 <= k <= n.
	HandSize int `yaml:"hand_size"`
	// Spill is the number of extra workers, outside the hand and distinct,
	// that Pick may use when fewer than MinHealthy hand members are healthy.
	// 0 disables spilling; HandSize+Spill must not exceed Workers or MaxHand.
	Spill int `yaml:"spill"`
	// MinHealthy is how many healthy workers Pick tries to return before it
	// spills. 0 means 1. It must not exceed HandSize.
	MinHealthy int `yaml:"min_healthy"`
}

// Validate reports whether c describes a usable dealer. Its errors start
// with "shard: " and name the offending field.
func (c DealerConfig) Validate() error {
	if len(c.Secret) != SecretSize {
		return fmt.Errorf("shard: secret must be %d bytes, got %d", SecretSize, len(c.Secret))
	}
	if err := checkDeck(c.Workers, c.HandSize); err != nil {
		return err
	}
	if c.Spill < 0 {
		return fmt.Errorf("shard: spill %d is negative", c.Spill)
	}
	if c.HandSize+c.Spill > c.Workers {
		return fmt.Errorf("shard: hand size %d plus spill %d exceeds the %d workers", c.HandSize, c.Spill, c.Workers)
	}
	if c.HandSize+c.Spill > MaxHand {
		return fmt.Errorf("shard: hand size %d plus spill %d exceeds the maximum of %d", c.HandSize, c.Spill, MaxHand)
	}
	if c.MinHealthy < 0 || c.MinHealthy > c.HandSize {
		return fmt.Errorf("shard: min healthy %d must be in [0, hand size %d]", c.MinHealthy, c.HandSize)
	}
	if bits := OrderedEntropyBits(c.Workers, c.HandSize); bits > MaxEntropyBits {
		return fmt.Errorf("shard: %d workers with hand size %d need %.1f bits per ordered hand, beyond the dealer's entropy bound of %d bits", c.Workers, c.HandSize, bits, MaxEntropyBits)
	}
	if bits := OrderedEntropyBits(c.Workers-c.HandSize, c.Spill); bits > MaxEntropyBits {
		return fmt.Errorf("shard: spill %d out of %d workers needs %.1f bits, beyond the dealer's entropy bound of %d bits", c.Spill, c.Workers-c.HandSize, bits, MaxEntropyBits)
	}
	return nil
}

// checkDeck validates n and k, the shape shared by every hand builder.
func checkDeck(n, k int) error {
	switch {
	case n < 1:
		return fmt.Errorf("shard: workers %d must be at least 1", n)
	case n > MaxWorkers:
		return fmt.Errorf("shard: workers %d exceeds the maximum of %d", n, MaxWorkers)
	case k < 1:
		return fmt.Errorf("shard: hand size %d must be at least 1", k)
	case k > n:
		return fmt.Errorf("shard: hand size %d exceeds the %d workers", k, n)
	}
	return nil
}

// ParseSecret decodes a secret written as 32 hexadecimal digits (spaces and
// a leading "0x" are not accepted, to keep the text form unambiguous).
func ParseSecret(s string) ([]byte, error) {
	if len(s) != 2*SecretSize {
		return nil, fmt.Errorf("shard: secret must be %d hex digits, got %d characters", 2*SecretSize, len(s))
	}
	b, err := hex.DecodeString(strings.ToLower(s))
	if err != nil {
		return nil, errors.New("shard: secret is not hexadecimal: " + err.Error())
	}
	return b, nil
}

// secretKey splits a validated 16-byte secret into SipHash key halves.
func secretKey(secret []byte) (k0, k1 uint64) {
	return binary.LittleEndian.Uint64(secret[0:8]), binary.LittleEndian.Uint64(secret[8:16])
}

// orderedCount returns P = n·(n-1)···(n-k+1), the number of ordered hands.
func orderedCount(n, k int) *big.Int {
	p := big.NewInt(1)
	for i := range k {
		p.Mul(p, big.NewInt(int64(n-i)))
	}
	return p
}

// OrderedEntropyBits returns log2(n·(n-1)···(n-k+1)), the bits of keyed hash
// a dealer consumes per ordered hand. It returns 0 when k <= 0.
func OrderedEntropyBits(n, k int) float64 {
	bits := 0.0
	for i := range k {
		bits += math.Log2(float64(n - i))
	}
	return bits
}

// threshold128 returns 2^128 mod p as two 64-bit halves; p must be at least 1.
func threshold128(p *big.Int) (hi, lo uint64) {
	t := new(big.Int).Lsh(big.NewInt(1), 128)
	t.Mod(t, p)
	lo = t.Uint64()
	hi = new(big.Int).Rsh(t, 64).Uint64()
	return hi, lo
}

// Worker is one member of the deck of a Stable hand set.
type Worker struct {
	// ID names the worker; it must be unique and non-empty. Hands depend on
	// IDs, not on the position in the list, so reordering the list changes
	// no hand.
	ID string `yaml:"id" json:"id"`
	// Weight is the worker's relative share of hands: a positive finite
	// number, 0 meaning 1. With k = 1 a worker is chosen with probability
	// Weight/sum(Weight); with k > 1 hands are weighted sampling without
	// replacement (Efraimidis-Spirakis).
	Weight float64 `yaml:"weight" json:"weight,omitempty"`
	// Zone is the failure domain (zone, rack, region, any dimension). It is
	// used only when StableConfig.Zones is set.
	Zone string `yaml:"zone" json:"zone,omitempty"`
}

// StableConfig configures a Stable hand set.
type StableConfig struct {
	// Secret is the 16-byte SipHash key, as for DealerConfig.
	Secret []byte `yaml:"secret"`
	// Workers is the deck: at least HandSize workers with unique IDs.
	Workers []Worker `yaml:"workers"`
	// HandSize is k. With Zones, a hand takes ceil(k/zones) workers from
	// every zone, so it holds zones·ceil(k/zones) >= k workers.
	HandSize int `yaml:"hand_size"`
	// Zones makes hands a zone lattice: every zone contributes the same
	// number of workers, chosen stably inside the zone, so a hand keeps
	// members after the loss of any one zone.
	Zones bool `yaml:"zones"`
}

// Validate reports whether c describes a usable hand set. Its errors start
// with "shard: " and name the worker or zone at fault.
func (c StableConfig) Validate() error {
	if len(c.Secret) != SecretSize {
		return fmt.Errorf("shard: secret must be %d bytes, got %d", SecretSize, len(c.Secret))
	}
	if len(c.Workers) == 0 {
		return errors.New("shard: the worker list is empty")
	}
	if err := checkDeck(len(c.Workers), c.HandSize); err != nil {
		return err
	}
	seen := make(map[string]int, len(c.Workers))
	for i, w := range c.Workers {
		if w.ID == "" {
			return fmt.Errorf("shard: worker %d has an empty id", i)
		}
		if j, dup := seen[w.ID]; dup {
			return fmt.Errorf("shard: duplicate worker id %q (entries %d and %d)", w.ID, j, i)
		}
		seen[w.ID] = i
		if wt := effectiveWeight(w.Weight); !(wt > 0) || math.IsInf(wt, 0) {
			return fmt.Errorf("shard: worker %q has weight %v; want a positive finite number", w.ID, w.Weight)
		}
		if c.Zones && w.Zone == "" {
			return fmt.Errorf("shard: worker %q has no zone but zones are enabled", w.ID)
		}
	}
	if !c.Zones {
		return nil
	}
	byName := zoneMembers(c.Workers)
	per := (c.HandSize + len(byName) - 1) / len(byName)
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if len(byName[name]) < per {
			return fmt.Errorf("shard: zone %q has %d workers, fewer than the %d each hand takes from every zone (hand size %d over %d zones)",
				name, len(byName[name]), per, c.HandSize, len(byName))
		}
	}
	return nil
}

// effectiveWeight maps the zero weight to 1.
func effectiveWeight(w float64) float64 {
	if w == 0 {
		return 1
	}
	return w
}

// zoneMembers groups worker indices by zone name.
func zoneMembers(ws []Worker) map[string][]int32 {
	byName := map[string][]int32{}
	for i, w := range ws {
		byName[w.Zone] = append(byName[w.Zone], int32(i))
	}
	return byName
}

// AssignerConfig configures an Assigner.
type AssignerConfig struct {
	// Workers is n.
	Workers int `yaml:"workers"`
	// HandSize is k. Workers and HandSize obey the Dealer's limits (the
	// candidates are dealt), and C(k, MaxOverlap+1) <= MaxSubsetsPerHand.
	HandSize int `yaml:"hand_size"`
	// MaxOverlap is t: no two stored hands share more than t workers.
	// 0 <= t < k; (t+1)·ceil(log2 n) must not exceed 63 bits.
	MaxOverlap int `yaml:"max_overlap"`
	// Seed makes the assignment deterministic: the same seed and the same
	// sequence of Assign calls give the same hands. The first candidate of
	// a tenant is the Dealer hand under the secret derived from Seed.
	Seed uint64 `yaml:"seed"`
	// MaxAttempts is how many candidate hands are tried for one tenant
	// before Assign gives up. 0 means DefaultMaxAttempts.
	MaxAttempts int `yaml:"max_attempts"`
	// Store persists the hands; nil keeps them in memory only. The
	// Assigner loads the store in NewAssigner and closes it in Close.
	Store Store `yaml:"-"`
	// ExpectedTenants presizes the index; 0 lets it grow.
	ExpectedTenants int `yaml:"expected_tenants"`
}

// Validate reports whether c describes a usable assigner. Its errors start
// with "shard: " and name the offending field.
func (c AssignerConfig) Validate() error {
	if err := checkDeck(c.Workers, c.HandSize); err != nil {
		return err
	}
	if _, err := Capacity(c.Workers, c.HandSize, c.MaxOverlap); err != nil {
		return err
	}
	if c.MaxAttempts < 0 {
		return fmt.Errorf("shard: max attempts %d is negative", c.MaxAttempts)
	}
	if c.ExpectedTenants < 0 {
		return fmt.Errorf("shard: expected tenants %d is negative", c.ExpectedTenants)
	}
	if subsets := Hands(c.HandSize, c.MaxOverlap+1); subsets.Cmp(big.NewInt(MaxSubsetsPerHand)) > 0 {
		return fmt.Errorf("shard: hand size %d with max overlap %d gives %s subsets per hand to index, more than %d", c.HandSize, c.MaxOverlap, subsets, MaxSubsetsPerHand)
	}
	if bits := uint(c.MaxOverlap+1) * indexKeyBits(c.Workers); bits > 63 {
		return fmt.Errorf("shard: max overlap %d with %d workers needs %d-bit index keys, more than 63", c.MaxOverlap, c.Workers, bits)
	}
	// The candidates are dealt: the dealer's bounds apply.
	return DealerConfig{Secret: make([]byte, SecretSize), Workers: c.Workers, HandSize: c.HandSize}.Validate()
}

// indexKeyBits is the width of one worker index in an assigner index key.
func indexKeyBits(n int) uint {
	return uint(max(bits.Len(uint(n-1)), 1))
}

// AnalyzeConfig selects the figures Analyze computes.
type AnalyzeConfig struct {
	// Workers is n and HandSize is k.
	Workers  int `yaml:"workers"`
	HandSize int `yaml:"hand_size"`
	// MaxOverlap is t for the stored assigner's figures; a negative value
	// leaves them out.
	MaxOverlap int `yaml:"max_overlap"`
	// Zones, when above 1, adds the figures of a zone lattice with the
	// workers split as evenly as possible over that many zones.
	Zones int `yaml:"zones"`
}
