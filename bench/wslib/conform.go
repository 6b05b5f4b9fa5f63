package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Opcodes of RFC 6455.
const (
	opCont   = 0x0
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
)

// frame is one raw frame, as sent by the conformance client or read back.
type frame struct {
	fin     bool
	rsv     byte // the three RSV bits, already shifted (0x70 mask)
	op      byte
	masked  bool
	payload []byte
}

func writeFrame(w io.Writer, f frame) error {
	var b bytes.Buffer
	b0 := f.op | f.rsv
	if f.fin {
		b0 |= 0x80
	}
	b.WriteByte(b0)
	var m byte
	if f.masked {
		m = 0x80
	}
	n := len(f.payload)
	switch {
	case n < 126:
		b.WriteByte(m | byte(n))
	case n < 1<<16:
		b.WriteByte(m | 126)
		_ = binary.Write(&b, binary.BigEndian, uint16(n))
	default:
		b.WriteByte(m | 127)
		_ = binary.Write(&b, binary.BigEndian, uint64(n))
	}
	p := f.payload
	if f.masked {
		key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
		b.Write(key[:])
		p = make([]byte, n)
		for i := range f.payload {
			p[i] = f.payload[i] ^ key[i%4]
		}
	}
	b.Write(p)
	_, err := w.Write(b.Bytes())
	return err
}

func readFrame(r *bufio.Reader) (frame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	f := frame{fin: h[0]&0x80 != 0, rsv: h[0] & 0x70, op: h[0] & 0x0f, masked: h[1]&0x80 != 0}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var x uint16
		if err := binary.Read(r, binary.BigEndian, &x); err != nil {
			return f, err
		}
		n = uint64(x)
	case 127:
		if err := binary.Read(r, binary.BigEndian, &n); err != nil {
			return f, err
		}
	}
	var key [4]byte
	if f.masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, err
		}
	}
	if n > 16<<20 {
		return f, fmt.Errorf("frame of %d bytes", n)
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return f, err
	}
	if f.masked {
		for i := range f.payload {
			f.payload[i] ^= key[i%4]
		}
	}
	return f, nil
}

// data and ctl build masked client frames.
func data(op byte, fin bool, p string) frame {
	return frame{fin: fin, op: op, masked: true, payload: []byte(p)}
}
func closeFrame(code uint16, reason string) frame {
	p := make([]byte, 2, 2+len(reason))
	binary.BigEndian.PutUint16(p, code)
	return frame{fin: true, op: opClose, masked: true, payload: append(p, reason...)}
}

// want is what the server must answer: frames (compared by opcode and
// payload) and then, if closeCode != 0, a close frame with that code.
type want struct {
	frames      []frame
	closeCode   uint16
	closeReason string // checked when not empty
}

type confCase struct {
	name string
	send []frame
	want want
}

func confCases() []confCase {
	big := strings.Repeat("a", 60000)
	tooBig := strings.Repeat("b", maxMessage+1000)
	half := strings.Repeat("c", maxMessage/2+1000)
	return []confCase{
		{"1 text echo", []frame{data(opText, true, "hello")}, want{frames: []frame{{op: opText, payload: []byte("hello")}}}},
		{"2 binary 60000 B echo", []frame{data(opBinary, true, big)}, want{frames: []frame{{op: opBinary, payload: []byte(big)}}}},
		{"3 empty text echo", []frame{data(opText, true, "")}, want{frames: []frame{{op: opText, payload: []byte{}}}}},
		{"4 fragmented text (3 frames)", []frame{data(opText, false, "hel"), data(opCont, false, "l"), data(opCont, true, "o")}, want{frames: []frame{{op: opText, payload: []byte("hello")}}}},
		{"5 ping between fragments", []frame{data(opText, false, "ab"), data(opPing, true, "p1"), data(opCont, true, "cd")}, want{frames: []frame{{op: opPong, payload: []byte("p1")}, {op: opText, payload: []byte("abcd")}}}},
		{"6 ping payload echoed in pong", []frame{data(opPing, true, "xyz")}, want{frames: []frame{{op: opPong, payload: []byte("xyz")}}}},
		{"7 unsolicited pong ignored", []frame{data(opPong, true, "q"), data(opText, true, "after")}, want{frames: []frame{{op: opText, payload: []byte("after")}}}},
		{"8 close handshake echoes 1000", []frame{closeFrame(1000, "bye")}, want{closeCode: 1000}},
		{"9 message over the limit -> 1009", []frame{data(opBinary, true, tooBig)}, want{closeCode: 1009}},
		{"10 fragmented message over the limit -> 1009", []frame{data(opBinary, false, half), data(opCont, true, half)}, want{closeCode: 1009}},
		{"11 invalid UTF-8 text -> 1007", []frame{data(opText, true, "\xff\xfe")}, want{closeCode: 1007}},
		{"12 invalid UTF-8 across fragments -> 1007", []frame{data(opText, false, "ok"), data(opCont, true, "\xc3\x28")}, want{closeCode: 1007}},
		{"13 valid UTF-8 split inside a rune", []frame{data(opText, false, "\xce"), data(opCont, true, "\xba")}, want{frames: []frame{{op: opText, payload: []byte("κ")}}}},
		{"14 unmasked client frame -> 1002", []frame{{fin: true, op: opText, payload: []byte("x")}}, want{closeCode: 1002}},
		{"15 RSV1 without extension -> 1002", []frame{{fin: true, rsv: 0x40, op: opText, masked: true, payload: []byte("x")}}, want{closeCode: 1002}},
		{"16 reserved opcode 3 -> 1002", []frame{data(0x3, true, "x")}, want{closeCode: 1002}},
		{"17 ping with 126-byte payload -> 1002", []frame{data(opPing, true, strings.Repeat("p", 126))}, want{closeCode: 1002}},
		{"18 fragmented ping -> 1002", []frame{data(opPing, false, "p")}, want{closeCode: 1002}},
		{"19 continuation without a start -> 1002", []frame{data(opCont, true, "x")}, want{closeCode: 1002}},
		{"20 new message inside a fragmented one -> 1002", []frame{data(opText, false, "a"), data(opText, true, "b")}, want{closeCode: 1002}},
		{"21 close with reserved code 1005 -> 1002", []frame{closeFrame(1005, "")}, want{closeCode: 1002}},
		{"22 close with a 1-byte payload -> 1002", []frame{{fin: true, op: opClose, masked: true, payload: []byte{3}}}, want{closeCode: 1002}},
		{"23 server-initiated close 4000 with a reason", []frame{data(opText, true, closeTrigger)}, want{closeCode: closeCode, closeReason: closeReason}},
	}
}

