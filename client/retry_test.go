package client

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corralhq/corral/backoff"
)

// TestRetryHintSpreadsAHerd: 1,000 clients, each with its own reconnect
// schedule as New builds it, are all told to retry after 5 s. Their delays
// spread over [5 s, 10 s): never below the hint, and no 10 ms bin holds
// more than 1 % of them. (Waiting max(hint, next delay), as the client
// did, put all 1,000 on the hint.)
func TestRetryHintSpreadsAHerd(t *testing.T) {
	const clients, hint, bin = 1000, 5 * time.Second, 10 * time.Millisecond
	cfg := Config{Addrs: []string{"127.0.0.1:1"}}.withDefaults()
	bins := map[time.Duration]int{}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := range clients {
		retry, err := newRetry(cfg, nil, rand.New(rand.NewPCG(uint64(i), 99)))
		if err != nil {
			t.Fatal(err)
		}
		retry.Next() // a first failed attempt without a hint
		d := retry.NextAfter(hint)
		if d < hint {
			t.Fatalf("client %d waits %v, below the hint %v", i, d, hint)
		}
		bins[d/bin]++
		lo, hi = min(lo, d), max(hi, d)
	}
	most := 0
	for _, n := range bins {
		most = max(most, n)
	}
	t.Logf("delays in [%v, %v], %d bins of 10 ms used, at most %d clients in one", lo, hi, len(bins), most)
	if most > clients/100 {
		t.Errorf("%d of %d clients given one hint land in the same 10 ms bin, want at most 1 %%", most, clients)
	}
	if hi-lo < hint/2 {
		t.Errorf("delays span %v to %v, want them spread over at least half the hint above it", lo, hi)
	}
}

// TestBackoffPolicySelectable: Config.Backoff replaces the default full
// jitter: "none" with a base waits exactly the base every time, and an
// unknown policy fails Validate.
func TestBackoffPolicySelectable(t *testing.T) {
	cfg := Config{Addrs: []string{"127.0.0.1:1"}, Backoff: backoff.Config{Policy: "none", Base: 7 * time.Millisecond}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	retry, err := newRetry(cfg.withDefaults(), nil, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if d := retry.NextAfter(0); d != 7*time.Millisecond {
			t.Fatalf("attempt %d waits %v, want the constant 7ms of policy none", i, d)
		}
	}
	for _, policy := range []string{"full", "equal", "decorrelated", "grpc", "exponential"} {
		cfg.Backoff = backoff.Config{Policy: policy}
		if err := cfg.Validate(); err != nil {
			t.Errorf("policy %s: %v", policy, err)
		}
	}
	cfg.Backoff = backoff.Config{Policy: "fibonacci"}
	if cfg.Validate() == nil {
		t.Fatal("an unknown backoff policy was accepted")
	}
}
