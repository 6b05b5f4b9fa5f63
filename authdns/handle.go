package authdns

import (
	"math/rand/v2"
	"net/netip"
	"time"
	"unsafe"

	"github.com/corralhq/corral/authdns/answer"
)

// maxChase bounds the CNAME chain followed inside the served zones.
const maxChase = 8

// outcome is what handle did with a packet, for the transport and metrics.
type outcome uint8

const (
	outAnswer   outcome = iota // send the response
	outDrop                    // send nothing
	outTransfer                // stream a zone transfer (TCP)
)

// worker answers queries. Each UDP socket and each TCP connection has its
// own; a worker is not safe for concurrent use.
type worker struct {
	srv   *Server
	rng   *rand.PCG
	st    *stats
	dst   []int
	lower [maxName + 1]byte
	wild  [maxName + 2]byte
	key   [maxName]byte
	q     query
	m     builder
	// per query
	scope    uint8
	policy   int // policy index of the answer + 1, 0 for none
	failOpen bool
	zone     *zone // the zone of a transfer
	// rrlClass and rrlName are the rate-limiting bucket of the response
	// (see limiter.key): set by resolve, an error without a name otherwise.
	rrlClass uint8
	rrlName  []byte
	// extra are the records of the answer whose targets may have addresses
	// for the additional section.
	extra []extraRef
	// run is the fast path's answers not yet counted in st (flush).
	run run
	// tab is the table that counts the queries of resolvers (nil without
	// resolver-aware answers); class is the class of the query's
	// resolver, once classed (per query, general path), and ecsBits the
	// length of the client subnet it was keyed by (0: the source).
	tab     *resolverTable
	class   answer.Class
	classed bool
	ecsBits int
	resKey  uint64 // the resolver's key, once classed (audience.go)
	// noteSet, noteKey and note are the answer of a set that teaches
	// audiences (audience.go), noted once the response goes out whole:
	// not when rate limiting drops or slips it, nor when it is truncated.
	noteSet *rrset
	noteKey uint64
	note    []int
	// byClass is the class counts not yet added to st (flush).
	byClass [answer.NumClasses]classCounts
}

// extraRef is an answered record that points to a name: its index in its
// set and the offset of its rdata in the message.
type extraRef struct{ i, rd int }

// maxExtraNames bounds the names whose addresses one answer adds.
const maxExtraNames = 32

// newWorker returns a worker that counts in st. With resolver-aware
// answers it counts resolvers in the shared TCP table; a UDP socket's
// worker gets a table of its own.
func newWorker(s *Server, st *stats, seed uint64) *worker {
	w := &worker{srv: s, st: st, rng: rand.NewPCG(seed, seed^0x9e3779b97f4a7c15), dst: make([]int, 0, answer.MaxRecords), extra: make([]extraRef, 0, maxExtraNames), note: make([]int, 0, answer.MaxRecords)}
	if s.res != nil {
		w.tab = s.res.tcp
	}
	return w
}

// handle answers the packet req from client into out and returns the
// response (nil with outDrop). tcp selects the transport's rules: no size
// limit below 65535, no rate limiting, transfers allowed. A panic while
// answering is recovered: the packet gets SERVFAIL when its question was
// parsed and no answer otherwise (see recovered). The TCP loop calls it
// per query, the UDP loop answerBatch per batch.
func (w *worker) handle(req []byte, client netip.Addr, tcp bool, out []byte) (resp []byte, o outcome) {
	defer func() {
		if v := recover(); v != nil {
			resp, o = w.recovered(v, tcp, out)
		}
		w.flush()
	}()
	return w.serve(req, client, tcp, out)
}

// batch is how many datagrams the UDP loop reads, answers and sends at a
// time (one recvmmsg and one sendmmsg where the platform has them).
const batch = 32

// answerBatch answers the datagrams reqs[i] from clients[i] as handle
// does over UDP, each into its own slot of out (slot bytes from i*slot),
// and sets resps[i] to the response, nil for none. One deferred recover
// covers a run of datagrams, not each: a panic answers the datagram that
// raised it as handle would (see recovered) and the batch goes on with
// the next one.
func (w *worker) answerBatch(reqs [][]byte, clients []netip.Addr, out []byte, slot int, resps [][]byte) {
	for i := 0; i < len(reqs); {
		i = w.answerFrom(i, reqs, clients, out, slot, resps)
	}
	w.flush()
}

