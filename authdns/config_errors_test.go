package authdns

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/config"
)

// TestPrefixErrorsSayWhatIsWanted: a bad prefix or address (transfer
// rules, cidr locations) is reported under its key with what is wanted,
// not with the name of the Go function that refused it.
func TestPrefixErrorsSayWhatIsWanted(t *testing.T) {
	text := "listen: 127.0.0.1:0\naxfr_allow: [10.0.0.0/33, x]\nzones:\n  - origin: corral.test\n    ns: [ns1]\n    records:\n" +
		"      - {name: d, type: A, policy: cidr, locations: {eu: [10.0.0.0/40]}, values: [{value: 1.2.3.4, location: eu}]}\n"
	wantConfigError(t, text, `axfr_allow[0]: authdns: bad prefix "10.0.0.0/33" (want`, `axfr_allow[1]: authdns: bad address "x" (want`)
	cfg := DefaultConfig()
	err := config.Decode("dns.yaml", []byte(strings.Replace(text, "axfr_allow: [10.0.0.0/33, x]\n", "", 1)), &cfg, config.Options{})
	if err == nil || !strings.Contains(err.Error(), `zones[0].records[0].locations.eu[0]: authdns: bad prefix "10.0.0.0/40"`) {
		t.Errorf("cidr location: %v", err)
	}
	for _, e := range []error{err, config.Decode("dns.yaml", []byte(text), &cfg, config.Options{})} {
		if e != nil && (strings.Contains(e.Error(), "netip") || strings.Contains(e.Error(), "Parse")) {
			t.Errorf("message names a Go function: %v", e)
		}
	}
}
