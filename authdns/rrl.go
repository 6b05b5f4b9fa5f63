package authdns

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"time"
)

// rrlBuckets is the size of the rate limiting table (NSD uses one million
// entries; collisions only make two sources share a budget).
const rrlBuckets = 1 << 16

// RRL decisions.
const (
	rrlAllow = iota
	rrlDrop
	rrlSlip
)

// limiter is response rate limiting per source prefix, response class and
// name (see key), in one-second windows (NSD's scheme without its smoothing). It is
// safe for concurrent use and lock-free.
type limiter struct {
	rate       uint32
	slip       uint32
	v4, v6     int
	seed       maphash.Seed
	start      time.Time
	windows    []atomic.Uint64 // second<<32 | count
	slipCounts []atomic.Uint32
}

func newLimiter(c RRLConfig, start time.Time) *limiter {
	if !c.Enabled {
		return nil
	}
	return &limiter{
		rate: uint32(c.Rate), slip: uint32(c.Slip), v4: c.IPv4Prefix, v6: c.IPv6Prefix,
		seed: maphash.MakeSeed(), start: start,
		windows: make([]atomic.Uint64, rrlBuckets), slipCounts: make([]atomic.Uint32, rrlBuckets),
	}
}

// Response classes of rate limiting. Each has its own budget, and its own
// rule for the name in the bucket (BIND's and NSD's): a flood of random
// names must land in one bucket, or it is never limited.
const (
	// rrlAnswer is a positive answer, by query name and type.
	rrlAnswer = iota
	// rrlWildcard is an answer synthesized from a wildcard, by the
	// wildcard's owner ("*.tenants.example") and type.
	rrlWildcard
	// rrlNXDomain and rrlNoData are negative answers, by zone apex.
	rrlNXDomain
	rrlNoData
	// rrlError is every error (REFUSED outside the zones, FORMERR, NOTIMP,
	// ...), by source prefix alone.
	rrlError
)

// allow decides for one response of class to client; name is the name of
// its bucket (nil for errors) and qtype the query type.
func (l *limiter) allow(client netip.Addr, class uint8, qtype uint16, name []byte, now time.Time) int {
	return l.allowKey(l.key(client, class, qtype, name), now)
}

// key hashes the bucket of a response: the client's prefix, the class, and
// for answers the type and the name; negative answers and errors do not
// take the type either, so that random types make no new buckets.
func (l *limiter) key(client netip.Addr, class uint8, qtype uint16, name []byte) uint64 {
	var b [19]byte
	client = client.Unmap()
	bits := l.v6
	if client.Is4() {
		bits = l.v4
	}
	p, _ := client.Prefix(bits)
	a := p.Addr().As16()
	copy(b[:], a[:])
	b[16] = class
	switch class {
	case rrlAnswer, rrlWildcard:
		binary.BigEndian.PutUint16(b[17:], qtype)
	case rrlError:
		name = nil
	}
	var h maphash.Hash
	h.SetSeed(l.seed)
	_, _ = h.Write(b[:])
	_, _ = h.Write(name)
	return h.Sum64()
}

// allowKey counts one response in the bucket of key at now.
func (l *limiter) allowKey(key uint64, now time.Time) int {
	i := key % rrlBuckets
	sec := uint64(now.Sub(l.start) / time.Second)
	for {
		old := l.windows[i].Load()
		cnt := uint32(old)
		if old>>32 != sec {
			cnt = 0
		}
		if cnt >= l.rate {
			break
		}
		if l.windows[i].CompareAndSwap(old, sec<<32|uint64(cnt+1)) {
			return rrlAllow
		}
	}
	if l.slip > 0 && l.slipCounts[i].Add(1)%l.slip == 0 {
		return rrlSlip
	}
	return rrlDrop
}
