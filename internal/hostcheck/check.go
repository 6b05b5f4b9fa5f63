package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ErrUnsupported is what a Source returns for a setting it cannot read on
// this operating system.
var ErrUnsupported = errors.New("cannot be checked on this operating system")

// Source reads a host's settings. Host returns the running host's; tests
// pass a map.
type Source interface {
	// Sysctl returns the value of a kernel parameter as /proc/sys prints
	// it; fs.ErrNotExist when the kernel has no such parameter (a module
	// not loaded), ErrUnsupported when it cannot be read here.
	Sysctl(name string) (string, error)
	// NoFile returns the soft and hard RLIMIT_NOFILE of this process.
	NoFile() (soft, hard int64, err error)
}

// State is the outcome of one check.
type State int

const (
	// OK: the host meets the setting.
	OK State = iota
	// Change: the host does not; Result.Fix says what to set.
	Change
	// Skipped: an optional setting whose module is not loaded.
	Skipped
	// Unknown: the setting cannot be read here.
	Unknown
)

// String returns the state as doctor prints it.
func (s State) String() string {
	return [...]string{"ok", "change", "skipped", "unknown"}[s]
}

// Result is one setting checked.
type Result struct {
	Setting Setting
	State   State
	// Have is the host's value ("" when unknown), Want the bounds in words.
	Have, Want string
	// Fix, for State Change, is the line that sets it: a sysctl.d line
	// ("net.core.somaxconn = 65535") or, for a resource limit, the
	// systemd directive. Note says why a check was skipped or unknown.
	Fix, Note string
}

// Check checks every setting of the table on src for n connections.
func Check(src Source, n int64) []Result {
	out := make([]Result, 0, len(Settings))
	for _, s := range Settings {
		out = append(out, check(src, s, n))
	}
	return out
}

func check(src Source, s Setting, n int64) Result {
	r := Result{Setting: s, Want: s.WantString(n)}
	var value string
	if s.Kind == Rlimit {
		soft, hard, err := src.NoFile()
		if err != nil {
			r.State, r.Note = Unknown, err.Error()
			return r
		}
		value = FormatValue([]int64{soft, hard})
	} else {
		v, err := src.Sysctl(s.Name)
		switch {
		case errors.Is(err, fs.ErrNotExist) && s.Optional:
			r.State, r.Note = Skipped, "not on this kernel (module not loaded)"
			return r
		case err != nil:
			r.State, r.Note = Unknown, err.Error()
			return r
		}
		value = strings.Join(strings.Fields(v), " ")
	}
	r.Have = value
	ok, err := s.Meets(n, value)
	if err != nil {
		r.State, r.Note = Unknown, err.Error()
		return r
	}
	if ok {
		return r
	}
	have, _ := ParseValue(value)
	fix := s.Suggest(n, have)
	r.State = Change
	if s.Kind == Rlimit {
		r.Fix = fmt.Sprintf("LimitNOFILE=%d (systemd unit), or ulimit -n %d before the server starts", fix[1], fix[1])
	} else {
		r.Fix = fmt.Sprintf("%s = %s", s.Name, FormatValue(fix))
	}
	return r
}

// Ready reports whether no result asks for a change.
func Ready(results []Result) bool {
	for _, r := range results {
		if r.State == Change {
			return false
		}
	}
	return true
}

// unsupportedOn says that the settings are Linux's, naming goos.
func unsupportedOn(goos string) error {
	return fmt.Errorf("hostcheck: %w (%s): the kernel parameters are Linux's /proc/sys", ErrUnsupported, goos)
}

// Outbound checks that this host can hold n connections of its own to one
// destination address and port (a storm generator's, or a tier that dials
// as many as it accepts): each takes a source address and ephemeral port
// pair, so the range's width times addrs, the host's source addresses,
// must reach n.
func Outbound(src Source, n int64, addrs int) Result {
	s := Setting{Name: "source addresses", Kind: Sysctl, Scope: NetNS,
		Why: "outbound connections to one destination: ephemeral ports times source addresses"}
	r := Result{Setting: s, Want: fmt.Sprintf(">= %d address-port pairs", n)}
	v, err := src.Sysctl("net.ipv4.ip_local_port_range")
	if err != nil {
		r.State, r.Note = Unknown, err.Error()
		return r
	}
	pr, err := ParseValue(v)
	if err != nil || len(pr) != 2 || pr[1] < pr[0] {
		r.State, r.Note = Unknown, fmt.Sprintf("hostcheck: ip_local_port_range %q is not two ports", v)
		return r
	}
	width := pr[1] - pr[0] + 1
	r.Have = fmt.Sprintf("%d ports x %d addresses = %d", width, addrs, width*int64(addrs))
	if width*int64(addrs) >= n {
		return r
	}
	r.State = Change
	portRange, _ := Lookup("net.ipv4.ip_local_port_range")
	wide := portRange.Suggest(n, pr)
	width = max(width, wide[1]-wide[0]+1)
	r.Fix = fmt.Sprintf("use %d source addresses (each dial bound to one: kraken spreads over 127.0.0.0/8 on loopback) with the range %s", (n+width-1)/width, FormatValue(wide))
	return r
}
