package wsframe

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

// server builds an unmasked server frame.
func server(op byte, payload []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		b = append(b, byte(n))
	case n < 1<<16:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

func TestParseAgreesWithRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{name: "short length", size: 5},
		{name: "16-bit length", size: 300},
		{name: "64-bit length", size: 70000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := bytes.Repeat([]byte{'x'}, tc.size)
			frame := server(2, payload)
			two := append(append([]byte{}, frame...), server(1, []byte("next"))...)
			// Every proper prefix of the frame is incomplete.
			for i := range len(frame) {
				if _, _, n, err := Parse(frame[:i]); n != 0 || err != nil {
					t.Fatalf("Parse of %d of %d bytes: n %d, err %v; want 0, nil", i, len(frame), n, err)
				}
			}
			op, p, n, err := Parse(two)
			if err != nil || n != len(frame) || op != 2 || !bytes.Equal(p, payload) {
				t.Fatalf("Parse: op %d, %d bytes, n %d, err %v; want 2, %d, %d, nil", op, len(p), n, err, tc.size, len(frame))
			}
			op2, p2, _, _ := Parse(two[n:])
			rop, rp, rerr := Read(bufio.NewReader(bytes.NewReader(frame)))
			if rerr != nil || rop != op || !bytes.Equal(rp, p) {
				t.Fatalf("Read disagrees: op %d, %d bytes, err %v", rop, len(rp), rerr)
			}
			if op2 != 1 || string(p2) != "next" {
				t.Fatalf("the next frame: op %d %q", op2, p2)
			}
		})
	}
}

func TestParseRefusesOversize(t *testing.T) {
	b := append([]byte{0x82, 127}, binary.BigEndian.AppendUint64(nil, MaxPayload+1)...)
	if _, _, _, err := Parse(b); err == nil {
		t.Fatal("Parse took a frame over MaxPayload")
	}
}