// outcome of a case: "OK" (exact), "NON-STRICT" (the violation was
// refused, but the connection was dropped without the close code the RFC
// asks for), or "FAIL: ...".
func runCase(addr string, c confCase) string {
	conn, br, err := dialWS(addr, nil, 5*time.Second)
	if err != nil {
		return "FAIL: dial: " + err.Error()
	}
	defer conn.Close()
	go func() {
		for _, f := range c.send {
			if err := writeFrame(conn, f); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	for i, w := range c.want.frames {
		f, err := readFrame(br)
		if err != nil {
			return fmt.Sprintf("FAIL: frame %d: %v", i+1, err)
		}
		if f.op != w.op || !bytes.Equal(f.payload, w.payload) || !f.fin || f.masked {
			return fmt.Sprintf("FAIL: frame %d: got op %#x %d bytes fin=%v masked=%v, want op %#x %d bytes", i+1, f.op, len(f.payload), f.fin, f.masked, w.op, len(w.payload))
		}
	}
	if c.want.closeCode == 0 {
		return "OK"
	}
	f, err := readFrame(br)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Sprintf("FAIL: no close within 3 s (want %d)", c.want.closeCode)
		}
		return fmt.Sprintf("NON-STRICT: dropped without a close frame (want %d)", c.want.closeCode)
	}
	if f.op != opClose {
		return fmt.Sprintf("FAIL: got op %#x (%d bytes), want close %d", f.op, len(f.payload), c.want.closeCode)
	}
	if len(f.payload) < 2 {
		return fmt.Sprintf("NON-STRICT: close without a code (want %d)", c.want.closeCode)
	}
	if got := binary.BigEndian.Uint16(f.payload); got != c.want.closeCode {
		return fmt.Sprintf("NON-STRICT: close %d, want %d", got, c.want.closeCode)
	}
	if c.want.closeReason != "" && string(f.payload[2:]) != c.want.closeReason {
		return fmt.Sprintf("FAIL: close reason %q, want %q", f.payload[2:], c.want.closeReason)
	}
	return "OK"
}

func runConform(args []string) error {
	fs := flag.NewFlagSet("conform", flag.ExitOnError)
	lib := fs.String("lib", "nbio", "library")
	verbose := fs.Bool("v", false, "print every case")
	_ = fs.Parse(args)
	mk, ok := servers[*lib]
	if !ok {
		return fmt.Errorf("unknown library %q", *lib)
	}
	s := mk()
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer s.Close()
	var okN, nonStrict, fail int
	var notes []string
	cases := confCases()
	offers := []struct{ offer, want string }{
		{"corral.v1.json", "corral.v1.json"},
		{"corral.v1.proto, corral.v1.json", "corral.v1.proto"},
	}
	total := len(cases) + len(offers)
	for i, offer := range offers {
		name := fmt.Sprintf("%d subprotocol offered %q", len(cases)+i+1, offer.offer)
		r := "OK"
		c, _, sel, err := dialWSProto(addr, nil, 5*time.Second, offer.offer)
		switch {
		case err != nil:
			r = "FAIL: " + err.Error()
		case sel != offer.want:
			r = fmt.Sprintf("FAIL: selected %q, want %q", sel, offer.want)
		}
		if c != nil {
			c.Close()
		}
		if r == "OK" {
			okN++
		} else {
			fail++
			notes = append(notes, name+": "+r)
		}
		if *verbose {
			fmt.Printf("  %-48s %s\n", name, r)
		}
	}
	for _, c := range cases {
		r := runCase(addr, c)
		switch {
		case r == "OK":
			okN++
		case strings.HasPrefix(r, "NON-STRICT"):
			nonStrict++
			notes = append(notes, c.name+": "+r)
		default:
			fail++
			notes = append(notes, c.name+": "+r)
		}
		if *verbose {
			fmt.Printf("  %-48s %s\n", c.name, r)
		}
	}
	fmt.Printf("%-8s conformance: %d OK, %d non-strict, %d failed of %d\n", *lib, okN, nonStrict, fail, total)
	for _, n := range notes {
		fmt.Printf("    %s\n", n)
	}
	return nil
}
