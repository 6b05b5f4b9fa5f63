package authdns

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// verdict is what a parser made of a packet, in the terms of the answer.
type verdict uint8

const (
	vDrop    verdict = iota // no answer
	vFormErr                // FORMERR
	vNotImp                 // NOTIMP
	vBadVers                // BADVERS
	vOK                     // a query to answer
)

func (v verdict) String() string {
	return [...]string{"drop", "FORMERR", "NOTIMP", "BADVERS", "ok"}[v]
}

func verdictOf(r parseResult) verdict {
	switch r {
	case parseDrop:
		return vDrop
	case parseFormErr:
		return vFormErr
	case parseNotImp:
		return vNotImp
	case parseBadVers:
		return vBadVers
	}
	return vOK
}

// reading is what miekg/dns reads in a query packet, with corral's
// deliberate divergences from it applied (each named in why).
type reading struct {
	v   verdict
	why string // the rule or divergence that decided v, for messages

	question      bool   // a whole question was read
	name          string // presentation form, as miekg/dns gives it
	qtype, qclass uint16

	edns    bool
	udpSize uint16
	version uint8
	do      bool
	ecs     *dns.EDNS0_SUBNET
	ecsRaw  []byte // the ECS address bytes as sent
}

// The deliberate divergences of corral's parser from miekg/dns, as
// readMiekg applies them. miekg/dns is a library that reads what it can;
// corral answers queries and refuses what RFC 1035, 6891 and 7871 call
// malformed.
const (
	divQR          = "QR set: corral never answers a response (miekg/dns reads it)"
	divQDCount     = "corral answers exactly one question, FORMERR otherwise (miekg/dns reads any number)"
	divOpcodeFirst = "an opcode other than QUERY with a question count other than 1 is NOTIMP before anything else is read"
	divPointer     = "no compression pointer in the question: nothing precedes it to point to (miekg/dns follows it)"
	divCutQuestion = "a question cut after its name or qtype is FORMERR (miekg/dns reads the rest as 0)"
	divCounts      = "every record the header counts must be present (miekg/dns stops quietly at the end of the packet)"
	divSkipped     = "records other than OPT are skipped without reading their names or data (miekg/dns reads and may refuse them)"
	divOPTOwner    = "the OPT owner must be the root label itself (RFC 6891 6.1.2; miekg/dns takes any name, pointers included)"
	divTwoOPT      = "a second OPT is FORMERR (RFC 6891 6.1.1; miekg/dns keeps both)"
	divOption      = "options other than client subnet are not read (miekg/dns refuses some malformed ones)"
	divECSScope    = "a client subnet scope other than 0 in a query is FORMERR (RFC 7871 7.1.2; miekg/dns accepts up to the family's width, any with family 0)"
	divECSLength   = "the client subnet address has exactly ceil(source/8) bytes, none with family 0 (RFC 7871 6; miekg/dns pads or cuts)"
	divECSBits     = "no client subnet address bits past the source prefix (RFC 7871 6; miekg/dns keeps them)"
	divTwoECS      = "a second client subnet is FORMERR (miekg/dns keeps both)"
)

