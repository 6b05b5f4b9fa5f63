package answer

import (
	"net/netip"
	"slices"
)

// CIDR answers the healthy records of the location whose prefix holds the
// client's EDNS client subnet (or its address), longest prefix first, else
// the healthy records of the default location "*", else every record of
// the client's location (fail open); Result.Scope is the ECS scope. It
// reads Locations and Record.Location: every location but "*" must be
// listed.
var CIDR = &Policy{
	name:   "cidr",
	fields: fields(FieldLocations, FieldLocation),
	validate: func(c *Config) []error {
		var errs []error
		for loc, ps := range c.Locations {
			for _, p := range ps {
				if !p.IsValid() {
					errs = append(errs, setErr(FieldLocations, "location %q: invalid prefix", loc))
				}
			}
		}
		for i, r := range c.Records {
			if r.Location != "" && r.Location != DefaultLocation {
				if _, ok := c.Locations[r.Location]; !ok {
					errs = append(errs, recErr(i, FieldLocation, "unknown location %q", r.Location))
				}
			}
		}
		return errs
	},
	build: func(c *Config) selector { return newCIDRTable(c.Locations, c.Records) },
}

// cidrTable finds the location of an address by longest prefix match, and
// the ECS scope of the answer: the length of the network around the address
// that every address of maps to the same location (RFC 7871 section 7.3.1).
type cidrTable struct {
	// lens4 and lens6 are the prefix lengths present, longest first.
	lens4, lens6 []int
	// node maps a masked prefix to its index in nodes.
	node map[netip.Prefix]int
	// nodes are the prefixes; root4 and root6 stand for the whole address
	// space of each family (the default location).
	nodes        []cidrNode
	root4, root6 int
	// members lists the record indices of each location; the last entry is
	// the default location "*".
	members [][]int
}

// cidrNode is a configured prefix in the tree of prefixes.
type cidrNode struct {
	prefix netip.Prefix
	loc    int
	// inner are the largest prefixes inside this one that answer another
	// location somewhere (themselves or a prefix inside them), sorted by
	// address. An answer decided by this prefix holds for a network only
	// if the network holds none of them.
	inner []netip.Addr
	// parent is the index of the smallest prefix holding this one (a root
	// for the largest ones).
	parent int
}

func newCIDRTable(locations map[string][]netip.Prefix, recs []Record) *cidrTable {
	names := make([]string, 0, len(locations))
	for name := range locations {
		if name != DefaultLocation {
			names = append(names, name)
		}
	}
	slices.Sort(names) // deterministic: of two locations with the same prefix, the first name wins
	def := len(names)
	t := &cidrTable{node: make(map[netip.Prefix]int), members: make([][]int, len(names)+1)}
	t.root4, t.root6 = 0, 1
	t.nodes = []cidrNode{
		{prefix: netip.PrefixFrom(netip.IPv4Unspecified(), 0), loc: def, parent: -1},
		{prefix: netip.PrefixFrom(netip.IPv6Unspecified(), 0), loc: def, parent: -1},
	}
	for li, name := range names {
		for _, p := range locations[name] {
			p = p.Masked()
			if _, dup := t.node[p]; dup {
				continue
			}
			t.node[p] = len(t.nodes)
			t.nodes = append(t.nodes, cidrNode{prefix: p, loc: li})
			if p.Addr().Is4() {
				t.lens4 = append(t.lens4, p.Bits())
			} else {
				t.lens6 = append(t.lens6, p.Bits())
			}
		}
	}
	for _, l := range []*[]int{&t.lens4, &t.lens6} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
		slices.Reverse(*l)
	}
	t.link()
	for i, r := range recs {
		li := def
		if j, ok := slices.BinarySearch(names, r.Location); ok {
			li = j
		}
		t.members[li] = append(t.members[li], i)
	}
	return t
}

