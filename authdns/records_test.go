package authdns

import (
	"bytes"
	"testing"
)

// TestAddRecordsCopiesTheSelection checks addRecords on sets of A, AAAA
// and TXT records (the array copies and the general one): the records of
// the selection in its order, owned by the given pointer, and truncation
// when they do not all fit.
func TestAddRecordsCopiesTheSelection(t *testing.T) {
	mk := func(rtype uint16, sizes ...int) *rrset {
		s := &rrset{rtype: rtype}
		for i, n := range sizes {
			rr := bytes.Repeat([]byte{byte(i + 1)}, n) // type .. rdata, 10+rdlength bytes
			s.rrs = append(s.rrs, rr)
		}
		s.pack()
		return s
	}
	sets := []struct {
		name string
		set  *rrset
	}{
		{"A", mk(typeA, 14, 14, 14, 14)},
		{"AAAA", mk(typeAAAA, 26, 26, 26)},
		{"TXT", mk(typeTXT, 12, 30, 15)},
	}
	for _, tc := range sets {
		for _, ptr := range []int{12, 0x1234} {
			idx := []int{2, 0, 1}
			var want []byte
			for _, i := range idx {
				want = append(want, 0xC0|byte(ptr>>8), byte(ptr))
				want = append(want, tc.set.rrs[i]...)
			}
			var m builder
			m.start(make([]byte, 0, 512), &query{}, 512)
			start, ok := m.addRecords(tc.set, idx, ptr)
			if !ok || start != 12 || m.an != 3 || !bytes.Equal(m.b[12:], want) {
				t.Errorf("%s, owner at %#x: got %v at %d, %d records %x; want %x", tc.name, ptr, ok, start, m.an, m.b[12:], want)
			}
			m.start(make([]byte, 0, 512), &query{}, 12+len(want)-1)
			if _, ok := m.addRecords(tc.set, idx, ptr); ok || !m.tc || len(m.b) != 12 || m.an != 0 {
				t.Errorf("%s: one byte short: got %v, TC %v, %d bytes, %d records; want truncated", tc.name, ok, m.tc, len(m.b), m.an)
			}
		}
	}
}
