package authdns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/internal/config"
)

// DNS types, classes and sizes the server knows.
const (
	typeA     = 1
	typeNS    = 2
	typeCNAME = 5
	typeSOA   = 6
	typeHINFO = 13
	typeMX    = 15
	typeTXT   = 16
	typeAAAA  = 28
	typeSRV   = 33
	typeOPT   = 41
	typeIXFR  = 251
	typeAXFR  = 252
	typeANY   = 255
	typeCAA   = 257

	classIN  = 1
	classANY = 255

	maxName = 255
)

var typeNames = map[string]uint16{
	"A": typeA, "NS": typeNS, "CNAME": typeCNAME, "MX": typeMX, "TXT": typeTXT,
	"AAAA": typeAAAA, "SRV": typeSRV, "CAA": typeCAA,
}

// zoneSet is the immutable compiled form of every zone of a Config. A
// reload builds a new one and swaps it in.
type zoneSet struct {
	// zones maps the lower-cased wire form of an origin to its zone.
	zones map[string]*zone
	// sets lists every record set, for metrics of the policies.
	sets int
}

// zone is one compiled zone.
type zone struct {
	origin []byte // wire form, lower case
	name   string // presentation form, for logs
	// soa is the apex SOA after its owner (type, class, TTL, rdlength,
	// rdata); negSOA is the same with the negative-caching TTL of RFC 2308
	// for the authority section of NXDOMAIN and NODATA answers.
	soa, negSOA []byte
	nodes       map[string]*node
	order       []*node // nodes in configuration order, for transfers
}

// node is a name of a zone with its record sets. Empty non-terminals are
// nodes without sets.
type node struct {
	name []byte // wire form, lower case
	sets []*rrset
}

// rrset is a compiled record set.
type rrset struct {
	rtype  uint16
	policy answer.Policy
	sel    *answer.Set
	// rrs holds each record after its owner: type, class, TTL, rdlength and
	// rdata, ready to copy into an answer.
	rrs [][]byte
	// targets are the wire forms of a CNAME set's targets, by record.
	targets [][]byte
}

func (n *node) set(t uint16) *rrset {
	for _, s := range n.sets {
		if s.rtype == t {
			return s
		}
	}
	return nil
}

