package authdns

import "testing"

// TestLowerWords checks the eight-bytes-at-a-time lower-casing against the
// byte rule on every byte value, in every position of a word.
func TestLowerWords(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			b := []byte("\x07AbZ@[`z")
			b[pos] = byte(c)
			want := append([]byte(nil), b...)
			lowerWire(want)
			lowerWords(b)
			if string(b) != string(want) {
				t.Fatalf("byte %#x at %d: got %q, want %q", c, pos, b, want)
			}
		}
	}
}