// answerFrom answers the datagrams of answerBatch from i on, and returns
// where the next run starts: len(reqs), or the datagram after one that
// panicked.
func (w *worker) answerFrom(i int, reqs [][]byte, clients []netip.Addr, out []byte, slot int, resps [][]byte) (next int) {
	defer func() {
		if v := recover(); v != nil {
			resps[i], _ = w.recovered(v, false, out[i*slot:i*slot:(i+1)*slot])
			next = i + 1
		}
	}()
	for ; i < len(reqs); i++ {
		// serve, inline: over UDP a response is there exactly when the
		// outcome is outAnswer (no transfers).
		st, b := w.srv.state.Load(), out[i*slot:i*slot:(i+1)*slot]
		resp, ok := w.fast(st, reqs[i], clients[i], false, b)
		if !ok {
			resp, _ = w.general(st, reqs[i], clients[i], false, b)
		}
		resps[i] = resp
	}
	return i
}

// serve is handle without the recover: the common query by fast, every
// other packet by general.
func (w *worker) serve(req []byte, client netip.Addr, tcp bool, out []byte) ([]byte, outcome) {
	st := w.srv.state.Load()
	if resp, ok := w.fast(st, req, client, tcp, out); ok {
		if resp == nil {
			return nil, outDrop
		}
		return resp, outAnswer
	}
	return w.general(st, req, client, tcp, out)
}

// general answers any packet: it parses it whole (parse), resolves the
// question (chains, wildcards, additional addresses, transfers, errors)
// and writes the answer with the builder.
func (w *worker) general(st *state, req []byte, client netip.Addr, tcp bool, out []byte) ([]byte, outcome) {
	q := &w.q
	pr := parse(req, q, w.lower[:])
	if pr == parseDrop {
		w.st.dropped.Add(1)
		return nil, outDrop
	}
	if h := w.srv.queryHook; h != nil {
		h(q.name)
	}
	w.m.start(out, q, responseLimit(st, q, tcp))
	w.scope, w.policy, w.failOpen = 0, 0, false
	w.rrlClass, w.rrlName = rrlError, nil
	w.extra = w.extra[:0]
	w.classed, w.noteSet = false, nil
	rcode := rcodeNoError
	switch pr {
	case parseFormErr:
		rcode = rcodeFormErr
	case parseNotImp:
		rcode = rcodeNotImp
	case parseBadVers:
		rcode = rcodeBadVers
	default:
		rcode = w.resolve(st, q, client, tcp)
	}
	if rcode < 0 { // a transfer: counted by transfer, which checks its TSIG
		return nil, outTransfer
	}
	if !tcp && st.rrl != nil {
		switch st.rrl.allow(client, w.rrlClass, q.qtype, w.rrlName, w.srv.now()) {
		case rrlDrop:
			w.st.rrlDropped.Add(1)
			return nil, outDrop
		case rrlSlip:
			w.st.rrlSlipped.Add(1)
			w.m.truncate()
		}
	}
	resp := w.m.finish(q, rcode, st.ednsBuffer, w.scope)
	if w.noteSet != nil && !w.m.tc {
		w.commitNote()
	}
	w.st.count(q.qtype, rcode, w.policy, len(resp), w.m.tc)
	if w.failOpen {
		w.st.failOpen.Add(1)
	}
	return resp, outAnswer
}

// responseLimit is the largest response to q: 65535 over TCP, else the
// client's EDNS buffer capped by the server's (512 without EDNS).
func responseLimit(st *state, q *query, tcp bool) int {
	if tcp {
		return 65535
	}
	if q.edns {
		return min(max(q.udpSize, 512), st.ednsBuffer)
	}
	return 512
}

