package tlssession_test

import (
	"crypto/tls"
	"testing"

	"github.com/corralhq/corral/internal/tlssession"
)

// TestPerAddress: a session put for one address under a server name is
// found for that address only, and the views share the cache's entries.
func TestPerAddress(t *testing.T) {
	cache := tlssession.NewCache(0)
	a, b := tlssession.PerAddress(cache, "127.0.0.1:443"), tlssession.PerAddress(cache, "127.0.0.2:443")
	s := &tls.ClientSessionState{}
	a.Put("hubs.corral.test", s)
	if got, ok := a.Get("hubs.corral.test"); !ok || got != s {
		t.Fatalf("the address that put the session: %v, %v", got, ok)
	}
	if _, ok := b.Get("hubs.corral.test"); ok {
		t.Fatal("another address behind the same name got the session")
	}
	if got, ok := tlssession.PerAddress(cache, "127.0.0.1:443").Get("hubs.corral.test"); !ok || got != s {
		t.Fatal("a new view of the same address missed the session")
	}
	if tlssession.PerAddress(nil, "127.0.0.1:443") != nil {
		t.Fatal("a nil cache gave a view")
	}
}
