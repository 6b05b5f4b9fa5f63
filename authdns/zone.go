package authdns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

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
	// lens has bit l set when an origin is l bytes long (find skips the
	// suffixes of other lengths), and only[l] is the zone when it is the
	// only one of that length (find compares it without the map).
	lens [(maxName + 64) / 64]uint64
	only [maxName + 1]*zone
	// names finds the node of every name (wire form) in the zone that
	// find gives for it: what find and then the zone's nodes give, in one
	// lookup. A name that is not there is looked up the long way
	// (wildcards, NXDOMAIN).
	names nameTable
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
	zone *zone
	sets []*rrset
}

// rrset is a compiled record set.
type rrset struct {
	rtype uint16
	// policy is the index of the set's policy in answer.Policies.
	policy int
	sel    *answer.Set
	// owner and values are the set's name (presentation form, lower
	// case) and its records' values as configured, which load feedback
	// matches to the origins' advertised addresses.
	owner  string
	values []string
	// learn is true when the set's answers teach audiences
	// (resolvers.audience; audience.go), and learnKey names it there.
	learn    bool
	learnKey string
	aud      *setAudience // its entry in audience.sets, guarded by audience.mu
	// ttl is the TTL, in seconds, of the set's records as served (in
	// rrs): configuredTTL, the set's or the zone's, capped by load
	// feedback's max_ttl when feedback weights the set.
	ttl, configuredTTL uint32
	// rrs holds each record after its owner: type, class, TTL, rdlength and
	// rdata, ready to copy into an answer.
	rrs [][]byte
	// targets are the wire forms, lower case, of the names the records
	// of a CNAME, NS, MX or SRV set point to, by record.
	targets [][]byte
	// wire holds every record as it goes in an answer owned by the query
	// name: a compression pointer to offset 12, then the bytes of rrs
	// (which are slices of it). Record i is wire[off[i]:off[i+1]]; when
	// all records have the same length, fixed is it (16 for A, 28 for
	// AAAA), else 0. Set by pack.
	wire  []byte
	off   []int
	fixed int
	// a and aaaa are wire again, as records of 16 (A) and 28 (AAAA)
	// bytes, when fixed is their size (nil otherwise): answers copy them
	// as arrays.
	a    [][16]byte
	aaaa [][28]byte
	// extra is the offset in the rdata of the name whose addresses go in
	// the additional section (NS, MX, SRV), or -1 for a type without
	// additional processing. Set by pack.
	extra int
	// fast is true when a query answered by this set directly (not
	// through a wildcard or a chain) is answered by worker.fast: the set
	// is neither a CNAME nor of a type with additional addresses. Set by
	// pack.
	fast bool
	// src is the config path of the set ("zones[0].records[3]"), for
	// errors found after its zone compiled.
	src string
}

// pack lays the records of s out for answers (wire, off, fixed, extra).
func (s *rrset) pack() {
	s.off = make([]int, len(s.rrs)+1)
	s.wire = nil
	for i, rr := range s.rrs {
		s.off[i] = len(s.wire)
		s.wire = append(s.wire, 0xC0, 12)
		s.wire = append(s.wire, rr...)
	}
	s.off[len(s.rrs)] = len(s.wire)
	s.fixed = 0
	for i := range s.rrs {
		s.rrs[i] = s.wire[s.off[i]+2 : s.off[i+1] : s.off[i+1]]
		if l := s.off[i+1] - s.off[i]; i == 0 {
			s.fixed = l
		} else if l != s.fixed {
			s.fixed = 0
		}
	}
	s.a, s.aaaa = nil, nil
	switch s.fixed {
	case 16:
		s.a = make([][16]byte, len(s.rrs))
		for i := range s.a {
			s.a[i] = [16]byte(s.wire[16*i:])
		}
	case 28:
		s.aaaa = make([][28]byte, len(s.rrs))
		for i := range s.aaaa {
			s.aaaa[i] = [28]byte(s.wire[28*i:])
		}
	}
	s.extra = -1
	if f, ok := targetField[s.rtype]; ok && s.rtype != typeCNAME && len(s.targets) > 0 {
		s.extra = f
	}
	s.fast = s.rtype != typeCNAME && s.extra < 0
}