// resolve fills the answer of a parsed query and returns its rcode, or -1
// for an allowed transfer.
func (w *worker) resolve(st *state, q *query, client netip.Addr, tcp bool) int {
	if q.qclass != classIN && q.qclass != classANY {
		return rcodeRefused
	}
	switch q.qtype {
	case 0:
		return rcodeNotImp // type 0 is reserved (RFC 6895); Knot answers NOTIMP
	case typeOPT:
		return rcodeFormErr
	case typeAXFR, typeIXFR:
		z, _ := st.zones.find(q.name)
		if z == nil || !tcp || !st.transferAllowed(client) || string(z.origin) != string(q.name) {
			return rcodeRefused
		}
		w.m.setFlags(flagAA)
		w.zone = z
		return -1
	}
	var z *zone
	var zoff int
	n0 := st.zones.names.get(q.name, st.zones.names.hash(q.name)) // the node of an exact match
	if n0 != nil {
		z, zoff = n0.zone, len(q.name)-len(n0.zone.origin)
	} else {
		z, zoff = st.zones.find(q.name)
	}
	if z == nil {
		return rcodeRefused
	}
	w.m.setFlags(flagAA)
	cur, curOff := q.name, 12
	var seen [maxChase + 1]*node // the nodes of the chain: no record twice
	for hops := 0; ; hops++ {
		n, key := n0, []byte(nil)
		if hops > 0 || n == nil {
			n, key = w.lookup(z, cur, zoff)
		}
		if n == nil {
			w.authoritySOA(z, cur, curOff)
			w.rrlClass, w.rrlName = rrlNXDomain, z.origin
			return rcodeNXDomain
		}
		if hops == 0 {
			// A random name under a wildcard is one bucket: the wildcard.
			w.rrlClass, w.rrlName = rrlAnswer, q.name
			if key != nil {
				w.rrlClass, w.rrlName = rrlWildcard, n.name
			}
		}
		for _, p := range seen[:hops] {
			if p == n {
				return rcodeNoError // a loop (refused at load): stop before a repeat
			}
		}
		seen[hops] = n
		var set *rrset
		if q.qtype == typeANY {
			if len(n.sets) > 0 {
				set = n.sets[0] // RFC 8482: one RRset stands for all
			}
		} else {
			set = n.set(q.qtype)
		}
		if set != nil {
			w.addSet(set, curOff, key, q, client)
			if len(w.extra) > 0 {
				w.additionals(st, set, q, client)
			}
			return rcodeNoError
		}
		cs := n.set(typeCNAME)
		if cs == nil {
			w.authoritySOA(z, cur, curOff)
			w.rrlClass, w.rrlName = rrlNoData, z.origin
			return rcodeNoError // NODATA
		}
		i, rd := w.addSet(cs, curOff, key, q, client)
		if rd < 0 || hops == maxChase {
			return rcodeNoError
		}
		target := cs.targets[i]
		nz, noff := st.zones.find(target)
		if nz == nil {
			return rcodeNoError // the target is elsewhere: the resolver follows it
		}
		z, zoff, cur, curOff = nz, noff, target, rd
	}
}

// lookup finds the node of name (whose zone origin starts at zoff) exactly
// or through a wildcard (RFC 4592), and returns the labels the wildcard
// stood for. It returns nil when the name does not exist.
func (w *worker) lookup(z *zone, name []byte, zoff int) (*node, []byte) {
	n, off := z.match(name, zoff, &w.wild)
	if n == nil || off == 0 {
		return n, nil
	}
	// The key is the labels before the wildcard's parent, dotted: "acme",
	// "x.acme".
	k := w.key[:0]
	for i := 0; i < off; i += 1 + int(name[i]) {
		if i > 0 {
			k = append(k, '.')
		}
		k = append(k, name[i+1:i+1+int(name[i])]...)
	}
	return n, k
}

// match finds the node of name (whose zone origin starts at zoff) exactly,
// with off 0, or through the wildcard of its closest encloser (RFC 4592),
// with off the offset in name of the labels the wildcard's parent matched.
// It returns nil when the name does not exist; wild is scratch space.
func (z *zone) match(name []byte, zoff int, wild *[maxName + 2]byte) (n *node, off int) {
	if n := z.nodes[string(name)]; n != nil {
		return n, 0
	}
	for off := 1 + int(name[0]); off <= zoff; off += 1 + int(name[off]) {
		anc := name[off:]
		wb := append(append(wild[:0], 1, '*'), anc...)
		if n := z.nodes[string(wb)]; n != nil {
			return n, off
		}
		if z.nodes[string(anc)] != nil {
			return nil, 0 // the closest encloser has no wildcard
		}
	}
	return nil, 0
}

