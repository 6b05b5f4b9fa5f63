// Package limitcmp benchmarks corral's limit.Limiter side by side with
// failsafe-go's adaptivelimiter (v0.9.8). It is a separate module so that
// corral itself does not depend on failsafe-go; run it with
//
//	cd bench/limitcmp && go test -bench . -count 5
package limitcmp
