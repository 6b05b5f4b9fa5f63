package authdns

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/shard"
)

// TestExampleShuffleCommentIsTrue recomputes the overlap figure the comment
// of examples/dns.yaml states for its shuffle set (it said two tenants
// "rarely share more than one endpoint", for about one pair in four).
func TestExampleShuffleCommentIsTrue(t *testing.T) {
	text, err := os.ReadFile("../examples/dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("dns.yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	var rc *RecordConfig
	for _, z := range cfg.Zones {
		for i := range z.Records {
			if z.Records[i].Shuffle != nil {
				rc = &z.Records[i]
			}
		}
	}
	if rc == nil {
		t.Fatal("examples/dns.yaml has no shuffle set")
	}
	a, err := shard.Analyze(shard.AnalyzeConfig{Workers: len(rc.Values), HandSize: rc.Shuffle.HandSize, MaxOverlap: -1})
	if err != nil {
		t.Fatal(err)
	}
	twoOrMore := 0.0
	for _, row := range a.Overlap[2:] {
		twoOrMore += row.Probability
	}
	want := fmt.Sprintf("%.1f %% of tenant pairs share two or more", 100*twoOrMore)
	flat := strings.Join(strings.Fields(strings.ReplaceAll(string(text), "#", "")), " ")
	if !strings.Contains(flat, want) {
		t.Errorf("examples/dns.yaml does not say %q (hands of %d of %d)", want, rc.Shuffle.HandSize, len(rc.Values))
	}
	if strings.Contains(flat, "rarely share") {
		t.Error("examples/dns.yaml still says tenants rarely share endpoints")
	}
}
