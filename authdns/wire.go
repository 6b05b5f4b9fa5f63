package authdns

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"unsafe"
)

// Header flag bits.
const (
	flagQR = 1 << 15
	flagAA = 1 << 10
	flagTC = 1 << 9
	flagRD = 1 << 8
	flagCD = 1 << 4
)

// Response codes.
const (
	rcodeNoError  = 0
	rcodeFormErr  = 1
	rcodeServFail = 2
	rcodeNXDomain = 3
	rcodeNotImp   = 4
	rcodeRefused  = 5
	rcodeBadVers  = 16
)

// optECS is the EDNS client subnet option code (RFC 7871).
const optECS = 8

// query is a parsed query. Slices point into the request and into the
// worker's buffers: a query lives as long as one call of handle.
type query struct {
	id     uint16
	flags  uint16
	opcode uint8
	// raw is the question name as received (case preserved, ending in the
	// root label); name is its lower-case copy. question is the question
	// section as received: raw, type and class.
	raw, name    []byte
	question     []byte
	qtype        uint16
	qclass       uint16
	questionOK   bool
	edns         bool
	ednsVersion  uint8
	do           bool
	udpSize      int
	ecs          bool
	ecsFamily    uint16
	ecsSource    uint8
	ecsPrefix    netip.Prefix
	ecsAddrBytes []byte
}

// parseResult says what to do with a packet after parsing.
type parseResult uint8

const (
	parseOK      parseResult = iota
	parseDrop                // no answer at all
	parseFormErr             // answer FORMERR
	parseNotImp              // answer NOTIMP
	parseBadVers             // answer BADVERS
)

// parse reads req into q, lower-casing the question name into lower
// (maxName+1 bytes).
func parse(req []byte, q *query, lower []byte) parseResult {
	lower = lower[:maxName+1]
	*q = query{}
	if len(req) < 12 {
		return parseDrop
	}
	q.id = binary.BigEndian.Uint16(req)
	q.flags = binary.BigEndian.Uint16(req[2:])
	if q.flags&flagQR != 0 {
		return parseDrop // a response: never answer it
	}
	q.opcode = uint8(q.flags>>11) & 0xF
	qd := binary.BigEndian.Uint16(req[4:])
	an := binary.BigEndian.Uint16(req[6:])
	ns := binary.BigEndian.Uint16(req[8:])
	ar := binary.BigEndian.Uint16(req[10:])
	if qd != 1 {
		if q.opcode != 0 {
			return parseNotImp
		}
		return parseFormErr
	}
	off := 12
	// The question name: no compression pointers in a question, at most
	// maxName bytes. A label cut by the end of the packet fails the next
	// turn's bound.
	for {
		if off >= len(req) {
			return parseFormErr
		}
		l := int(req[off])
		off += 1 + l
		if l == 0 {
			break
		}
		if l > 63 || off-12 >= maxName { // a pointer or a reserved label type; no room for the root
			return parseFormErr
		}
	}
	n := copy(lower, req[12:off])
	lowerWords(lower[:(n+7)&^7]) // the bytes after the name are scratch
	q.raw = req[12:off]
	q.name = lower[:n]
	if off+4 > len(req) {
		return parseFormErr
	}
	q.qtype = binary.BigEndian.Uint16(req[off:])
	q.qclass = binary.BigEndian.Uint16(req[off+2:])
	off += 4
	q.question = req[12:off]
	q.questionOK = true
	// Skip answer and authority records; look for OPT among the additional.
	for i := 0; i < int(an)+int(ns); i++ {
		var ok bool
		if off, _, _, ok = skipRR(req, off); !ok {
			return parseFormErr
		}
	}
	for range ar {
		start := off
		var t uint16
		var rdOff int
		var ok bool
		if off, t, rdOff, ok = skipRR(req, off); !ok {
			return parseFormErr
		}
		if t != typeOPT {
			continue
		}
		if q.edns || req[start] != 0 { // a second OPT, or an OPT not owned by the root
			return parseFormErr
		}
		q.edns = true
		q.udpSize = int(binary.BigEndian.Uint16(req[start+3:]))
		ttl := binary.BigEndian.Uint32(req[start+5:])
		q.ednsVersion = uint8(ttl >> 16)
		q.do = ttl&(1<<15) != 0
		if r := parseOptions(req[rdOff:off], q); r != parseOK {
			return r
		}
	}
	if q.opcode != 0 {
		return parseNotImp // with the OPT of the query echoed
	}
	if q.edns && q.ednsVersion > 0 {
		return parseBadVers
	}
	return parseOK
}

// lowerWords lower-cases the ASCII letters of b, whose length is a
// multiple of 8, eight bytes at a time (lowerWord).
func lowerWords(b []byte) {
	for ; len(b) >= 8; b = b[8:] {
		binary.LittleEndian.PutUint64(b, lowerWord(binary.LittleEndian.Uint64(b)))
	}
}

