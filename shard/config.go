package shard

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
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