// readMiekg reads req with miekg/dns, record by record, and applies the
// divergences above.
func readMiekg(req []byte) reading {
	var hdr dns.Msg
	if len(req) < 12 || hdr.Unpack(req[:12]) != nil {
		return reading{v: vDrop, why: "shorter than a header"}
	}
	if hdr.Response {
		return reading{v: vDrop, why: divQR}
	}
	qd := binary.BigEndian.Uint16(req[4:])
	records := int(binary.BigEndian.Uint16(req[6:])) + int(binary.BigEndian.Uint16(req[8:]))
	ar := int(binary.BigEndian.Uint16(req[10:]))
	if qd != 1 {
		if hdr.Opcode != dns.OpcodeQuery {
			return reading{v: vNotImp, why: divOpcodeFirst}
		}
		return reading{v: vFormErr, why: divQDCount}
	}
	name, off, err := dns.UnpackDomainName(req, 12)
	if err != nil {
		return reading{v: vFormErr, why: "bad question name: " + err.Error()}
	}
	if hasPointer(req[12:]) {
		return reading{v: vFormErr, why: divPointer}
	}
	if off+4 > len(req) {
		return reading{v: vFormErr, why: divCutQuestion}
	}
	var qm dns.Msg // the question alone, through miekg/dns's question reader
	if err := qm.Unpack(withCounts(req[:off+4], 1, 0, 0, 0)); err != nil || len(qm.Question) != 1 {
		return reading{v: vFormErr, why: fmt.Sprintf("miekg/dns refused the question: %v", err)}
	}
	rd := reading{question: true, name: name, qtype: qm.Question[0].Qtype, qclass: qm.Question[0].Qclass}
	off += 4
	for i := range records + ar {
		if off == len(req) {
			rd.v, rd.why = vFormErr, divCounts
			return rd
		}
		end, t, ok := skipLeniently(req, off)
		if !ok {
			rd.v, rd.why = vFormErr, "a record runs past the packet"
			return rd
		}
		if i < records || t != typeOPT {
			if _, _, err := dns.UnpackRR(req, off); err != nil {
				rd.why = divSkipped
			}
			off = end
			continue
		}
		if why := rd.readOPT(req, off, end); why != "" {
			rd.v, rd.why = vFormErr, why
			return rd
		}
		off = end
	}
	switch {
	case hdr.Opcode != dns.OpcodeQuery:
		rd.v, rd.why = vNotImp, "opcode "+dns.OpcodeToString[hdr.Opcode]
	case rd.edns && rd.version > 0:
		rd.v, rd.why = vBadVers, "EDNS version above 0"
	default:
		rd.v = vOK
	}
	return rd
}

// readOPT reads the OPT record req[off:end] into rd and returns why it is
// malformed, or "".
func (rd *reading) readOPT(req []byte, off, end int) string {
	if req[off] != 0 {
		return divOPTOwner
	}
	if rd.edns {
		return divTwoOPT
	}
	// The header through miekg/dns: the same record without its rdata.
	h := append([]byte(nil), req[off:off+9]...)
	h = append(h, 0, 0)
	rr, _, err := dns.UnpackRR(h, 0)
	opt, ok := rr.(*dns.OPT)
	if err != nil || !ok {
		return fmt.Sprintf("miekg/dns refused the OPT header: %v", err)
	}
	rd.edns, rd.udpSize, rd.version, rd.do = true, opt.UDPSize(), opt.Version(), opt.Do()
	// Each option through miekg/dns, alone in an OPT record.
	for b := req[off+11 : end]; len(b) > 0; {
		if len(b) < 4 || 4+int(binary.BigEndian.Uint16(b[2:])) > len(b) {
			return "an option runs past the OPT record"
		}
		n := 4 + int(binary.BigEndian.Uint16(b[2:]))
		one := []byte{0, 0, typeOPT, 0, 0, 0, 0, 0, 0, byte(n >> 8), byte(n)}
		rr, _, err := dns.UnpackRR(append(one, b[:n]...), 0)
		code, data := binary.BigEndian.Uint16(b), b[4:n]
		b = b[n:]
		if code != optECS {
			if err != nil {
				rd.why = divOption
			}
			continue
		}
		if err != nil {
			return "miekg/dns refused the client subnet: " + err.Error()
		}
		e := rr.(*dns.OPT).Option[0].(*dns.EDNS0_SUBNET)
		switch {
		case rd.ecs != nil:
			return divTwoECS
		case e.SourceScope != 0:
			return divECSScope
		case len(data)-4 != (int(e.SourceNetmask)+7)/8:
			return divECSLength
		}
		p := ecsPrefixOf(e)
		if p.Masked() != p {
			return divECSBits
		}
		rd.ecs, rd.ecsRaw = e, data[4:]
	}
	return ""
}

// ecsPrefixOf is the prefix of a client subnet read by miekg/dns.
func ecsPrefixOf(e *dns.EDNS0_SUBNET) netip.Prefix {
	a, _ := netip.AddrFromSlice(e.Address)
	if e.Family != 2 { // family 0 reads as 0.0.0.0
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, int(e.SourceNetmask))
}

// hasPointer reports whether the wire name at the start of b holds a
// compression pointer.
func hasPointer(b []byte) bool {
	for off := 0; off < len(b) && b[off] != 0; off += 1 + int(b[off]) {
		if b[off]&0xC0 == 0xC0 {
			return true
		}
	}
	return false
}