func (n *node) set(t uint16) *rrset {
	for _, s := range n.sets {
		if s.rtype == t {
			return s
		}
	}
	return nil
}

// checks maps the name of each health check of a configuration to the
// probe of its state that records of that check answer by (nil when the
// zones are compiled only to validate them).
type checks map[string]answer.Probe

// compile builds the zoneSet of cfg. fb is the load feedback its answers
// are served under (the running server's: a reload keeps it), which caps
// the TTL of the sets it weights. probe resolves a check name to its
// state once, here, so that answers read health without a name lookup; nil
// compiles for validation only. Its errors are config field errors naming
// the key.
func compile(cfg *Config, fb FeedbackConfig, learn bool, probe func(check string) answer.Probe) (*zoneSet, error) {
	zs := &zoneSet{zones: make(map[string]*zone)}
	checks := make(checks, len(cfg.Health.Checks))
	for _, cc := range cfg.Health.Checks {
		checks[cc.Name] = nil
		if probe != nil {
			checks[cc.Name] = probe(cc.Name)
		}
	}
	var errs []error
	var origins []string
	for zi, zc := range cfg.Zones {
		z, zerrs := compileZone(checks, fb, learn, zc, zi)
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
		origins = append(origins, string(z.origin))
		for _, n := range z.nodes {
			zs.sets += len(n.sets)
			for _, s := range n.sets {
				s.pack()
			}
		}
	}
	for _, z := range zs.zones {
		l := len(z.origin)
		if zs.lens[l/64]&(1<<(l%64)) == 0 {
			zs.only[l] = z
		} else {
			zs.only[l] = nil
		}
		zs.lens[l/64] |= 1 << (l % 64)
	}
	var exact []*node
	for _, z := range zs.zones {
		for _, n := range z.nodes {
			if fz, _ := zs.find(n.name); fz == z {
				exact = append(exact, n)
			}
		}
	}
	zs.names = newNameTable(exact, rand.Uint64())
	if len(errs) == 0 {
		errs = zs.checkCNAMELoops(origins)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return zs, nil
}

// seconds is a TTL or SOA time in the whole seconds the wire carries.
func seconds(d time.Duration) (uint32, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("must not be negative, got %v", d)
	case d%time.Second != 0:
		return 0, fmt.Errorf("must be whole seconds, got %v", d)
	case d > MaxTTL:
		return 0, fmt.Errorf("must be at most %ds (2^31-1 seconds, RFC 2181 section 8), got %v", MaxTTL/time.Second, d)
	}
	return uint32(d / time.Second), nil
}

func fieldErr(path, format string, args ...any) error {
	return config.Errorf(path, "authdns: "+format, args...)
}

