package authdns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/internal/config"
)

// loopZone is a zone whose records the cases of TestCNAMELoopsRefusedAtLoad
// append to.
const loopZone = `
listen: 127.0.0.1:0
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - {name: ns1, type: A, values: [127.0.0.1]}
`

const otherZone = `
  - origin: other.test
    ns: [ns1.corral.test.]
    records:
`

func TestCNAMELoopsRefusedAtLoad(t *testing.T) {
	tests := []struct {
		name    string
		records string
		other   string // records of a second zone other.test
		want    []string
	}{
		{"a name to itself", `
      - {name: a, type: CNAME, values: [a]}`, "",
			[]string{"test.yaml:8:9: zones[0].records[1]: authdns: CNAME loop: a.corral.test. -> a.corral.test."}},
		{"two names", `
      - {name: a, type: CNAME, values: [b]}
      - {name: b, type: CNAME, values: [a]}`, "",
			[]string{"zones[0].records[1]: authdns: CNAME loop: a.corral.test. -> b.corral.test. -> a.corral.test."}},
		{"through a wildcard", `
      - {name: "*.w", type: CNAME, values: [x.w]}`, "",
			[]string{"CNAME loop: *.w.corral.test. -> *.w.corral.test."}},
		{"one target of a weighted set", `
      - {name: a, type: CNAME, policy: weighted, values: [{value: ns1, weight: 1}, {value: b, weight: 1}]}
      - {name: b, type: CNAME, values: [c]}
      - {name: c, type: CNAME, values: [a]}`, "",
			[]string{"CNAME loop: a.corral.test. -> b.corral.test. -> c.corral.test. -> a.corral.test."}},
		{"across zones", `
      - {name: a, type: CNAME, values: [b.other.test.]}`, `
      - {name: b, type: CNAME, values: [a.corral.test.]}`,
			[]string{"zones[0].records[1]: authdns: CNAME loop: a.corral.test. -> b.other.test. -> a.corral.test."}},
		{"two loops, both named", `
      - {name: a, type: CNAME, values: [a]}
      - {name: b, type: CNAME, values: [c]}
      - {name: c, type: CNAME, values: [b]}`, "",
			[]string{"a.corral.test. -> a.corral.test.", "b.corral.test. -> c.corral.test. -> b.corral.test."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := loopZone + strings.TrimPrefix(tc.records, "\n") + "\n"
			if tc.other != "" {
				text += otherZone + strings.TrimPrefix(tc.other, "\n") + "\n"
			}
			cfg := DefaultConfig()
			err := config.Decode("test.yaml", []byte(text), &cfg, config.Options{})
			if err == nil {
				t.Fatal("a CNAME loop was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Chains that end are fine: inside the zones, outside, at a wildcard.
	ok := loopZone + `      - {name: a, type: CNAME, values: [b]}
      - {name: b, type: CNAME, values: [x.w]}
      - {name: "*.w", type: CNAME, values: [ns1]}
      - {name: out, type: CNAME, values: [example.net.]}
`
	if err := decodeConfig(t, ok).Validate(); err != nil {
		t.Fatalf("a chain without a loop was refused: %v", err)
	}
}

// TestCNAMEChainNeverRepeatsARecord makes a loop the loader would refuse,
// by editing the compiled zone, and checks that the answer stops before a
// record comes twice (Knot answers a loop of two with its two records).
func TestCNAMEChainNeverRepeatsARecord(t *testing.T) {
	cfg := decodeConfig(t, loopZone+`      - {name: a, type: CNAME, values: [b]}
      - {name: b, type: CNAME, values: [ns1]}
`)
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	z := s.state.Load().zones.zones["\x06corral\x04test\x00"]
	b := z.nodes["\x01b\x06corral\x04test\x00"].set(typeCNAME)
	b.targets[0] = []byte("\x01a\x06corral\x04test\x00") // b now chases back to a
	r, _ := handleRaw(t, s, mkQuery("a.corral.test", dns.TypeA, nil), false)
	seen := map[string]bool{}
	for _, rr := range r.Answer {
		if seen[rr.String()] {
			t.Fatalf("record %q answered twice in %v", rr, r.Answer)
		}
		seen[rr.String()] = true
	}
	if len(r.Answer) != 2 {
		t.Errorf("%d records, want the 2 of the loop: %v", len(r.Answer), r.Answer)
	}
}