// lowerWord lower-cases the ASCII letters among the eight bytes of x: a
// byte becomes lower case when its high bit is clear and its low seven
// bits are in 'A'..'Z'. The length bytes of a wire name are below 64 and
// stay as they are.
func lowerWord(x uint64) uint64 {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	low := x &^ high
	geA := low + (0x80-'A')*ones   // high bit set where low >= 'A'
	gtZ := low + (0x80-'Z'-1)*ones // high bit set where low > 'Z'
	upper := (geA &^ gtZ) &^ x & high
	return x | upper>>2 // 0x80>>2 is 'a'-'A'
}

// skipRR skips the record at off and returns where the next starts, its
// type and where its rdata starts.
func skipRR(b []byte, off int) (next int, t uint16, rd int, ok bool) {
	for {
		if off >= len(b) {
			return 0, 0, 0, false
		}
		l := int(b[off])
		if l&0xC0 == 0xC0 {
			off += 2
			break
		}
		if l&0xC0 != 0 {
			return 0, 0, 0, false
		}
		off += 1 + l
		if l == 0 {
			break
		}
	}
	if off+10 > len(b) {
		return 0, 0, 0, false
	}
	t = binary.BigEndian.Uint16(b[off:])
	rdlen := int(binary.BigEndian.Uint16(b[off+8:]))
	rd = off + 10
	if rd+rdlen > len(b) {
		return 0, 0, 0, false
	}
	return rd + rdlen, t, rd, true
}

// parseOptions reads the EDNS options of an OPT record.
func parseOptions(b []byte, q *query) parseResult {
	for len(b) > 0 {
		if len(b) < 4 {
			return parseFormErr
		}
		code := binary.BigEndian.Uint16(b)
		l := int(binary.BigEndian.Uint16(b[2:]))
		if 4+l > len(b) {
			return parseFormErr
		}
		v := b[4 : 4+l]
		b = b[4+l:]
		if code != optECS {
			continue
		}
		if q.ecs || len(v) < 4 {
			return parseFormErr
		}
		fam, src, scope := binary.BigEndian.Uint16(v), v[2], v[3]
		addr := v[4:]
		var full int
		switch fam {
		case 0:
			// No address at all (source 0): what dig +subnet=0 sent
			// before BIND 9.18 and what BIND and miekg/dns accept; RFC
			// 7871 6 only says FAMILY SHOULD then be the transport's.
			// Answered as 0.0.0.0/0, echoed as sent.
			full = 0
		case 1:
			full = 32
		case 2:
			full = 128
		default:
			return parseFormErr
		}
		if int(src) > full || scope != 0 || len(addr) != (int(src)+7)/8 {
			return parseFormErr
		}
		var buf [16]byte
		copy(buf[:], addr)
		var a netip.Addr
		if fam == 2 {
			a = netip.AddrFrom16(buf)
		} else {
			a = netip.AddrFrom4([4]byte(buf[:4]))
		}
		p := netip.PrefixFrom(a, int(src))
		if p.Masked() != p {
			return parseFormErr // address bits beyond the source prefix (RFC 7871 6)
		}
		q.ecs, q.ecsFamily, q.ecsSource, q.ecsPrefix, q.ecsAddrBytes = true, fam, src, p, addr
	}
	return parseOK
}

// builder writes a response into a buffer. The zero value is unusable;
// start begins a message.
type builder struct {
	b          []byte
	limit      int // largest message allowed
	reserve    int // bytes kept free for the OPT record
	qend       int // end of the question section
	an, ns, ar uint16
	tc         bool
}

// start writes the header and, when q's question parsed, the question.
func (m *builder) start(buf []byte, q *query, limit int) {
	b := buf[:12]
	f := flagQR | uint16(q.opcode)<<11 | q.flags&(flagRD|flagCD)
	binary.BigEndian.PutUint32(b, uint32(q.id)<<16|uint32(f))
	binary.BigEndian.PutUint64(b[4:], 0) // the counts
	if q.questionOK {
		b = append(b, q.question...)
		b[5] = 1 // QDCOUNT
	}
	m.b, m.limit, m.qend = b, limit, len(b)
	m.an, m.ns, m.ar, m.tc = 0, 0, 0, false
	m.reserve = 0
	if q.edns {
		m.reserve = 11
		if q.ecs {
			m.reserve += 8 + len(q.ecsAddrBytes)
		}
	}
}

// setFlags ORs flags into the header.
func (m *builder) setFlags(f uint16) {
	binary.BigEndian.PutUint16(m.b[2:], binary.BigEndian.Uint16(m.b[2:])|f)
}

