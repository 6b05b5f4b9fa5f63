package hub

import "testing"

// TestGrantsIntern: equal grants share one value, grants that differ in
// any field do not, and finding a known grant allocates nothing.
func TestGrantsIntern(t *testing.T) {
	var g grants
	base := grant{tenant: "acme", channels: []string{"news.>", "chat.*"}, publish: []string{"chat.*"}, maxRank: 2}
	p := g.intern(base)
	if q := g.intern(grant{tenant: "acme", channels: []string{"news.>", "chat.*"}, publish: []string{"chat.*"}, maxRank: 2}); q != p {
		t.Fatal("an equal grant was not shared")
	}
	for name, other := range map[string]grant{
		"tenant":              {tenant: "acme2", channels: base.channels, publish: base.publish, maxRank: 2},
		"channels":            {tenant: "acme", channels: []string{"news.>"}, publish: base.publish, maxRank: 2},
		"channels split":      {tenant: "acme", channels: []string{"news.>chat.*"}, publish: base.publish, maxRank: 2},
		"publish":             {tenant: "acme", channels: base.channels, maxRank: 2},
		"channels as publish": {tenant: "acme", channels: []string{"chat.*"}, publish: []string{"news.>", "chat.*"}, maxRank: 2},
		"max rank":            {tenant: "acme", channels: base.channels, publish: base.publish, maxRank: 1},
	} {
		if g.intern(other) == p {
			t.Errorf("a grant with another %s shares the grant of %+v", name, base)
		}
	}
	if n := testing.AllocsPerRun(100, func() { g.intern(base) }); n != 0 {
		t.Fatalf("interning a known grant allocates %v times, want 0", n)
	}
}