// skipLeniently finds the end and type of the record at off without
// reading its name (a pointer is taken as the name's end) or its data.
func skipLeniently(b []byte, off int) (end int, rtype uint16, ok bool) {
	for {
		if off >= len(b) {
			return 0, 0, false
		}
		l := int(b[off])
		if l&0xC0 == 0xC0 {
			off += 2
			break
		}
		if l&0xC0 != 0 {
			return 0, 0, false
		}
		off += 1 + l
		if l == 0 {
			break
		}
	}
	if off+10 > len(b) {
		return 0, 0, false
	}
	end = off + 10 + int(binary.BigEndian.Uint16(b[off+8:]))
	return end, binary.BigEndian.Uint16(b[off:]), end <= len(b)
}

// FuzzParseDiff compares corral's query parser with miekg/dns v1 on
// arbitrary packets: they agree on dropping, refusing (FORMERR) or
// accepting it (NOTIMP and BADVERS included), on the question (name as
// sent, lower-case name, type, class) and on the EDNS fields (UDP size,
// version, DO, client subnet), up to the divergences listed above.
func FuzzParseDiff(f *testing.F) {
	var lower [maxName + 1]byte
	f.Fuzz(func(t *testing.T, req []byte) {
		want := readMiekg(req)
		var q query
		got := verdictOf(parse(req, &q, lower[:]))
		if got != want.v {
			t.Fatalf("corral: %s, miekg/dns: %s (%s)\npacket %x", got, want.v, want.why, req)
		}
		if q.questionOK != want.question {
			t.Fatalf("corral read a question: %v, miekg/dns: %v (%s)\npacket %x", q.questionOK, want.question, want.why, req)
		}
		if want.question {
			compareQuestion(t, req, &q, want)
		}
		if got == vOK || got == vNotImp || got == vBadVers {
			compareEDNS(t, req, &q, want)
		}
	})
}

func compareQuestion(t *testing.T, req []byte, q *query, want reading) {
	t.Helper()
	buf := make([]byte, 512)
	n, err := dns.PackDomainName(want.name, buf, 0, nil, false)
	if err != nil {
		t.Fatalf("miekg/dns cannot pack the name it read, %q: %v", want.name, err)
	}
	ln, err := dns.PackDomainName(dns.CanonicalName(want.name), buf[n:], 0, nil, false)
	if err != nil {
		t.Fatalf("miekg/dns cannot pack %q: %v", dns.CanonicalName(want.name), err)
	}
	if !bytes.Equal(q.raw, buf[:n]) || !bytes.Equal(q.name, buf[n:n+ln]) {
		t.Fatalf("question name %x (lower %x), miekg/dns read %q\npacket %x", q.raw, q.name, want.name, req)
	}
	if q.qtype != want.qtype || q.qclass != want.qclass {
		t.Fatalf("qtype %d class %d, miekg/dns read %d %d\npacket %x", q.qtype, q.qclass, want.qtype, want.qclass, req)
	}
}

func compareEDNS(t *testing.T, req []byte, q *query, want reading) {
	t.Helper()
	if q.edns != want.edns || (q.edns && (q.udpSize != int(want.udpSize) || q.ednsVersion != want.version || q.do != want.do)) {
		t.Fatalf("EDNS %v size %d version %d do %v, miekg/dns: %v %d %d %v\npacket %x",
			q.edns, q.udpSize, q.ednsVersion, q.do, want.edns, want.udpSize, want.version, want.do, req)
	}
	if q.ecs != (want.ecs != nil) {
		t.Fatalf("client subnet %v, miekg/dns %v\npacket %x", q.ecs, want.ecs, req)
	}
	if q.ecs {
		e := want.ecs
		if q.ecsFamily != e.Family || q.ecsSource != e.SourceNetmask || q.ecsPrefix != ecsPrefixOf(e) || !bytes.Equal(q.ecsAddrBytes, want.ecsRaw) {
			t.Fatalf("client subnet family %d %v (%x), miekg/dns %v\npacket %x", q.ecsFamily, q.ecsPrefix, q.ecsAddrBytes, e, req)
		}
	}
}