func compileZone(checks checks, fb FeedbackConfig, learn bool, zc ZoneConfig, zi int) (*zone, []error) {
	var errs []error
	bad := func(path, format string, args ...any) { errs = append(errs, fieldErr(path, format, args...)) }
	originName, err := absName(zc.Origin, "")
	var origin []byte
	if err == nil {
		origin, err = wireName(originName)
	}
	if err != nil {
		bad("origin", "bad zone origin %q: %v", zc.Origin, err)
		return nil, errs
	}
	z := &zone{origin: origin, name: originName, nodes: make(map[string]*node)}
	zttl := zc.TTL
	if zttl == 0 {
		zttl = DefaultTTL
	}
	ttl, err := seconds(zttl)
	if err != nil {
		bad("ttl", "%v", err)
	}
	if len(zc.NS) == 0 {
		bad("ns", "a zone needs at least one name server")
	}
	apex := z.node(origin)
	ns := &rrset{rtype: typeNS}
	for i, s := range zc.NS {
		n, err := absName(s, originName)
		if err != nil {
			bad(fmt.Sprintf("ns[%d]", i), "%v", err)
			continue
		}
		b, err := packRR(&dns.NS{Ns: n}, typeNS, ttl)
		if err != nil {
			bad(fmt.Sprintf("ns[%d]", i), "%v", err)
			continue
		}
		ns.rrs = append(ns.rrs, b)
		ns.targets = append(ns.targets, targetOf(typeNS, b))
	}
	// SOA.
	soa := zc.SOA
	soaTime := func(key string, d, def time.Duration) uint32 {
		if d == 0 {
			d = def
		}
		s, err := seconds(d)
		if err != nil {
			bad("soa."+key, "%v", err)
		}
		return s
	}
	minimum := soaTime("minimum", soa.Minimum, DefaultTTL)
	refresh := soaTime("refresh", soa.Refresh, time.Hour)
	retry := soaTime("retry", soa.Retry, 10*time.Minute)
	expire := soaTime("expire", soa.Expire, 7*24*time.Hour)
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
	mn, err1 := absName(mname, originName)
	rn, err2 := absName(rname, originName)
	if err1 != nil {
		bad("soa.mname", "%v", err1)
	}
	if err2 != nil {
		bad("soa.rname", "%v", err2)
	}
	if err1 == nil && err2 == nil {
		rec := &dns.SOA{Ns: mn, Mbox: rn, Serial: soa.Serial, Refresh: refresh, Retry: retry, Expire: expire, Minttl: minimum}
		pos, err := packRR(rec, typeSOA, ttl)
		var neg []byte
		if err == nil {
			neg, err = packRR(rec, typeSOA, min(ttl, minimum))
		}
		if err != nil {
			bad("soa", "%v", err)
		} else {
			z.soa, z.negSOA = pos, neg
			apex.sets = append(apex.sets, mustSet(&rrset{rtype: typeSOA, rrs: [][]byte{z.soa}}))
		}
	}
	if len(ns.rrs) > 0 {
		apex.sets = append(apex.sets, mustSet(ns))
	}

	for ri, rc := range zc.Records {
		p := fmt.Sprintf("records[%d]", ri)
		set, owner, rerrs := compileSet(checks, fb, learn, rc, originName, ttl)
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
		set.src = recordPath(zi, ri)
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
	n := &node{name: owner, zone: z}
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

// compileSet compiles one record set and returns it with its owner. Its
// records carry the set's TTL, or the zone's, capped by load feedback
// (fb) when feedback weights the set's policy.
func compileSet(checks checks, fb FeedbackConfig, learn bool, rc RecordConfig, origin string, zoneTTL uint32) (*rrset, []byte, []error) {
	var errs []error
	bad := func(path, format string, args ...any) { errs = append(errs, fieldErr(path, format, args...)) }
	name := rc.Name
	if name == "@" || name == "" {
		name = origin
	}
	ownerName, err := absName(name, origin)
	var owner []byte
	if err == nil {
		owner, err = wireName(ownerName)
	}
	if err != nil {
		bad("name", "%v", err)
		return nil, nil, errs
	}
	if !dns.IsSubDomain(origin, ownerName) {
		bad("name", "%s is outside the zone %s", ownerName, origin)
		return nil, nil, errs
	}
	rtype, ok := typeNames[strings.ToUpper(rc.Type)]
	if !ok {
		bad("type", "unsupported type %q (want A, AAAA, CNAME, TXT, MX, SRV or CAA; SOA and NS come from the soa and ns keys)", rc.Type)
		return nil, nil, errs
	}
	if rtype == typeNS {
		if ownerName == origin {
			bad("type", "the zone's own NS records come from the ns key")
		} else {
			bad("type", "NS below the apex would delegate %s; delegations are not supported", ownerName)
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
	ttl := zoneTTL
	if rc.TTL != 0 {
		if ttl, err = seconds(rc.TTL); err != nil {
			bad("ttl", "%v", err)
			return nil, nil, errs
		}
	}
	set := &rrset{rtype: rtype, policy: pol.Index(), owner: strings.ToLower(ownerName), configuredTTL: ttl}
	ttl = fb.answerTTL(pol, ttl)
	set.ttl = ttl
	acfg := answer.Config{Policy: pol, N: rc.N, BigN: rc.BigN, BigSubset: rc.BigWeightedSubset}
	// Learning audiences (resolvers.audience) reads the answers of the
	// sets feedback weights whose answers depend on the class; their big
	// answers leave one record out.
	set.learn = learn && fb.enabled() && pol.Fed() && pol.Uses(answer.FieldBigLeaveOut) && (rc.BigWeightedSubset || !pol.Uses(answer.FieldBigSubset))
	acfg.BigLeaveOut = set.learn
	for vi, v := range rc.Values {
		p := fmt.Sprintf("values[%d]", vi)
		rec, err := parseValue(rtype, v.Value, origin)
		var b []byte
		if err == nil {
			b, err = packRR(rec, rtype, ttl)
		}
		if err != nil {
			bad(p, "%v", err)
			continue
		}
		if t := targetOf(rtype, b); t != nil {
			// The target, lower case, is the key of the next lookup of a
			// chain or of additional addresses; its offset in the answer
			// is the next owner's pointer.
			set.targets = append(set.targets, t)
		}
		var probe answer.Probe
		if v.Check != "" {
			var ok bool
			if probe, ok = checks[v.Check]; !ok {
				bad(p+".check", "unknown health check %q (define it under health.checks)", v.Check)
			}
		}
		set.rrs = append(set.rrs, b)
		set.values = append(set.values, strings.TrimSpace(v.Value))
		acfg.Records = append(acfg.Records, answer.Record{Health: probe, Weight: v.Weight, Secondary: v.Secondary, Location: v.Location})
	}
	if rtype == typeCNAME && len(rc.Values) > 1 && !pol.OneRecord() {
		bad("values", "a CNAME answer holds one record: %d values need the %s policy", len(rc.Values), answer.OneRecordPolicies())
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	// The keys of the policies' fields become the answer's Config, which
	// checks them against the policy (answerPath maps its errors back).
	if rc.Shuffle != nil {
		d, err := dealerOf(rc.Shuffle, len(rc.Values))
		if err != nil {
			bad("shuffle", "%v", err)
			return nil, nil, errs
		}
		acfg.Dealer = d
	}
	if len(rc.Locations) > 0 {
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
		for _, e := range leaves(err) {
			var fe *answer.FieldError
			if errors.As(e, &fe) {
				bad(answerPath(fe), "%s", fe.Msg)
			} else {
				bad("policy", "%v", e)
			}
		}
		return nil, nil, errs
	}
	if set.learn {
		set.learnKey = setKey(set)
	}
	return set, owner, nil
}

// answerKeys are the keys of a record set that hold each field of an
// answer.Config.
var answerKeys = [...]string{
	answer.FieldPolicy: "policy", answer.FieldRecords: "values", answer.FieldN: "n",
	answer.FieldDealer: "shuffle", answer.FieldLocations: "locations",
	answer.FieldWeight: "weight", answer.FieldSecondary: "secondary", answer.FieldLocation: "location",
	answer.FieldBigN: "big_n", answer.FieldBigSubset: "big_weighted_subset",
}

// answerPath is the key path, relative to the record set, of the field an
// answer.FieldError is about.
func answerPath(fe *answer.FieldError) string {
	key := "policy"
	if int(fe.Field) < len(answerKeys) {
		key = answerKeys[fe.Field]
	}
	if fe.Record >= 0 {
		return fmt.Sprintf("values[%d].%s", fe.Record, key)
	}
	return key
}

// leaves returns the errors joined in err (err itself when it joins none).
func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
