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
				s.counted = true
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

// BenchmarkTickSessions: one round of the session timers (tickSessions,
// once a second with the shipped ping interval) over n welcomed, idle
// sessions none of which is due: the list under the edge's lock, then
// each session's clocks.
//
//	go test -run '^$' -bench TickSessions -benchtime 20x ./edge
func BenchmarkTickSessions(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := &Edge{sessions: make(map[*session]struct{}, n), now: time.Now,
				sess: SessionConfig{HandshakeTimeout: 10 * time.Second, PingInterval: 25 * time.Second}}
			now := time.Now()
			for range n {
				s := &session{e: e}
				s.state.Store(stateWelcomed)
				s.lastRecv.Store(now.UnixNano())
				s.lastPing.Store(now.UnixNano())
				e.sessions[s] = struct{}{}
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range e.snapshotSessions() {
					s.tick(now)
				}
			}
		})
	}
}
