// Package wsframe is the bare WebSocket client framing that the hub's load
// tools (hubload, drainload) share: masked client frames out, unmasked
// server frames in. The tools write their own handshakes and frames rather
// than use a WebSocket library so that the client side costs as little as
// possible and stays out of the figures.
package wsframe

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
)

// MaxPayload bounds a frame Read accepts.
const MaxPayload = 1 << 20

// Masked builds one final client frame of opcode op with a random mask.
func Masked(op byte, payload []byte) []byte {
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	b := make([]byte, 0, 14+len(payload))
	b = append(b, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// Write writes one final client frame of opcode op.
func Write(w io.Writer, op byte, payload []byte) error {
	_, err := w.Write(Masked(op, payload))
	return err
}

// Parse reads one unmasked server frame from the front of b, for a client
// that reads its socket itself: the frame's opcode, its payload (a slice of
// b) and the bytes it took, or n = 0 when b does not hold a whole frame yet.
func Parse(b []byte) (op byte, payload []byte, n int, err error) {
	if len(b) < 2 {
		return 0, nil, 0, nil
	}
	size, head := uint64(b[1]&0x7f), 2
	switch size {
	case 126:
		if len(b) < 4 {
			return 0, nil, 0, nil
		}
		size, head = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0, nil, 0, nil
		}
		size, head = binary.BigEndian.Uint64(b[2:]), 10
	}
	if size > MaxPayload {
		return 0, nil, 0, fmt.Errorf("wsframe: a frame of %d bytes (at most %d)", size, MaxPayload)
	}
	if uint64(len(b)-head) < size {
		return 0, nil, 0, nil
	}
	end := head + int(size)
	return b[0] & 0x0f, b[head:end], end, nil
}

// Read reads one unmasked server frame and returns its opcode and payload.
func Read(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("wsframe: a frame of %d bytes (at most %d)", n, MaxPayload)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, p, nil
}
