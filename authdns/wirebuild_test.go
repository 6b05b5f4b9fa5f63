package authdns

import (
	"encoding/binary"
	"strings"
)

// This file builds query packets byte by byte, for the cases a library
// refuses to pack (names over 255 bytes, compression pointers in the
// question, two OPT records, malformed client subnets).

// wireOf packs a dotted name into wire form ("a.b" -> \x01a\x01b\x00); "" and
// "." are the root.
func wireOf(name string) []byte {
	var b []byte
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if l == "" {
			continue
		}
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

// longName returns a wire name of exactly n bytes that ends in suffix (a
// wire name), made of labels of at most 63 bytes.
func longName(n int, suffix []byte) []byte {
	var b []byte
	for k := n - len(suffix); k > 0; {
		l := min(63, k-1)
		if k-(l+1) == 1 { // a remainder of one byte cannot hold a label
			l--
		}
		b = append(b, byte(l))
		b = append(b, strings.Repeat("a", l)...)
		k -= l + 1
	}
	return append(b, suffix...)
}

// rawQuery builds a query with ID 0x1234, the header flags, one question of
// the wire name with qtype and class IN, and the additional records ar.
func rawQuery(flags uint16, name []byte, qtype uint16, ar ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0x1234)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ar)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, qtype)
	b = binary.BigEndian.AppendUint16(b, classIN)
	for _, r := range ar {
		b = append(b, r...)
	}
	return b
}

// optRR builds an OPT record with the owner (a wire name, the root for a
// valid one), the UDP size, the TTL field (extended rcode, version, DO) and
// the options.
func optRR(owner []byte, size uint16, ttl uint32, opts ...[]byte) []byte {
	b := append([]byte(nil), owner...)
	b = binary.BigEndian.AppendUint16(b, typeOPT)
	b = binary.BigEndian.AppendUint16(b, size)
	b = binary.BigEndian.AppendUint32(b, ttl)
	var rd []byte
	for _, o := range opts {
		rd = append(rd, o...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(rd)))
	return append(b, rd...)
}

// ednsDO is the DO bit of an OPT record's TTL field.
const ednsDO = 1 << 15

// ednsOpt builds one EDNS option.
func ednsOpt(code uint16, data ...byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, code)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// ecsOpt builds an EDNS client subnet option (RFC 7871) with the address
// bytes as given, so that malformed ones can be built too.
func ecsOpt(family uint16, source, scope uint8, addr ...byte) []byte {
	d := binary.BigEndian.AppendUint16(nil, family)
	d = append(d, source, scope)
	return ednsOpt(optECS, append(d, addr...)...)
}

// withCounts rewrites the four section counts of a packet.
func withCounts(b []byte, qd, an, ns, ar uint16) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint16(b[4:], qd)
	binary.BigEndian.PutUint16(b[6:], an)
	binary.BigEndian.PutUint16(b[8:], ns)
	binary.BigEndian.PutUint16(b[10:], ar)
	return b
}
