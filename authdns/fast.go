package authdns

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/corralhq/corral/authdns/answer"
)

// fast answers the common query, the shape nearly every query of a busy
// server has, without the general parser and resolver: opcode QUERY, one
// question of class IN for a name that exists exactly (no wildcard) and
// has a set of the query type whose answer needs no chain and no
// additional section (rrset.fast), no other record but an OPT of version
// 0 without options (so no client subnet), no trailing bytes. It answers
// exactly what serve's general path answers: the same header bits, the
// question as asked (case included), the records chosen by the set's
// policy from the health read now, the OPT with the DO bit echoed, TC when
// the answer does not fit, the same rate limiting and metrics. It reports
// false for every other packet, before it has drawn, limited or counted
// anything: the general path then answers it from scratch.
//
// Nothing is cached between queries: the set comes from the zones of st
// (the state a reload swaps) and its records are selected per query, so
// a reload or a health change is seen by the next query.
func (w *worker) fast(st *state, req []byte, client netip.Addr, tcp bool, out []byte) ([]byte, bool) {
	q := &w.q
	q.questionOK = false // recovered must not see the previous question
	if len(req) < 12+1+4 {
		return nil, false
	}
	flags := binary.BigEndian.Uint16(req[2:])
	counts := binary.BigEndian.Uint64(req[4:]) // QD, AN, NS, AR
	ar := uint16(counts)
	if flags&(flagQR|0xF<<11) != 0 || counts>>16 != 1<<32 || ar > 1 {
		return nil, false // a response, another opcode, other counts
	}
	off := 12
	for {
		if off >= len(req) {
			return nil, false
		}
		l := int(req[off])
		off += 1 + l
		if l == 0 {
			break
		}
		if l > 63 || off-12 >= maxName {
			return nil, false
		}
	}
	end := off + 4
	if end > len(req) {
		return nil, false
	}
	qtype := binary.BigEndian.Uint16(req[off:])
	if binary.BigEndian.Uint16(req[off+2:]) != classIN || qtype == typeANY {
		return nil, false
	}
	edns, do, udpSize := false, false, 0
	if ar == 0 {
		if end != len(req) {
			return nil, false
		}
	} else {
		// The OPT: owner ".", type, UDP size, extended rcode, version,
		// flags, RDLENGTH 0.
		o := req[end:]
		if len(o) != 11 || o[0] != 0 || o[1] != 0 || o[2] != typeOPT || o[6] != 0 || o[9] != 0 || o[10] != 0 {
			return nil, false
		}
		edns, do, udpSize = true, o[7]&0x80 != 0, int(binary.BigEndian.Uint16(o[3:]))
	}
	lower := w.lower[:]
	n := copy(lower, req[12:off])
	names := &st.zones.names
	h := names.lowerHash(lower, n)
	name := lower[:n]
	nd := names.get(name, h)
	if nd == nil {
		return nil, false
	}
	set := nd.set(qtype)
	if set == nil || !set.fast {
		return nil, false
	}

	// Committed: from here on this is the answer.
	// What recovered and the builder read of a query (field by field: a
	// composite literal would be built aside and copied).
	q.id, q.flags, q.opcode, q.question, q.qtype = binary.BigEndian.Uint16(req), flags, 0, req[12:end], qtype
	q.name, q.edns, q.udpSize, q.do, q.ecs = name, edns, udpSize, do, false
	q.questionOK = true
	if h := w.srv.queryHook; h != nil {
		h(name)
	}
	var idx []int
	var res answer.Result
	if w.tab == nil {
		idx, res = set.sel.Select(w.dst, answer.Query{Client: client}, w.rng)
	} else {
		idx, res = w.fastSelect(set, client)
	}
	policy := set.policy + 1
	need := len(idx) * set.fixed
	if set.fixed == 0 {
		need = 0
		for _, i := range idx {
			need += set.off[i+1] - set.off[i]
		}
	}
	size := end + need
	if edns {
		size += 11
	}
	limit := responseLimit(st, q, tcp)
	if !tcp && st.rrl != nil {
		if resp, limited := w.fastLimit(st, client, out, limit, policy, res.FailOpen); limited {
			w.noteSet = nil
			return resp, true
		}
	}
	if res.FailOpen {
		w.st.failOpen.Add(1)
	}
	if size > limit {
		w.noteSet = nil
		return w.fastTruncated(st, out, limit, policy), true
	}
	if w.noteSet != nil {
		w.commitNote()
	}
	b := slices.Grow(out[:0], size)[:size]
	binary.BigEndian.PutUint32(b, uint32(q.id)<<16|uint32(flagQR|flagAA|flags&(flagRD|flagCD)))
	binary.BigEndian.PutUint64(b[4:], 1<<48|uint64(len(idx))<<32|uint64(ar)) // QD, AN, NS 0, AR
	copy(b[12:], req[12:end])
	rr := b[end : end+need]
	switch {
	case set.a != nil:
		copyA(rr, set.a, idx)
	case set.aaaa != nil:
		copyAAAA(rr, set.aaaa, idx)
	default:
		o := 0
		for _, i := range idx {
			o += copy(rr[o:], set.wire[set.off[i]:set.off[i+1]])
		}
	}
	if edns {
		o := b[end+need:]
		o[0], o[1], o[2] = 0, 0, typeOPT
		binary.BigEndian.PutUint64(o[3:], uint64(st.ednsBuffer)<<48) // the size, then TTL and RDLENGTH 0
		if do {
			o[7] = 0x80
		}
	}
	w.tally(qtype, policy, size)
	return b, true
}

// fastLimit applies rate limiting to the answer fast is writing for the
// query in w.q, as the general path does: it reports false when the
// answer may go, and otherwise returns nil (dropped) or the empty
// answer with TC (slipped). policy and failOpen are the selection's, for
// the metrics. Apart from fast, where it would make the frame of every
// query larger.
//
//go:noinline
func (w *worker) fastLimit(st *state, client netip.Addr, out []byte, limit, policy int, failOpen bool) ([]byte, bool) {
	switch st.rrl.allow(client, rrlAnswer, w.q.qtype, w.q.name, w.srv.now()) {
	case rrlDrop:
		w.st.rrlDropped.Add(1)
		return nil, true
	case rrlSlip:
		w.st.rrlSlipped.Add(1)
		if failOpen {
			w.st.failOpen.Add(1)
		}
		return w.fastTruncated(st, out, limit, policy), true
	}
	return nil, false
}

// fastTruncated writes the empty answer with TC to the query in w.q, as
// the general path sends it when the answer does not fit or is slipped.
//
//go:noinline
func (w *worker) fastTruncated(st *state, out []byte, limit, policy int) []byte {
	q := &w.q
	w.m.start(out, q, limit)
	w.m.setFlags(flagAA)
	w.m.truncate()
	resp := w.m.finish(q, rcodeNoError, st.ednsBuffer, 0)
	w.st.count(q.qtype, rcodeNoError, policy, len(resp), true)
	return resp
}
