package scenario

import (
	"strings"
	"testing"
)

// FuzzDecode: whatever the bytes, Decode returns a scenario or an error
// that starts with the package name, and never panics; a decoded scenario
// expands into variants without panicking either.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "sweep: {backoff: [full, none], origin_count: [1, 3]}\n"))
	f.Add([]byte(minimal + "traffic: {disconnects: [{at: 1s, share: 2}]}\n"))
	f.Add([]byte("geography: {distribution: explicit, pops: 2, shares: [0.5, 0.5]}\n"))
	f.Add([]byte("population: {devices: -1}\nerror_rate: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "scenario: ") {
				t.Fatalf("error without the package name: %v", err)
			}
			return
		}
		if _, err := s.Variants(); err != nil && !strings.HasPrefix(err.Error(), "scenario: ") {
			t.Fatalf("variants: %v", err)
		}
	})
}