// link finds the parent of every prefix and the inner prefixes of every
// node. It runs at build time.
func (t *cidrTable) link() {
	for i := 2; i < len(t.nodes); i++ {
		n := &t.nodes[i]
		n.parent = t.root4
		if !n.prefix.Addr().Is4() {
			n.parent = t.root6
		}
		for l := n.prefix.Bits() - 1; l >= 0; l-- {
			p, _ := n.prefix.Addr().Prefix(l)
			if j, ok := t.node[p]; ok {
				n.parent = j
				break
			}
		}
	}
	// mixed[i] is true when some address of node i maps to a location
	// other than node i's own.
	children := make([][]int, len(t.nodes))
	for i := 2; i < len(t.nodes); i++ {
		children[t.nodes[i].parent] = append(children[t.nodes[i].parent], i)
	}
	mixed := make([]bool, len(t.nodes))
	var visit func(i int)
	visit = func(i int) {
		for _, c := range children[i] {
			visit(c)
			if mixed[c] || t.nodes[c].loc != t.nodes[i].loc {
				mixed[i] = true
				t.nodes[i].inner = append(t.nodes[i].inner, t.nodes[c].prefix.Addr())
			}
		}
		slices.SortFunc(t.nodes[i].inner, netip.Addr.Compare)
	}
	visit(t.root4)
	visit(t.root6)
}

// lookup returns the location index of a (the default location when no
// prefix holds it) and the ECS scope of that answer: the shortest prefix
// length at least as long as the prefix that decided it whose network
// around a holds no prefix answering another location. The scope can be
// longer than the client's source prefix (RFC 7871 section 7.2.1).
func (t *cidrTable) lookup(a netip.Addr) (int, uint8) {
	if !a.IsValid() {
		return len(t.members) - 1, 0
	}
	a = a.Unmap()
	lens, ni := t.lens4, t.root4
	if !a.Is4() {
		lens, ni = t.lens6, t.root6
	}
	for _, l := range lens {
		p, _ := a.Prefix(l)
		if j, ok := t.node[p]; ok {
			ni = j
			break
		}
	}
	n := &t.nodes[ni]
	scope := n.prefix.Bits()
	// The inner prefixes are disjoint and sorted: the one sharing the
	// longest prefix with a is a neighbour of a's place among them.
	i, _ := slices.BinarySearchFunc(n.inner, a, netip.Addr.Compare)
	for _, j := range [2]int{i - 1, i} {
		if j >= 0 && j < len(n.inner) {
			// a is outside the inner prefix, so they share fewer bits than
			// its length: one bit more separates a's network from it.
			scope = max(scope, commonBits(a, n.inner[j])+1)
		}
	}
	return n.loc, uint8(scope)
}

// commonBits returns the length of the common prefix of a and b, two
// addresses of the same family.
func commonBits(a, b netip.Addr) int {
	x, y := a.As16(), b.As16()
	n := 0
	for i := range x {
		d := x[i] ^ y[i]
		if d == 0 {
			n += 8
			continue
		}
		for d&0x80 == 0 {
			n++
			d <<= 1
		}
		break
	}
	if a.Is4() {
		n -= 96
	}
	return n
}

// pick answers the healthy records of the client's location, else the
// healthy records of the default location, else every record of the
// client's location (fail open). A client subnet shorter than a location's
// prefix is answered as its first address is, with a scope longer than the
// subnet.
func (t *cidrTable) pick(s *Set, dst []int, q Query, r Source) ([]int, Result) {
	a := q.Client
	if q.Subnet.IsValid() {
		a = q.Subnet.Masked().Addr()
	}
	li, scope := t.lookup(a)
	res := Result{Scope: scope}
	switch {
	case !q.Subnet.IsValid(), q.Subnet.Bits() == 0:
		// No subnet, or /0: a client that does not want its answer
		// tailored, so none is cached as tailored either.
		res.Scope = 0
	case a.Is4In6():
		res.Scope += 96 // the scope counts the bits of the subnet's own family
	}
	for _, loc := range []int{li, len(t.members) - 1} {
		for _, i := range t.members[loc] {
			if s.up(i) {
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
