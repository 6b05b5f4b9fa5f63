package edge

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSeverOnce: one round of the severing loop (every 100 ms) on an
// edge of n welcomed sessions while nothing is to be severed.
//
//	go test -run '^$' -bench SeverOnce -benchtime 20x ./edge
func BenchmarkSeverOnce(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var a admission
			if err := a.init(AdmissionConfig{Enabled: true}, 10*time.Second); err != nil {
				b.Fatal(err)
			}
			e := &Edge{adm: a, sessions: make(map[*session]struct{}, n), now: time.Now}
			for i := range n {
				s := &session{e: e, rank: int8(i % 3)}
				s.state.Store(stateWelcomed)
				s.severing = true
				e.severable[s.rank].Add(1)
				e.sessions[s] = struct{}{}
			}
			b.ReportAllocs()
			for b.Loop() {
				e.severOnce()
			}
		})
	}
}
