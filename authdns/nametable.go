package authdns

import "encoding/binary"

// nameTable finds the node of a name (lower-case wire form) among the
// names of a zoneSet: open addressing with linear probing, built once
// and read-only after, with a hash that takes the name eight bytes at a
// time (and that worker.fast computes while it lower-cases the name).
// Queries cannot add entries, so the longest probe is fixed when the
// table is built, whatever names an attacker asks for. The zero value
// finds nothing; it is safe for concurrent use.
type nameTable struct {
	seed  uint64
	mask  uint64
	slots []nameSlot
}

type nameSlot struct {
	hash uint64
	node *node
}

// newNameTable indexes nodes by their names, with a table at most half
// full.
func newNameTable(nodes []*node, seed uint64) nameTable {
	size := 8
	for size < 2*len(nodes) {
		size *= 2
	}
	t := nameTable{seed: seed, mask: uint64(size - 1), slots: make([]nameSlot, size)}
	for _, n := range nodes {
		h := t.hash(n.name)
		i := h & t.mask
		for t.slots[i].node != nil {
			i = (i + 1) & t.mask
		}
		t.slots[i] = nameSlot{h, n}
	}
	return t
}

// get returns the node named name whose hash (t.hash) is h, or nil.
func (t *nameTable) get(name []byte, h uint64) *node {
	if len(t.slots) == 0 {
		return nil
	}
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.node == nil {
			return nil
		}
		if s.hash == h && string(s.node.name) == string(name) {
			return s.node
		}
	}
}

// hash is the table's hash of a lower-case name, as lowerHash computes
// it while lower-casing.
func (t *nameTable) hash(name []byte) uint64 {
	var buf [maxName + 8]byte
	n := copy(buf[:], name)
	h := t.seed
	for i := 0; i < n; i += 8 {
		h = (h ^ binary.LittleEndian.Uint64(buf[i:])) * hashMul
	}
	return hashEnd(h, n)
}

// lowerHash lower-cases the first n bytes of b (0 < n, and b holds at
// least (n+7)&^7 bytes; those past n are scratch) as lowerWords does, and
// returns their hash in t.
func (t *nameTable) lowerHash(b []byte, n int) uint64 {
	b = b[:(n+7)&^7]
	h := t.seed
	for len(b) > 8 {
		x := lowerWord(binary.LittleEndian.Uint64(b))
		binary.LittleEndian.PutUint64(b, x)
		h = (h ^ x) * hashMul
		b = b[8:]
	}
	x := lowerWord(binary.LittleEndian.Uint64(b))
	binary.LittleEndian.PutUint64(b, x)
	x &= ^uint64(0) >> ((8 - n&7) & 7 * 8) // the scratch bytes past the name
	h = (h ^ x) * hashMul
	return hashEnd(h, n)
}

// hashMul is the odd multiplier of the hash (2^64 over the golden ratio).
const hashMul = 0x9e3779b97f4a7c15

// hashEnd mixes the length n of a name into h and spreads the high bits
// of h, which depend on every byte, over the low ones that index the
// table.
func hashEnd(h uint64, n int) uint64 {
	h = (h ^ uint64(n)) * hashMul
	return h ^ h>>29
}
