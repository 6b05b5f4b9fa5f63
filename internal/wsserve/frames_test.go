package wsserve

import (
	"encoding/binary"
	"testing"

	"github.com/corralhq/corral/internal/testkit"
)

var (
	clientFrame = testkit.WSClientFrame
	cat         = testkit.Cat
)

// firstVerdict feeds p in chunks of the given sizes (the rest in one) and
// returns the first verdict that is not frameOK.
func firstVerdict(f *frameTrack, p []byte, splits ...int) frameVerdict {
	for _, n := range splits {
		n = min(n, len(p))
		if v := f.feed(p[:n]); v != frameOK {
			return v
		}
		p = p[n:]
	}
	return f.feed(p)
}

func TestFrameTrack(t *testing.T) {
	pay := func(n int) []byte { return make([]byte, n) }
	tests := []struct {
		name   string
		stream []byte
		want   frameVerdict
	}{
		{"masked binary", clientFrame(2, true, true, pay(5)), frameOK},
		{"unmasked binary", clientFrame(2, true, false, pay(5)), frameUnmasked},
		{"unmasked after a good frame", cat(clientFrame(2, true, true, pay(3)), clientFrame(1, true, false, pay(3))), frameUnmasked},
		{"unmasked ping", clientFrame(9, true, false, nil), frameUnmasked},
		{"16-bit length", cat(clientFrame(2, true, true, pay(300)), clientFrame(2, true, true, pay(1))), frameOK},
		{"16-bit length then unmasked", cat(clientFrame(2, true, true, pay(300)), clientFrame(2, true, false, pay(1))), frameUnmasked},
		{"64-bit length", cat(clientFrame(2, true, true, pay(70000)), clientFrame(1, true, true, pay(2))), frameOK},
		{"64-bit length then empty", cat(clientFrame(2, true, true, pay(70000)), clientFrame(2, true, true, nil)), frameEmpty},
		{"empty binary", clientFrame(2, true, true, nil), frameEmpty},
		{"empty text", clientFrame(1, true, true, nil), frameEmpty},
		{"empty ping, pong and close", cat(clientFrame(9, true, true, nil), clientFrame(10, true, true, nil), clientFrame(8, true, true, nil)), frameOK},
		{"fragments", cat(clientFrame(2, false, true, pay(2)), clientFrame(0, false, true, nil), clientFrame(0, true, true, pay(1))), frameOK},
		{"empty first fragment, data later", cat(clientFrame(1, false, true, nil), clientFrame(9, true, true, nil), clientFrame(0, true, true, pay(4))), frameOK},
		{"all fragments empty", cat(clientFrame(2, false, true, nil), clientFrame(0, false, true, nil), clientFrame(0, true, true, nil)), frameEmpty},
		{"empty final fragment of a message with data", cat(clientFrame(2, false, true, pay(9)), clientFrame(0, true, true, nil)), frameOK},
		{"continuation without a start", clientFrame(0, true, true, []byte("x")), frameSequence},
		{"message inside a fragmented one", cat(clientFrame(1, false, true, pay(1)), clientFrame(2, true, true, pay(1))), frameSequence},
		{"control frames inside a fragmented message", cat(clientFrame(1, false, true, pay(1)), clientFrame(9, true, true, pay(125)), clientFrame(10, true, true, nil), clientFrame(0, true, true, pay(1))), frameOK},
		{"ping of 126 bytes", clientFrame(9, true, true, pay(126)), frameControl},
		{"fragmented ping", clientFrame(9, false, true, pay(1)), frameControl},
		{"reserved opcodes", clientFrame(3, true, true, pay(1)), frameOpcode},
		{"reserved control opcode", clientFrame(11, true, true, nil), frameOpcode},
		{"RSV1", append([]byte{0xc1}, clientFrame(1, true, true, pay(1))[1:]...), frameRSV},
		{"RSV3 after a good frame", cat(clientFrame(2, true, true, pay(1)), append([]byte{0x92}, clientFrame(2, true, true, pay(1))[1:]...)), frameRSV},
		{"unmasked continuation", cat(clientFrame(2, false, true, pay(1)), clientFrame(0, true, false, pay(1))), frameUnmasked},
		{"length of 4 GiB stops the tracking", cat([]byte{0x82, 0xff, 0, 0, 0, 1, 0, 0, 0, 0}, clientFrame(2, true, false, nil)), frameOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var whole frameTrack
			if got := firstVerdict(&whole, tc.stream); got != tc.want {
				t.Fatalf("in one read: %v, want %v", got, tc.want)
			}
			for i := range len(tc.stream) + 1 {
				var f frameTrack
				if got := firstVerdict(&f, tc.stream, i); got != tc.want {
					t.Fatalf("split at %d: %v, want %v", i, got, tc.want)
				}
			}
			var bytewise frameTrack
			splits := make([]int, len(tc.stream))
			for i := range splits {
				splits[i] = 1
			}
			if got := firstVerdict(&bytewise, tc.stream, splits...); got != tc.want {
				t.Fatalf("a byte per read: %v, want %v", got, tc.want)
			}
			if tc.want != frameOK {
				if v := whole.feed(clientFrame(2, true, true, pay(1))); v != frameDead {
					t.Fatalf("after a violation: %v, want frameDead", v)
				}
			}
		})
	}
}

// refVerdict is the straightforward parser frameTrack must agree with: it
// walks whole frames in p and returns the first violation.
func refVerdict(p []byte) frameVerdict {
	open, empty := false, false
	for len(p) >= 2 {
		b0, b1 := p[0], p[1]
		if b1&0x80 == 0 {
			return frameUnmasked
		}
		n, h := uint64(b1&0x7f), 2
		switch n {
		case 126:
			if len(p) < 4 {
				return frameOK
			}
			n, h = uint64(binary.BigEndian.Uint16(p[2:])), 4
		case 127:
			if len(p) < 10 {
				return frameOK
			}
			n, h = binary.BigEndian.Uint64(p[2:]), 10
			if n >= 1<<32 {
				return frameOK
			}
		}
		h += 4
		if len(p) < h {
			return frameOK
		}
		fin := b0&0x80 != 0
		if b0&0x70 != 0 {
			return frameRSV
		}
		switch b0 & 0x0f {
		case 1, 2:
			if open {
				return frameSequence
			}
			if fin && n == 0 {
				return frameEmpty
			}
			open, empty = !fin, n == 0
		case 0:
			if !open {
				return frameSequence
			}
			empty = empty && n == 0
			if fin {
				if empty {
					return frameEmpty
				}
				open = false
			}
		case 8, 9, 10:
			if !fin || n > 125 {
				return frameControl
			}
		default:
			return frameOpcode
		}
		p = p[h:]
		if uint64(len(p)) < n {
			return frameOK
		}
		p = p[n:]
	}
	return frameOK
}

func FuzzFrameTrack(f *testing.F) {
	f.Add(cat(clientFrame(2, true, true, make([]byte, 300)), clientFrame(2, true, true, nil)), []byte{3, 1, 7})
	f.Add(cat(clientFrame(1, false, true, nil), clientFrame(0, true, true, nil)), []byte{1})
	f.Add(clientFrame(2, true, false, []byte("x")), []byte{})
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, []byte{2, 2})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		splits := make([]int, len(cuts))
		for i, c := range cuts {
			splits[i] = int(c)
		}
		var tr frameTrack
		if got, want := firstVerdict(&tr, stream, splits...), refVerdict(stream); got != want {
			t.Fatalf("tracker %v, reference %v (cuts %v)", got, want, cuts)
		}
	})
}