// addSet selects the records of set for q and adds them to the answer,
// owned by the name at ptr, and notes those whose targets may have
// addresses for the additional section (set.extra). It returns the index
// of the first record answered and the offset of its rdata (-1 when
// nothing was added).
func (w *worker) addSet(set *rrset, ptr int, key []byte, q *query, client netip.Addr) (int, int) {
	aq := answer.Query{Client: client}
	if q.ecs {
		aq.Subnet = q.ecsPrefix
	}
	if len(key) > 0 {
		aq.Key = unsafe.String(&key[0], len(key))
	}
	if w.tab != nil {
		aq.Class = w.classOf(set, aq)
	}
	idx, res := set.sel.Select(w.dst, aq, w.rng)
	if set.learn && w.tab != nil {
		w.pendNote(set, w.resKey, idx)
	}
	w.policy = int(set.policy) + 1
	w.failOpen = w.failOpen || res.FailOpen
	if res.Scope > w.scope {
		w.scope = res.Scope
	}
	if set.rtype == typeCNAME && len(idx) > 1 {
		idx = idx[:1] // a name has one canonical name
	}
	if w.tab != nil && set.sel.ByClass() {
		w.countAnswer(aq.Class, len(idx))
	}
	start, ok := w.m.addRecords(set, idx, ptr)
	if !ok || len(idx) == 0 {
		return -1, -1
	}
	if set.extra >= 0 {
		off := start
		for _, i := range idx {
			if len(w.extra) < cap(w.extra) {
				w.extra = append(w.extra, extraRef{i, off + 12})
			}
			off += set.off[i+1] - set.off[i]
		}
	}
	return idx[0], start + 12
}

// additionals adds to the additional section the A and AAAA records of
// the names the answered NS, MX or SRV records of set point to, when a
// served zone has them (RFC 1034 section 4.3.2 step 6: in-zone glue of
// name servers, addresses of mail exchanges and services), each name once,
// chosen by their own policies. They go in while they fit: the response is
// never truncated for them.
func (w *worker) additionals(st *state, set *rrset, q *query, client netip.Addr) {
	field := set.extra
	for j, e := range w.extra {
		t := set.targets[e.i]
		dup := false
		for _, p := range w.extra[:j] {
			if string(set.targets[p.i]) == string(t) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		z, zoff := st.zones.find(t)
		if z == nil {
			continue
		}
		n, key := w.lookup(z, t, zoff)
		if n == nil {
			continue
		}
		for _, typ := range [2]uint16{typeA, typeAAAA} {
			if as := n.set(typ); as != nil && !w.addExtraSet(as, e.rd+field, key, q, client) {
				return
			}
		}
	}
}

// addExtraSet selects the records of set for q and adds them to the
// additional section, owned by the name at ptr; it reports whether they
// all fitted.
func (w *worker) addExtraSet(set *rrset, ptr int, key []byte, q *query, client netip.Addr) bool {
	aq := answer.Query{Client: client}
	if q.ecs {
		aq.Subnet = q.ecsPrefix
	}
	if len(key) > 0 {
		aq.Key = unsafe.String(&key[0], len(key))
	}
	if w.tab != nil {
		aq.Class = w.classOf(set, aq)
	}
	idx, res := set.sel.Select(w.dst, aq, w.rng)
	w.failOpen = w.failOpen || res.FailOpen
	w.scope = max(w.scope, res.Scope)
	for _, i := range idx {
		if !w.m.addAdditional(ptr, set.rrs[i]) {
			return false
		}
	}
	return true
}

// authoritySOA adds the SOA of z to the authority section; cur is the name
// at offset curOff in the message, a name of z.
func (w *worker) authoritySOA(z *zone, cur []byte, curOff int) {
	w.m.add(curOff+len(cur)-len(z.origin), z.negSOA, true)
}

// find returns the zone holding name and the offset of its origin in name.
func (zs *zoneSet) find(name []byte) (*zone, int) {
	for off := 0; off < len(name); off += 1 + int(name[off]) {
		suffix := name[off:]
		if l := len(suffix); l < len(zs.only) && zs.lens[l/64]&(1<<(l%64)) != 0 {
			if z := zs.only[l]; z != nil {
				if string(z.origin) == string(suffix) {
					return z, off
				}
			} else if z := zs.zones[string(suffix)]; z != nil {
				return z, off
			}
		}
		if name[off] == 0 {
			break
		}
	}
	return nil, 0
}

// now is the clock of rate limiting.
func (s *Server) now() time.Time { return s.opts.Now() }
