package authdns

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"
)

// serveTCP accepts connections until the listener is closed.
func (s *Server) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		s.mu.Lock()
		if len(s.conns) >= s.cfg.MaxTCPConns || s.shutdown {
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			defer func() {
				// Queries recover in handle; this catches the transfer
				// path, and the connection is closed.
				if v := recover(); v != nil {
					s.tcpSt.panics.Add(1)
					s.logPanic(v, "on a TCP connection")
				}
			}()
			s.serveConn(c)
		}()
	}
}

// serveConn answers the length-prefixed queries of one connection, in
// order (pipelined queries are answered one after the other), until the
// client closes it or it stays idle for TCPIdle.
func (s *Server) serveConn(c net.Conn) {
	var client netip.Addr
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		client = ap.Addr().Unmap()
	}
	w := newWorker(s, s.tcpSt, rand.Uint64())
	r := bufio.NewReaderSize(c, 4096)
	req := make([]byte, 65535)
	out := make([]byte, 2+65535+512)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.TCPIdle))
		var lb [2]byte
		if _, err := io.ReadFull(r, lb[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lb[:]))
		if _, err := io.ReadFull(r, req[:n]); err != nil {
			return
		}
		resp, o := w.handle(req[:n], client, true, out[2:2:len(out)])
		switch o {
		case outDrop:
			continue
		case outTransfer:
			if err := w.transfer(c, &w.q, req[:n], client); err != nil {
				return
			}
			continue
		}
		binary.BigEndian.PutUint16(out, uint16(len(resp)))
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdle))
		if _, err := c.Write(out[:2+len(resp)]); err != nil {
			return
		}
	}
}

// transferChunk is the size a transfer message is filled to.
const transferChunk = 16 * 1024

// transfer streams the zone of w.zone to c as AXFR (RFC 5936): the SOA,
// every record (every value of every policy), the SOA again, in as many
// messages as needed. An IXFR query gets the same full transfer. When the
// server requires TSIG for transfers (axfr_tsig), the request req must be
// signed with one of its keys, else it gets NOTAUTH; a signed request is
// verified even when no key is required. Every message of a signed
// transfer is signed.
func (w *worker) transfer(c net.Conn, q *query, req []byte, client netip.Addr) error {
	z := w.zone
	idle := w.srv.cfg.TCPIdle
	ok, signer, resp, why := checkTSIG(w.srv.state.Load(), req, time.Now())
	if !ok {
		w.st.count(q.qtype, rcodeNotAuth, 0, len(resp), false)
		w.srv.log.Info("authdns: transfer refused", "zone", z.name, "client", client.String(), "reason", why)
		if resp == nil {
			return errors.New("authdns: building a NOTAUTH answer failed")
		}
		return writeMsg(c, resp, idle)
	}
	w.st.count(q.qtype, rcodeNoError, 0, 0, false)
	buf := make([]byte, 2, 2+65535)
	var m builder
	var err error
	flush := func() {
		if err != nil {
			return
		}
		msg := m.finish(q, rcodeNoError, 0, 0)
		if signer != nil {
			var signed []byte
			if signed, err = signer.sign(msg); err == nil {
				err = writeMsg(c, signed, idle)
			}
		} else {
			binary.BigEndian.PutUint16(buf, uint16(len(msg)))
			_ = c.SetWriteDeadline(time.Now().Add(idle))
			_, err = c.Write(buf[:2+len(msg)])
		}
		m.start(buf[2:2:cap(buf)], q, 65535)
		m.setFlags(flagAA)
	}
	q.edns = false // no OPT in transfer messages
	m.start(buf[2:2:cap(buf)], q, 65535)
	m.setFlags(flagAA)
	addRR := func(owner []byte, rest []byte) {
		if len(m.b)+len(owner)+len(rest) > transferChunk {
			flush()
		}
		m.b = append(m.b, owner...)
		m.b = append(m.b, rest...)
		m.an++
	}
	addRR(z.origin, z.soa)
	for _, n := range z.order {
		for _, set := range n.sets {
			if set.rtype == typeSOA {
				continue
			}
			for _, rr := range set.rrs {
				addRR(n.name, rr)
			}
		}
	}
	addRR(z.origin, z.soa)
	flush()
	return err
}
