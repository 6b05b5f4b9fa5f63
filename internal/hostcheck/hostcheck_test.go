package hostcheck

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// mapSource is a host whose sysctls are a map; a missing key does not exist.
type mapSource struct {
	sysctl     map[string]string
	soft, hard int64
}

func (m mapSource) Sysctl(name string) (string, error) {
	v, ok := m.sysctl[name]
	if !ok {
		return "", fs.ErrNotExist
	}
	return v, nil
}

func (m mapSource) NoFile() (int64, int64, error) { return m.soft, m.hard, nil }

// debian is a stock Debian 13 host with 16 GiB: the defaults.
func debian() mapSource {
	return mapSource{soft: 1024, hard: 524288, sysctl: map[string]string{
		"fs.nr_open":                     "1073741816",
		"fs.file-max":                    "9223372036854775807",
		"net.core.somaxconn":             "4096",
		"net.ipv4.tcp_max_syn_backlog":   "1024",
		"net.ipv4.ip_local_port_range":   "32768\t60999",
		"net.ipv4.tcp_tw_reuse":          "2",
		"net.ipv4.tcp_max_tw_buckets":    "65536",
		"net.ipv4.tcp_mem":               "191796\t255731\t383592",
		"net.ipv4.tcp_rmem":              "4096\t131072\t6291456",
		"net.ipv4.tcp_wmem":              "4096\t16384\t4194304",
		"net.netfilter.nf_conntrack_max": "262144",
	}}
}

func TestCheckStockHost(t *testing.T) {
	res := Check(debian(), 1_000_000)
	got := map[string]Result{}
	for _, r := range res {
		got[r.Setting.Name] = r
	}
	for _, tc := range []struct {
		name  string
		state State
		fix   string
	}{
		{"RLIMIT_NOFILE", Change, "LimitNOFILE=1004096"},
		{"fs.nr_open", OK, ""},
		{"fs.file-max", OK, ""},
		{"net.core.somaxconn", Change, "net.core.somaxconn = 62500"},
		{"net.ipv4.tcp_max_syn_backlog", Change, "net.ipv4.tcp_max_syn_backlog = 62500"},
		{"net.ipv4.ip_local_port_range", Change, "net.ipv4.ip_local_port_range = 10240 65535"},
		{"net.ipv4.tcp_tw_reuse", Change, "net.ipv4.tcp_tw_reuse = 1"},
		{"net.ipv4.tcp_max_tw_buckets", Change, "net.ipv4.tcp_max_tw_buckets = 1000000"},
		{"net.ipv4.tcp_mem", Change, "net.ipv4.tcp_mem = 191796 1000000 2000000"},
		{"net.ipv4.tcp_rmem", OK, ""},
		{"net.ipv4.tcp_wmem", OK, ""},
		{"net.netfilter.nf_conntrack_max", Change, "net.netfilter.nf_conntrack_max = 1250000"},
	} {
		r, ok := got[tc.name]
		if !ok {
			t.Errorf("%s: not checked", tc.name)
			continue
		}
		if r.State != tc.state || !strings.HasPrefix(r.Fix, tc.fix) {
			t.Errorf("%s (have %q, want %s): %s %q; want %s %q", tc.name, r.Have, r.Want, r.State, r.Fix, tc.state, tc.fix)
		}
	}
	if len(res) != len(Settings) || Ready(res) {
		t.Errorf("%d results, ready %v; want %d, not ready", len(res), Ready(res), len(Settings))
	}
}

// TestCheckFixedHost applies every fix of a stock host and checks again:
// the fixes are enough, and a host without conntrack passes that row.
func TestCheckFixedHost(t *testing.T) {
	const n = 1_000_000
	src := debian()
	for _, r := range Check(src, n) {
		if r.State != Change {
			continue
		}
		if r.Setting.Kind == Rlimit {
			src.soft, src.hard = n+fdMargin, n+fdMargin
			continue
		}
		k, v, _ := strings.Cut(r.Fix, " = ")
		src.sysctl[k] = v
	}
	delete(src.sysctl, "net.netfilter.nf_conntrack_max")
	res := Check(src, n)
	for _, r := range res {
		if r.State != OK && r.State != Skipped {
			t.Errorf("%s after its fix: %s (have %q, want %s)", r.Setting.Name, r.State, r.Have, r.Want)
		}
	}
	if !Ready(res) {
		t.Error("not ready after every fix")
	}
	// A small host passes at a small N without changes but the ones that
	// do not depend on N.
	for _, r := range Check(debian(), 1000) {
		if r.Setting.Name == "net.core.somaxconn" && r.State != OK {
			t.Errorf("somaxconn 4096 for 1000 connections: %s", r.State)
		}
	}
}

type brokenSource struct{}

func (brokenSource) Sysctl(string) (string, error) { return "", unsupportedOn("plan9") }
func (brokenSource) NoFile() (int64, int64, error) { return 0, 0, unsupportedOn("plan9") }

// TestCheckUnsupported: a host that cannot be read is unknown, not ready
// nor failing, and says why.
func TestCheckUnsupported(t *testing.T) {
	res := Check(brokenSource{}, 10)
	for _, r := range res {
		if r.State != Unknown || !strings.Contains(r.Note, "plan9") {
			t.Errorf("%s: %s %q; want unknown naming the OS", r.Setting.Name, r.State, r.Note)
		}
	}
	if !Ready(res) {
		t.Error("unknown results count as a change")
	}
	if !errors.Is(unsupportedOn("x"), ErrUnsupported) {
		t.Error("unsupportedOn does not wrap ErrUnsupported")
	}
}

func TestMeetsRefusesMalformed(t *testing.T) {
	s, _ := Lookup("net.ipv4.tcp_mem")
	for _, v := range []string{"", "1 2", "a b c", "1 2 3 4"} {
		if _, err := s.Meets(10, v); err == nil {
			t.Errorf("tcp_mem %q: no error", v)
		}
	}
	if ok, err := s.Meets(10, "1 10 20"); !ok || err != nil {
		t.Errorf("tcp_mem 1 10 20 for 10: %v %v", ok, err)
	}
}

func TestOutbound(t *testing.T) {
	src := debian() // 28232 ports
	if r := Outbound(src, 50_000, 2); r.State != OK {
		t.Errorf("2 addresses x 28232 ports for 50,000: %s %q", r.State, r.Have)
	}
	r := Outbound(src, 1_000_000, 2)
	if r.State != Change || !strings.Contains(r.Fix, "use 19 source addresses") || !strings.Contains(r.Fix, "10240 65535") {
		t.Errorf("1,000,000 from 2 addresses: %s %q; want 19 addresses with the wide range", r.State, r.Fix)
	}
	if r := Outbound(brokenSource{}, 10, 1); r.State != Unknown {
		t.Errorf("unreadable range: %s", r.State)
	}
}
