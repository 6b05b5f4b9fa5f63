package tlssession

import "crypto/tls"

// DefaultSize is how many sessions NewCache keeps when given 0.
const DefaultSize = 256

// NewCache returns an LRU session cache of size entries (0: DefaultSize),
// to be shared by every connection of one client through PerAddress. It
// is safe for concurrent use.
func NewCache(size int) tls.ClientSessionCache {
	if size <= 0 {
		size = DefaultSize
	}
	return tls.NewLRUClientSessionCache(size)
}

// PerAddress returns the view of cache that connections to the server at
// addr (the address dialled, host:port) use as their
// tls.Config.ClientSessionCache: its keys are crypto/tls's (the server
// name) prefixed by addr, so two servers behind one name keep a ticket
// each. The view is safe for concurrent use when cache is; a nil cache
// gives nil (no resumption).
func PerAddress(cache tls.ClientSessionCache, addr string) tls.ClientSessionCache {
	if cache == nil {
		return nil
	}
	return view{cache: cache, addr: addr}
}

// view is a cache seen from connections to one address.
type view struct {
	cache tls.ClientSessionCache
	addr  string
}

func (v view) Get(key string) (*tls.ClientSessionState, bool) { return v.cache.Get(v.addr + " " + key) }

func (v view) Put(key string, cs *tls.ClientSessionState) { v.cache.Put(v.addr+" "+key, cs) }
