package edge

import (
	"fmt"
	"testing"

	"github.com/corralhq/corral/wire/corralv1"
)

// The replay cache's benchmarks. Allocation counts are exact anywhere;
// timings need a quiet machine:
//
//	go test -run '^$' -bench BenchmarkReplay -benchmem -count 6 ./edge/

// BenchmarkReplayAdd: a new message (a flood into 1000 channels, bounded
// by max_bytes, so evictions are in the figure) and a duplicate (what
// every session but the first costs).
func BenchmarkReplayAdd(b *testing.B) {
	b.Run("new", func(b *testing.B) {
		c := rpCache(b, ReplayConfig{}, nil)
		in := make([]*corralv1.Message, 1000)
		for i := range in {
			in[i] = rpMsg(fmt.Sprintf("ch-%d", i), "e1", 0, corralv1.Priority_PRIORITY_P0, 200)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m := in[i%len(in)]
			m.Offset++
			c.Add(rpTenant, m)
			i++
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		c := rpCache(b, ReplayConfig{}, nil)
		for o := uint64(1); o <= 1000; o++ {
			c.Add(rpTenant, rpMsg("ch", "e1", o, corralv1.Priority_PRIORITY_P0, 200))
		}
		m := rpMsg("ch", "e1", 1000, corralv1.Priority_PRIORITY_P0, 200)
		b.ReportAllocs()
		for b.Loop() {
			c.Add(rpTenant, m)
		}
	})
	b.Run("duplicate-parallel", func(b *testing.B) {
		c := rpCache(b, ReplayConfig{}, nil)
		c.Add(rpTenant, rpMsg("ch", "e1", 1, corralv1.Priority_PRIORITY_P0, 200))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			m := rpMsg("ch", "e1", 1, corralv1.Priority_PRIORITY_P0, 200)
			for pb.Next() {
				c.Add(rpTenant, m)
			}
		})
	})
}

// BenchmarkReplayLookup: a covered resume of 10 messages, one at the
// newest (nothing to send) and a miss.
func BenchmarkReplayLookup(b *testing.B) {
	c := rpCache(b, ReplayConfig{}, nil)
	for o := uint64(1); o <= 1000; o++ {
		c.Add(rpTenant, rpMsg("ch", "e1", o, corralv1.Priority_PRIORITY_P0, 200))
	}
	for _, bc := range []struct {
		name string
		from *corralv1.Position
		want int
	}{
		{"hit-10", rpPos("e1", 990), 10},
		{"hit-0", rpPos("e1", 1000), 0},
		{"miss", rpPos("e0", 990), -1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a := c.Lookup(rpTenant, "ch", bc.from)
				if (a.Kind == ReplayHit) != (bc.want >= 0) || (bc.want >= 0 && len(a.Messages) != bc.want) {
					b.Fatalf("%v %d", a.Kind, len(a.Messages))
				}
			}
		})
	}
}