// add appends a record whose owner is a compression pointer to ptr and
// whose remainder is rest. It returns the offset of the record's rdata, or
// -1 when the record does not fit (the message is then truncated).
func (m *builder) add(ptr int, rest []byte, authority bool) int {
	if m.tc {
		return -1
	}
	if len(m.b)+2+len(rest) > m.limit-m.reserve {
		m.truncate()
		return -1
	}
	m.b = append(m.b, 0xC0|byte(ptr>>8), byte(ptr))
	m.b = append(m.b, rest...)
	if authority {
		m.ns++
	} else {
		m.an++
	}
	return len(m.b) - len(rest) + 10
}

// addRecords appends the records idx of set (as laid out by pack) to the
// answer section, owned by a compression pointer to ptr, and returns the
// offset where the first starts. When they do not all fit it truncates
// the message and returns false, as add would at the first record that
// does not fit. The records are sized first and copied in one pass; A and
// AAAA records are copied as fixed-size blocks.
func (m *builder) addRecords(set *rrset, idx []int, ptr int) (int, bool) {
	if m.tc {
		return 0, false
	}
	start, need := len(m.b), 0
	if set.fixed > 0 {
		need = len(idx) * set.fixed
	} else {
		for _, i := range idx {
			need += set.off[i+1] - set.off[i]
		}
	}
	if start+need > m.limit-m.reserve {
		m.truncate()
		return 0, false
	}
	m.b = slices.Grow(m.b, need)[:start+need]
	b, wire := m.b[start:], set.wire
	switch {
	case set.a != nil:
		copyA(b, set.a, idx)
	case set.aaaa != nil:
		copyAAAA(b, set.aaaa, idx)
	default:
		o := 0
		for _, i := range idx {
			o += copy(b[o:], wire[set.off[i]:set.off[i+1]])
		}
	}
	if ptr != 12 { // wire's owners point to the question name
		o := 0
		for _, i := range idx {
			b[o], b[o+1] = 0xC0|byte(ptr>>8), byte(ptr)
			o += set.off[i+1] - set.off[i]
		}
	}
	m.an += uint16(len(idx))
	return start, true
}

// copyA copies the 16-byte records idx of recs to b, one after the other;
// b holds 16 bytes per index.
func copyA(b []byte, recs [][16]byte, idx []int) {
	dst := unsafe.Slice((*[16]byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/16)[:len(idx)]
	for j, i := range idx {
		dst[j] = recs[i]
	}
}

// copyAAAA copies the 28-byte records idx of recs to b, one after the
// other; b holds 28 bytes per index.
func copyAAAA(b []byte, recs [][28]byte, idx []int) {
	dst := unsafe.Slice((*[28]byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/28)[:len(idx)]
	for j, i := range idx {
		dst[j] = recs[i]
	}
}

// addAdditional appends a record to the additional section like add, and
// reports whether it fitted; one that does not fit is left out without
// truncating (RFC 2181 section 9), and so is one whose owner is beyond the
// reach of a compression pointer.
func (m *builder) addAdditional(ptr int, rest []byte) bool {
	if m.tc || ptr >= 0x4000 || len(m.b)+2+len(rest) > m.limit-m.reserve {
		return false
	}
	m.b = append(m.b, 0xC0|byte(ptr>>8), byte(ptr))
	m.b = append(m.b, rest...)
	m.ar++
	return true
}

// truncate drops every record and sets TC.
func (m *builder) truncate() {
	m.b = m.b[:m.qend]
	m.an, m.ns, m.ar, m.tc = 0, 0, 0, true
	m.setFlags(flagTC)
}

// finish writes the counts and the OPT record of q and returns the message.
func (m *builder) finish(q *query, rcode int, udpSize int, scope uint8) []byte {
	b := m.b
	b[3] = b[3]&^0xF | byte(rcode&0xF)
	ar := m.ar
	if q.edns {
		ttl := uint32(rcode>>4) << 24
		if q.do {
			ttl |= 1 << 15
		}
		n := len(b)
		b = slices.Grow(b, 11)[:n+11]
		o := b[n : n+11]
		o[0], o[1], o[2] = 0, 0, typeOPT // owner ".", type OPT
		binary.BigEndian.PutUint16(o[3:], uint16(udpSize))
		binary.BigEndian.PutUint32(o[5:], ttl)
		o[9], o[10] = 0, 0 // RDLENGTH
		if q.ecs && rcode != rcodeBadVers {
			binary.BigEndian.PutUint16(o[9:], uint16(8+len(q.ecsAddrBytes)))
			b = binary.BigEndian.AppendUint16(b, optECS)
			b = binary.BigEndian.AppendUint16(b, uint16(4+len(q.ecsAddrBytes)))
			b = binary.BigEndian.AppendUint16(b, q.ecsFamily)
			b = append(b, q.ecsSource, scope)
			b = append(b, q.ecsAddrBytes...)
		}
		ar++
	}
	binary.BigEndian.PutUint32(b[6:], uint32(m.an)<<16|uint32(m.ns))
	binary.BigEndian.PutUint16(b[10:], ar)
	m.b, m.ar = b, ar
	return b
}