// compile builds the zoneSet of cfg. Its errors are config field errors
// naming the key.
func compile(cfg *Config) (*zoneSet, error) {
	zs := &zoneSet{zones: make(map[string]*zone)}
	var errs []error
	for zi, zc := range cfg.Zones {
		z, zerrs := compileZone(cfg, zc)
		for _, e := range zerrs {
			errs = append(errs, config.Field(fmt.Sprintf("zones[%d]", zi), e))
		}
		if z == nil {
			continue
		}
		if _, dup := zs.zones[string(z.origin)]; dup {
			errs = append(errs, config.Errorf(fmt.Sprintf("zones[%d].origin", zi), "authdns: zone %s is defined twice", z.name))
			continue
		}
		zs.zones[string(z.origin)] = z
		for _, n := range z.nodes {
			zs.sets += len(n.sets)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return zs, nil
}

func fieldErr(path, format string, args ...any) error {
	return config.Errorf(path, "authdns: "+format, args...)
}

func compileZone(cfg *Config, zc ZoneConfig) (*zone, []error) {
	var errs []error
	bad := func(path, format string, args ...any) { errs = append(errs, fieldErr(path, format, args...)) }
	origin, err := wireName(zc.Origin, nil)
	if err != nil || zc.Origin == "" {
		bad("origin", "bad zone origin %q: %v", zc.Origin, err)
		return nil, errs
	}
	z := &zone{origin: origin, name: presentation(origin), nodes: make(map[string]*node)}
	ttl := zc.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if len(zc.NS) == 0 {
		bad("ns", "a zone needs at least one name server")
	}
	apex := z.node(origin)
	ns := &rrset{rtype: typeNS}
	for i, s := range zc.NS {
		n, err := wireName(s, origin)
		if err != nil {
			bad(fmt.Sprintf("ns[%d]", i), "%v", err)
			continue
		}
		ns.rrs = append(ns.rrs, rr(typeNS, ttl, n))
	}
	// SOA.
	soa := zc.SOA
	if soa.Minimum == 0 {
		soa.Minimum = DefaultTTL
	}
	if soa.Refresh == 0 {
		soa.Refresh = 3600
	}
	if soa.Retry == 0 {
		soa.Retry = 600
	}
	if soa.Expire == 0 {
		soa.Expire = 604800
	}
	if soa.Serial == 0 {
		soa.Serial = 1
	}
	mname, rname := soa.MName, soa.RName
	if mname == "" && len(zc.NS) > 0 {
		mname = zc.NS[0]
	}
	if rname == "" {
		rname = "hostmaster"
	}
	mw, err1 := wireName(mname, origin)
	rw, err2 := wireName(rname, origin)
	if err1 != nil {
		bad("soa.mname", "%v", err1)
	}
	if err2 != nil {
		bad("soa.rname", "%v", err2)
	}
	if err1 == nil && err2 == nil {
		rd := append(append([]byte{}, mw...), rw...)
		for _, v := range []uint32{soa.Serial, soa.Refresh, soa.Retry, soa.Expire, soa.Minimum} {
			rd = binary.BigEndian.AppendUint32(rd, v)
		}
		z.soa = rr(typeSOA, ttl, rd)
		z.negSOA = rr(typeSOA, min(ttl, soa.Minimum), rd)
		apex.sets = append(apex.sets, mustSet(&rrset{rtype: typeSOA, rrs: [][]byte{z.soa}}))
	}
	if len(ns.rrs) > 0 {
		apex.sets = append(apex.sets, mustSet(ns))
	}

	for ri, rc := range zc.Records {
		p := fmt.Sprintf("records[%d]", ri)
		set, owner, rerrs := compileSet(cfg, rc, origin, ttl)
		for _, e := range rerrs {
			errs = append(errs, config.Field(p, e))
		}
		if set == nil {
			continue
		}
		n := z.node(owner)
		if n.set(set.rtype) != nil {
			bad(p+".type", "%s %s is defined twice (or is the zone's own SOA/NS, set by the soa and ns keys)", presentation(owner), rc.Type)
			continue
		}
		if (set.rtype == typeCNAME && len(n.sets) > 0) || (set.rtype != typeCNAME && n.set(typeCNAME) != nil) {
			bad(p+".type", "%s: a CNAME cannot share its name with other records", presentation(owner))
			continue
		}
		n.sets = append(n.sets, set)
	}
	return z, errs
}

// node returns the node for owner, creating it and the empty non-terminals
// between it and the origin.
func (z *zone) node(owner []byte) *node {
	if n, ok := z.nodes[string(owner)]; ok {
		return n
	}
	n := &node{name: owner}
	z.nodes[string(owner)] = n
	z.order = append(z.order, n)
	if len(owner) > len(z.origin) {
		z.node(owner[1+int(owner[0]):])
	}
	return n
}

func mustSet(s *rrset) *rrset {
	recs := make([]answer.Record, len(s.rrs))
	s.sel, _ = answer.NewSet(answer.Config{Policy: answer.Simple, Records: recs})
	return s
}

// compileSet compiles one record set and returns it with its owner.
func compileSet(cfg *Config, rc RecordConfig, origin []byte, zoneTTL uint32) (*rrset, []byte, []error) {
	var errs []error
	bad := func(path, format string, args ...any) { errs = append(errs, fieldErr(path, format, args...)) }
	name := rc.Name
	if name == "@" {
		name = ""
	}
	var owner []byte
	var err error
	if name == "" {
		owner = origin
	} else if owner, err = wireName(name, origin); err != nil {
		bad("name", "%v", err)
		return nil, nil, errs
	}
	if !inZone(owner, origin) {
		bad("name", "%s is outside the zone %s", presentation(owner), presentation(origin))
		return nil, nil, errs
	}
	rtype, ok := typeNames[strings.ToUpper(rc.Type)]
	if !ok {
		bad("type", "unsupported type %q (want A, AAAA, CNAME, TXT, MX, SRV or CAA; SOA and NS come from the soa and ns keys)", rc.Type)
		return nil, nil, errs
	}
	if rtype == typeNS {
		if string(owner) == string(origin) {
			bad("type", "the zone's own NS records come from the ns key")
		} else {
			bad("type", "NS below the apex would delegate %s; delegations are not supported", presentation(owner))
		}
		return nil, nil, errs
	}
	pol, err := policyOf(rc.Policy)
	if err != nil {
		bad("policy", "%v", err)
		return nil, nil, errs
	}
	if len(rc.Values) == 0 {
		bad("values", "a record set needs at least one value")
		return nil, nil, errs
	}
	ttl := rc.TTL
	if ttl == 0 {
		ttl = zoneTTL
	}
	set := &rrset{rtype: rtype, policy: pol}
	acfg := answer.Config{Policy: pol, N: rc.N}
	for vi, v := range rc.Values {
		p := fmt.Sprintf("values[%d]", vi)
		rd, err := rdata(rtype, v.Value, origin)
		if err != nil {
			bad(p, "%v", err)
			continue
		}
		if rtype == typeCNAME {
			set.targets = append(set.targets, rd)
		}
		if v.Check != "" && !cfg.Health.Has(v.Check) {
			bad(p+".check", "unknown health check %q (define it under health.checks)", v.Check)
		}
		if v.Weight > 0 && pol != answer.Weighted && pol != answer.WeightedSubset {
			bad(p+".weight", "weight applies to the weighted and weighted-subset policies, not %s", pol)
		}
		if v.Secondary && pol != answer.Failover {
			bad(p+".secondary", "secondary applies to the failover policy, not %s", pol)
		}
		if v.Location != "" && pol != answer.CIDR {
			bad(p+".location", "location applies to the cidr policy, not %s", pol)
		}
		set.rrs = append(set.rrs, rr(rtype, ttl, rd))
		acfg.Records = append(acfg.Records, answer.Record{Check: v.Check, Weight: v.Weight, Secondary: v.Secondary, Location: v.Location})
	}
	if rtype == typeCNAME && len(rc.Values) > 1 && pol != answer.Weighted && pol != answer.Failover {
		bad("values", "a CNAME answer holds one record: %d values need the weighted or failover policy", len(rc.Values))
	}
	if rc.N != 0 && pol != answer.Multivalue && pol != answer.WeightedSubset {
		bad("n", "n applies to the multivalue and weighted-subset policies, not %s", pol)
	}
	if (rc.Shuffle != nil) != (pol == answer.Shuffle) {
		bad("shuffle", "the shuffle key goes with the shuffle policy and only with it")
	}
	if len(rc.Locations) > 0 && pol != answer.CIDR {
		bad("locations", "locations apply to the cidr policy, not %s", pol)
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	if pol == answer.Shuffle {
		d, err := dealerOf(rc.Shuffle, len(rc.Values))
		if err != nil {
			bad("shuffle", "%v", err)
			return nil, nil, errs
		}
		acfg.Dealer = d
	}
	if pol == answer.CIDR {
		acfg.Locations = make(map[string][]netip.Prefix)
		for loc, ps := range rc.Locations {
			for i, s := range ps {
				p, err := parsePrefix(s)
				if err != nil {
					bad(fmt.Sprintf("locations.%s[%d]", loc, i), "%v", err)
					continue
				}
				acfg.Locations[loc] = append(acfg.Locations[loc], p)
			}
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	if set.sel, err = answer.NewSet(acfg); err != nil {
		bad("policy", "%v", err)
		return nil, nil, errs
	}
	return set, owner, nil
}

// rr returns the part of a record after its owner.
func rr(t uint16, ttl uint32, rd []byte) []byte {
	b := make([]byte, 0, 10+len(rd))
	b = binary.BigEndian.AppendUint16(b, t)
	b = binary.BigEndian.AppendUint16(b, classIN)
	b = binary.BigEndian.AppendUint32(b, ttl)
	b = binary.BigEndian.AppendUint16(b, uint16(len(rd)))
	return append(b, rd...)
}

// rdata parses the presentation form of a record's data into wire form.
func rdata(t uint16, v string, origin []byte) ([]byte, error) {
	f := strings.Fields(v)
	switch t {
	case typeA, typeAAAA:
		a, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil {
			return nil, err
		}
		if t == typeA && !a.Is4() {
			return nil, fmt.Errorf("%q is not an IPv4 address", v)
		}
		if t == typeAAAA && (!a.Is6() || a.Is4In6() || a.Zone() != "") {
			return nil, fmt.Errorf("%q is not an IPv6 address", v)
		}
		return a.AsSlice(), nil
	case typeCNAME, typeNS:
		if len(f) != 1 {
			return nil, fmt.Errorf("want one name, got %q", v)
		}
		return wireName(f[0], origin)
	case typeMX:
		if len(f) != 2 {
			return nil, fmt.Errorf("MX wants \"preference exchange\", got %q", v)
		}
		pref, err := strconv.ParseUint(f[0], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("MX preference %q: want 0 to 65535", f[0])
		}
		n, err := wireName(f[1], origin)
		if err != nil {
			return nil, err
		}
		return append(binary.BigEndian.AppendUint16(nil, uint16(pref)), n...), nil
	case typeSRV:
		if len(f) != 4 {
			return nil, fmt.Errorf("SRV wants \"priority weight port target\", got %q", v)
		}
		var b []byte
		for _, s := range f[:3] {
			x, err := strconv.ParseUint(s, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("SRV field %q: want 0 to 65535", s)
			}
			b = binary.BigEndian.AppendUint16(b, uint16(x))
		}
		n, err := wireName(f[3], origin)
		if err != nil {
			return nil, err
		}
		return append(b, n...), nil
	case typeTXT:
		if len(v) > 4000 {
			return nil, fmt.Errorf("TXT value of %d bytes is too long (at most 4000)", len(v))
		}
		var b []byte
		for s := v; ; {
			c := s[:min(len(s), 255)]
			b = append(append(b, byte(len(c))), c...)
			s = s[len(c):]
			if s == "" {
				return b, nil
			}
		}
	case typeCAA:
		if len(f) < 3 {
			return nil, fmt.Errorf("CAA wants \"flags tag value\", got %q", v)
		}
		flags, err := strconv.ParseUint(f[0], 10, 8)
		if err != nil {
			return nil, fmt.Errorf("CAA flags %q: want 0 to 255", f[0])
		}
		tag := f[1]
		if len(tag) > 15 || strings.IndexFunc(tag, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) >= 0 {
			return nil, fmt.Errorf("CAA tag %q: want 1 to 15 letters or digits", tag)
		}
		val := strings.TrimSpace(v[strings.Index(v, tag)+len(tag):])
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		return append(append([]byte{byte(flags), byte(len(tag))}, tag...), val...), nil
	}
	return nil, fmt.Errorf("unsupported type %d", t)
}

// wireName converts a presentation name to lower-case wire form. A name
// without a final dot is relative to origin (when origin is not nil).
func wireName(s string, origin []byte) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty name")
	}
	abs := strings.HasSuffix(s, ".")
	s = strings.TrimSuffix(s, ".")
	var b []byte
	if s != "" {
		for _, l := range strings.Split(s, ".") {
			if l == "" || len(l) > 63 {
				return nil, fmt.Errorf("name %q: labels must have 1 to 63 characters", s)
			}
			for i := 0; i < len(l); i++ {
				if c := l[i]; c <= ' ' || c >= 0x7f || c == '\\' {
					return nil, fmt.Errorf("name %q: character %q is not allowed", s, c)
				}
			}
			b = append(b, byte(len(l)))
			b = append(b, strings.ToLower(l)...)
		}
	}
	b = append(b, 0)
	// A relative name that already ends with the origin is taken as
	// absolute: "ns1.corral.test" in the zone corral.test means
	// ns1.corral.test., as people write it in YAML.
	if !abs && origin != nil && !hasSuffixName(b, origin) {
		b = append(b[:len(b)-1], origin...)
	}
	if len(b) > maxName {
		return nil, fmt.Errorf("name %q is longer than 255 bytes", s)
	}
	return b, nil
}

// hasSuffixName reports whether the wire name n ends with the wire name
// suffix, at a label boundary.
func hasSuffixName(n, suffix []byte) bool {
	for len(n) >= len(suffix) {
		if string(n) == string(suffix) {
			return true
		}
		if n[0] == 0 {
			return false
		}
		n = n[1+int(n[0]):]
	}
	return false
}

// presentation returns the dotted form of a wire name.
func presentation(w []byte) string {
	if len(w) <= 1 {
		return "."
	}
	var b strings.Builder
	for len(w) > 0 && w[0] != 0 {
		l := int(w[0])
		b.Write(w[1 : 1+l])
		b.WriteByte('.')
		w = w[1+l:]
	}
	return b.String()
}

// inZone reports whether the wire name n is origin or below it.
func inZone(n, origin []byte) bool {
	for {
		if len(n) == len(origin) {
			return string(n) == string(origin)
		}
		if len(n) < len(origin) || n[0] == 0 {
			return false
		}
		n = n[1+int(n[0]):]
	}
}
