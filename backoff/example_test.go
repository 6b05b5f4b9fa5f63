package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/backoff"
)

// A client's reconnect loop: full jitter from a seeded source, a server
// hint, and a reset after a successful connection.
func ExampleBackoff() {
	b, err := backoff.NewBackoff(backoff.Config{
		Policy: "full",
		Base:   time.Second,
		Cap:    time.Minute,
	}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 4 {
		fmt.Println(b.Next().Round(time.Millisecond))
	}
	b.Hint(30 * time.Second) // the server said: retry after 30 s
	fmt.Println("hinted:", b.Next().Round(time.Millisecond))
	b.Reset() // connected
	fmt.Println("after reset:", b.Next().Round(time.Millisecond), "attempt", b.Attempt())
	// Output:
	// 676ms
	// 923ms
	// 2.034s
	// 3.438s
	// hinted: 53.934s
	// after reset: 388ms attempt 1
}

// The cohort simulator spreads a cohort without a random draw per device:
// Delay is the quantile function, so the delay at the middle of each of four
// equal slices of the cohort is Delay at u = 1/8, 3/8, 5/8 and 7/8.
func ExamplePolicy_quantiles() {
	p, err := backoff.Parse("equal")
	if err != nil {
		fmt.Println(err)
		return
	}
	const devices = 100_000_000
	for i := range 4 {
		u := (float64(i) + 0.5) / 4
		fmt.Printf("%d devices retry attempt 3 after %v\n", devices/4, p.Delay(3, 0, u))
	}
	lo, hi := backoff.Bounds(p, 3, 0)
	fmt.Println("support:", lo, "to", hi)
	// Output:
	// 25000000 devices retry attempt 3 after 2.25s
	// 25000000 devices retry attempt 3 after 2.75s
	// 25000000 devices retry attempt 3 after 3.25s
	// 25000000 devices retry attempt 3 after 3.75s
	// support: 2s to 4s
}

// The gRPC connection backoff protocol: take the delay before the attempt,
// give the attempt max(delay, 20 s) to connect, and on failure wait until
// the attempt's start plus the delay.
func ExampleGRPC() {
	p, err := backoff.Parse("grpc")
	if err != nil {
		fmt.Println(err)
		return
	}
	g := p.(*backoff.GRPC)
	for _, n := range []int{0, 1, 2, 10, 11, 30} {
		lo, hi := backoff.Bounds(g, n, 0)
		fmt.Printf("attempt %2d: %v to %v, connect timeout %v\n",
			n, lo.Round(time.Millisecond), hi.Round(time.Millisecond), g.ConnectTimeout(hi).Round(time.Millisecond))
	}
	// Output:
	// attempt  0: 1s to 1s, connect timeout 20s
	// attempt  1: 1.28s to 1.92s, connect timeout 20s
	// attempt  2: 2.048s to 3.072s, connect timeout 20s
	// attempt 10: 1m27.961s to 2m11.941s, connect timeout 2m11.941s
	// attempt 11: 1m36s to 2m24s, connect timeout 2m24s
	// attempt 30: 1m36s to 2m24s, connect timeout 2m24s
}

// A scenario file names a policy by string; bad values are reported with the
// field named.
func ExampleConfig_Validate() {
	for _, c := range []backoff.Config{
		{Policy: "decorrelated", Base: 100 * time.Millisecond, Cap: 20 * time.Second},
		{Policy: "linear"},
		{Policy: "full", Base: 2 * time.Second, Cap: time.Second},
		{Policy: "equal", Jitter: 0.3},
	} {
		fmt.Println(c.Validate())
	}
	// Output:
	// <nil>
	// backoff: unknown policy "linear" (want one of none, exponential, full, equal, decorrelated, grpc)
	// backoff: cap 1s is below base 2s
	// backoff: jitter applies only to policy grpc; policy equal has its jitter fixed by its formula
}
