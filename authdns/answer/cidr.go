package answer

import (
	"net/netip"
	"slices"
)

// cidrTable finds the location of an address by longest prefix match.
type cidrTable struct {
	// lens4 and lens6 are the prefix lengths present, longest first.
	lens4, lens6 []int
	// loc maps a masked prefix to its location index.
	loc map[netip.Prefix]int
	// members lists the record indices of each location; the last entry is
	// the default location "*".
	members [][]int
	// maxBits4 and maxBits6 are the longest prefix lengths, the scope of an
	// answer from the default location.
	maxBits4, maxBits6 int
}

func newCIDRTable(locations map[string][]netip.Prefix, recs []Record) *cidrTable {
	names := make([]string, 0, len(locations))
	for name := range locations {
		if name != DefaultLocation {
			names = append(names, name)
		}
	}
	slices.Sort(names) // deterministic: of two locations with the same prefix, the first name wins
	t := &cidrTable{loc: make(map[netip.Prefix]int), members: make([][]int, len(names)+1)}
	for li, name := range names {
		for _, p := range locations[name] {
			p = p.Masked()
			if _, dup := t.loc[p]; dup {
				continue
			}
			t.loc[p] = li
			if p.Addr().Is4() {
				t.lens4 = append(t.lens4, p.Bits())
				t.maxBits4 = max(t.maxBits4, p.Bits())
			} else {
				t.lens6 = append(t.lens6, p.Bits())
				t.maxBits6 = max(t.maxBits6, p.Bits())
			}
		}
	}
	for _, l := range []*[]int{&t.lens4, &t.lens6} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
		slices.Reverse(*l)
	}
	for i, r := range recs {
		li := len(names)
		if j, ok := slices.BinarySearch(names, r.Location); ok {
			li = j
		}
		t.members[li] = append(t.members[li], i)
	}
	return t
}

// lookup returns the location index of a (the default location when no
// prefix holds it) and the prefix length that decided it.
func (t *cidrTable) lookup(a netip.Addr, srcBits int) (int, uint8) {
	def := len(t.members) - 1
	if !a.IsValid() {
		return def, 0
	}
	a = a.Unmap()
	lens, maxBits := t.lens4, t.maxBits4
	if !a.Is4() {
		lens, maxBits = t.lens6, t.maxBits6
	}
	for _, l := range lens {
		if l > srcBits {
			continue // the client subnet is shorter than this prefix
		}
		p, _ := a.Prefix(l)
		if li, ok := t.loc[p]; ok {
			return li, uint8(l)
		}
	}
	return def, uint8(min(maxBits, srcBits))
}

// cidrSelect answers the healthy records of the client's location, else the
// healthy records of the default location, else every record of the
// client's location (fail open).
func (s *Set) cidrSelect(dst []int, q Query, h Health, r Source) ([]int, Result) {
	t := s.cidr
	a, srcBits := q.Client, 128
	if q.Subnet.IsValid() {
		a, srcBits = q.Subnet.Addr(), q.Subnet.Bits()
	}
	if a.Unmap().Is4() {
		srcBits = min(srcBits, 32)
	}
	li, scope := t.lookup(a, srcBits)
	res := Result{Scope: scope}
	if !q.Subnet.IsValid() {
		res.Scope = 0
	}
	for _, loc := range []int{li, len(t.members) - 1} {
		for _, i := range t.members[loc] {
			if s.up(h, i) {
				dst = append(dst, i)
			}
		}
		if len(dst) > 0 {
			shuffle(dst, r)
			return dst, res
		}
	}
	members := t.members[li]
	if len(members) == 0 {
		members = t.members[len(t.members)-1]
	}
	dst = append(dst, members...)
	shuffle(dst, r)
	res.FailOpen = len(dst) > 0
	return dst, res
}
