package authdns

import (
	"errors"
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// This file turns configured names and record values into wire form at
// zone load with github.com/miekg/dns: its presentation-format parser reads
// the values and its packer writes the bytes. The query path never calls
// it; it copies the bytes made here.

// maxTXT bounds a TXT value, so that a record set still fits a TCP answer.
const maxTXT = 4000

// absName applies corral's naming rule to the configured name s and returns
// it absolute and lower case, in presentation form: a name without a final
// dot is relative to origin (an absolute presentation name, or "" for
// none), unless it already ends with origin ("ns1.corral.test" in the zone
// corral.test means ns1.corral.test., as people write it in YAML).
func absName(s, origin string) (string, error) {
	if s == "" {
		return "", errors.New("empty name")
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f {
			return "", fmt.Errorf("name %q: character %q is not allowed (spaces, control characters; an internationalized name goes in its xn-- form)", s, r)
		}
	}
	if !dns.IsFqdn(s) && origin != "" && !dns.IsSubDomain(origin, s+".") {
		if origin == "." {
			s += "."
		} else {
			s += "." + origin
		}
	}
	s = dns.CanonicalName(s)
	if _, ok := dns.IsDomainName(s); !ok {
		return "", fmt.Errorf("name %q: labels must have 1 to 63 bytes and the name at most 255", strings.TrimSuffix(s, "."))
	}
	return s, nil
}

// wireName returns the wire form of the absolute presentation name s.
func wireName(s string) ([]byte, error) {
	b := make([]byte, maxName+1)
	n, err := dns.PackDomainName(s, b, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("name %q: %v", s, err)
	}
	return b[:n:n], nil
}

// presentation returns the dotted form of a wire name, for messages.
func presentation(w []byte) string {
	s, _, err := dns.UnpackDomainName(w, 0)
	if err != nil {
		return fmt.Sprintf("%x", w)
	}
	return s
}

// nameField is the index of the domain name among the fields of a value of
// each type that holds one.
var nameField = map[uint16]int{typeNS: 0, typeCNAME: 0, typeMX: 1, typeSRV: 3}

// parseValue reads the configured value v of a record of type t in the zone
// origin into a dns.RR. Values are in presentation format (RFC 1035 and
// the type's RFC: "10 mail" for MX, `0 issue "ca.example"` for CAA) with
// corral's naming rule for the domain name they hold, except TXT values,
// which are plain text: the bytes as written, split in 255-byte strings.
func parseValue(t uint16, v, origin string) (dns.RR, error) {
	hdr := dns.RR_Header{Name: ".", Rrtype: t, Class: dns.ClassINET}
	if t == typeTXT {
		if len(v) > maxTXT {
			return nil, fmt.Errorf("TXT value of %d bytes is too long (at most %d)", len(v), maxTXT)
		}
		txt := &dns.TXT{Hdr: hdr}
		for s := v; ; {
			c := s[:min(len(s), 255)]
			// miekg/dns reads a backslash in Txt as an escape.
			txt.Txt = append(txt.Txt, strings.ReplaceAll(c, `\`, `\\`))
			if s = s[len(c):]; s == "" {
				return txt, nil
			}
		}
	}
	name, orig := dns.TypeToString[t], v
	if i, ok := nameField[t]; ok {
		f := strings.Fields(v)
		if i < len(f) {
			a, err := absName(f[i], origin)
			if err != nil {
				return nil, err
			}
			f[i] = a
		}
		v = strings.Join(f, " ")
	}
	// A value is one record: no second line, and no comment that the zone
	// file parser would drop without a word (a CAA value may quote one).
	if strings.ContainsAny(v, "\r\n") || t != typeCAA && strings.Contains(v, ";") {
		return nil, fmt.Errorf("bad %s value %q: newlines and comments are not allowed in a value", name, orig)
	}
	rr, err := dns.NewRR(". 0 IN " + name + " " + v)
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), " at line:")
		return nil, fmt.Errorf("bad %s value %q: %s", name, orig, msg)
	}
	if rr == nil || rr.Header().Rrtype != t {
		return nil, fmt.Errorf("bad %s value %q: empty", name, orig)
	}
	if a, ok := rr.(*dns.AAAA); ok && a.AAAA.To4() != nil {
		return nil, fmt.Errorf("bad AAAA value %q: an IPv4-mapped address belongs in an A record", v)
	}
	return rr, nil
}

// packRR packs r as a record of type t (r's type) with the given TTL and
// returns the part of the record
// after its owner: type, class, TTL, rdata length and rdata, ready to copy
// into an answer after a compression pointer to the owner. Names inside the
// rdata are not compressed, so the bytes stand anywhere in a message.
func packRR(r dns.RR, t uint16, ttl uint32) ([]byte, error) {
	h := r.Header()
	h.Name, h.Rrtype, h.Class, h.Ttl = ".", t, dns.ClassINET, ttl
	b := make([]byte, dns.Len(r)+1)
	n, err := dns.PackRR(r, b, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("%s record: %v", dns.TypeToString[h.Rrtype], err)
	}
	// The owner "." is the one byte 0.
	return b[1:n:n], nil
}

// targetField is the offset in the rdata of the domain name a record of
// each type points to: the CNAME target, the name server, the mail
// exchange, the SRV target.
var targetField = map[uint16]int{typeCNAME: 0, typeNS: 0, typeMX: 2, typeSRV: 6}

// targetOf returns, lower case, the name the record rest (packed by
// packRR, so uncompressed) points to, or nil for a type without one.
func targetOf(t uint16, rest []byte) []byte {
	off, ok := targetField[t]
	if !ok {
		return nil
	}
	rd := rdataOf(rest)[off:]
	n := 0
	for n < len(rd) && rd[n] != 0 {
		n += 1 + int(rd[n])
	}
	return lowerWire(append([]byte(nil), rd[:min(n+1, len(rd))]...))
}

// rdataOf returns the rdata of a record packed by packRR.
func rdataOf(rest []byte) []byte { return rest[10:] }

// lowerWire lower-cases the ASCII letters of a wire name in place (length
// bytes are below 64 and so never letters) and returns it.
func lowerWire(w []byte) []byte {
	for i, c := range w {
		if 'A' <= c && c <= 'Z' {
			w[i] = c + 'a' - 'A'
		}
	}
	return w
}
