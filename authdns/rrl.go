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
// name, in one-second windows (NSD's scheme without its smoothing). It is
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

// allow decides for one response to client; rcode classifies it (answers,
// NXDOMAIN and errors have separate budgets) together with the query name.
func (l *limiter) allow(client netip.Addr, q *query, rcode int, now time.Time) int {
	return l.allowKey(l.key(client, q, rcode), now)
}

// key hashes the bucket of a response.
func (l *limiter) key(client netip.Addr, q *query, rcode int) uint64 {
	var b [32]byte
	client = client.Unmap()
	bits := l.v6
	if client.Is4() {
		bits = l.v4
	}
	p, _ := client.Prefix(bits)
	a := p.Addr().As16()
	copy(b[:], a[:])
	class := byte(0)
	switch rcode {
	case rcodeNoError:
	case rcodeNXDomain:
		class = 1
	default:
		class = 2
	}
	b[16] = class
	binary.BigEndian.PutUint16(b[17:], q.qtype)
	var h maphash.Hash
	h.SetSeed(l.seed)
	_, _ = h.Write(b[:19])
	_, _ = h.Write(q.name)
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
