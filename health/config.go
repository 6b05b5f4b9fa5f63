package health

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/config"
)

// Check kinds accepted in CheckConfig.Kind.
const (
	KindHTTP       = "http"
	KindTCP        = "tcp"
	KindGRPC       = "grpc"
	KindCalculated = "calculated"
)

// Kinds returns the accepted check kinds in a stable order.
func Kinds() []string { return []string{KindHTTP, KindTCP, KindGRPC, KindCalculated} }

// Initial states accepted in CheckConfig.Initial.
const (
	InitialHealthy   = "healthy"
	InitialUnhealthy = "unhealthy"
)

// Defaults and bounds of a check.
const (
	// DefaultInterval is the time between two probes of a check, the
	// standard interval of Route 53 (which also offers 10 s).
	DefaultInterval = 30 * time.Second
	// MinInterval is the shortest interval accepted. It is low so that
	// tests on loopback can run fast; production checks want 10 s or 30 s.
	MinInterval = 10 * time.Millisecond
	// DefaultTimeout bounds one probe; it is lowered to the interval when
	// the interval is shorter.
	DefaultTimeout = 5 * time.Second
	// DefaultFailureThreshold is the number of consecutive failed probes
	// that turn a healthy check unhealthy (Route 53's default).
	DefaultFailureThreshold = 3
	// MaxThreshold is the largest failure or success threshold (Route 53
	// accepts 1 to 10).
	MaxThreshold = 10
	// MaxJitter is the largest Jitter fraction.
	MaxJitter = 0.5
	// BodyMatchLimit is how many bytes of an HTTP response body are searched
	// for CheckConfig.Match, as Route 53 does.
	BodyMatchLimit = 5120
)

// Config is the set of named health checks of a server. Its zero value has
// no checks. Use Validate to check it and New to build a Checker.
type Config struct {
	// Checks are the named checks. Names are unique.
	Checks []CheckConfig `yaml:"checks"`
}

// CheckConfig defines one named check. Fields that do not apply to the kind
// must be left empty; a zero field takes its default.
type CheckConfig struct {
	// Name identifies the check; records and calculated checks refer to
	// it. Letters, digits, '.', '_' and '-' only.
	Name string `yaml:"name"`
	// Kind is "http", "tcp", "grpc" or "calculated".
	Kind string `yaml:"kind"`

	// URL is the target of an http check: http:// or https://, host, port,
	// path and query ("http://10.0.0.1:8080/healthz"). The check is healthy
	// when the answer's status is 2xx or 3xx (redirects are not followed).
	URL string `yaml:"url"`
	// Host replaces the Host header (and the TLS server name) of an http
	// check; empty uses the URL's host.
	Host string `yaml:"host"`
	// Match, when set, must appear in the first 5,120 bytes of the body of
	// an http check's answer for the check to pass.
	Match string `yaml:"match"`
	// InsecureSkipVerify skips TLS certificate verification of https and
	// grpc (with TLS) checks. Meant for tests and self-signed origins.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`

	// Address is the host:port of a tcp or grpc check. A tcp check passes
	// when a connection opens within the timeout.
	Address string `yaml:"address"`
	// Service is the service name sent in a grpc check (the gRPC health
	// protocol, grpc.health.v1.Health/Check); empty asks about the whole
	// server. The check passes when the answer is SERVING.
	Service string `yaml:"service"`
	// TLS makes a grpc check connect with TLS instead of plaintext.
	TLS bool `yaml:"tls"`

	// Children are the names of the checks a calculated check combines.
	// Calculated checks may name other calculated checks, without cycles.
	Children []string `yaml:"children"`
	// MinHealthy is how many children must be healthy for a calculated
	// check to be healthy (the N of "N of M"). Zero means all of them.
	MinHealthy int `yaml:"min_healthy"`

	// Interval is the time between two probes; default 30 s, at least
	// 10 ms. Calculated checks have none: they follow their children at
	// once.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one probe; default 5 s, or the interval when that is
	// shorter. It may not exceed the interval.
	Timeout time.Duration `yaml:"timeout"`
	// FailureThreshold is how many consecutive failed probes turn a
	// healthy check unhealthy, 1 to 10; default 3.
	FailureThreshold int `yaml:"failure_threshold"`
	// SuccessThreshold is how many consecutive passed probes turn an
	// unhealthy check healthy again, 1 to 10; default FailureThreshold, as
	// Route 53 uses one threshold both ways.
	SuccessThreshold int `yaml:"success_threshold"`
	// Jitter varies each wait between probes by up to this fraction of the
	// interval, either way (0.1 waits 27 s to 33 s for a 30 s interval), 0
	// to 0.5; default 0. Independently of it, the first probe of every
	// check starts at a uniformly random point of its first interval, so
	// that a thousand checks do not fire together.
	Jitter float64 `yaml:"jitter"`
	// Initial is the state of the check before its first probe ends:
	// "healthy" (the default; a new check serves traffic, failing open) or
	// "unhealthy" (a new check must pass SuccessThreshold probes first).
	// Calculated checks start from their children's initial states.
	Initial string `yaml:"initial"`
}

// Validate reports every problem of c. Each error starts with "health: "
// and carries the key path ("checks[2].interval") as a config field error,
// so that config.Load names the line.
func (c Config) Validate() error {
	_, err := c.normalized()
	return err
}

// Has reports whether c defines a check called name. Servers use it to
// reject references to unknown checks.
func (c Config) Has(name string) bool {
	return slices.ContainsFunc(c.Checks, func(cc CheckConfig) bool { return cc.Name == name })
}

// Names returns the names of the checks of c in the order of the file.
func (c Config) Names() []string {
	out := make([]string, len(c.Checks))
	for i, cc := range c.Checks {
		out[i] = cc.Name
	}
	return out
}

// fieldErr builds an error for key path that starts with "health: " and
// still carries the path as a *config.FieldError.
func fieldErr(path, format string, args ...any) error {
	return fmt.Errorf("health: %w", config.Errorf(path, format, args...))
}

// normalized returns the checks of c with defaults applied, or every
// validation error joined.
func (c Config) normalized() ([]CheckConfig, error) {
	var errs []error
	out := make([]CheckConfig, len(c.Checks))
	index := make(map[string]int, len(c.Checks))
	for i, cc := range c.Checks {
		p := fmt.Sprintf("checks[%d]", i)
		if cc.Name == "" {
			errs = append(errs, fieldErr(p+".name", "a check needs a name"))
		} else if bad := strings.IndexFunc(cc.Name, func(r rune) bool { return !nameRune(r) }); bad >= 0 {
			errs = append(errs, fieldErr(p+".name", "name %q holds %q (letters, digits, '.', '_' and '-' only)", cc.Name, cc.Name[bad:bad+1]))
		} else if j, dup := index[cc.Name]; dup {
			errs = append(errs, fieldErr(p+".name", "duplicate check name %q (also checks[%d])", cc.Name, j))
		} else {
			index[cc.Name] = i
		}
		n, err := cc.normalized(p)
		errs = append(errs, err...)
		out[i] = n
	}
	// Children must exist, and the graph of calculated checks must be
	// acyclic.
	for i, cc := range c.Checks {
		if cc.Kind != KindCalculated {
			continue
		}
		for k, ch := range cc.Children {
			if _, ok := index[ch]; !ok {
				errs = append(errs, fieldErr(fmt.Sprintf("checks[%d].children[%d]", i, k), "unknown check %q", ch))
			}
		}
	}
	if len(errs) == 0 {
		if cyc := findCycle(out, index); cyc != nil {
			i := index[cyc[0]]
			errs = append(errs, fieldErr(fmt.Sprintf("checks[%d].children", i), "calculated checks form a cycle: %s", strings.Join(cyc, " -> ")))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// normalized applies the defaults of one check and lists its problems; p
// is its key path.
func (cc CheckConfig) normalized(p string) (CheckConfig, []error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fieldErr(p+"."+key, format, args...))
	}
	notFor := func(key string, set bool) {
		if set {
			bad(key, "does not apply to a %s check", cc.Kind)
		}
	}
	switch cc.Kind {
	case KindHTTP:
		u, err := url.Parse(cc.URL)
		switch {
		case cc.URL == "":
			bad("url", "an http check needs a url")
		case err != nil:
			bad("url", "bad url %q: %v", cc.URL, errors.Unwrap(err))
		case u.Scheme != "http" && u.Scheme != "https":
			bad("url", "url %q: scheme must be http or https", cc.URL)
		case u.Host == "" || u.Hostname() == "":
			bad("url", "url %q has no host", cc.URL)
		}
		notFor("address", cc.Address != "")
		notFor("service", cc.Service != "")
		notFor("tls", cc.TLS)
	case KindTCP, KindGRPC:
		if cc.Address == "" {
			bad("address", "a %s check needs an address (host:port)", cc.Kind)
		} else if h, port, err := net.SplitHostPort(cc.Address); err != nil || h == "" || port == "" {
			bad("address", "address %q is not host:port", cc.Address)
		}
		notFor("url", cc.URL != "")
		notFor("host", cc.Host != "")
		notFor("match", cc.Match != "")
		if cc.Kind == KindTCP {
			notFor("service", cc.Service != "")
			notFor("tls", cc.TLS)
			notFor("insecure_skip_verify", cc.InsecureSkipVerify)
		} else if cc.InsecureSkipVerify && !cc.TLS {
			bad("insecure_skip_verify", "has no effect without tls: true")
		}
	case KindCalculated:
		if len(cc.Children) == 0 {
			bad("children", "a calculated check needs children")
		}
		seen := make(map[string]bool, len(cc.Children))
		for k, ch := range cc.Children {
			if ch == cc.Name {
				bad(fmt.Sprintf("children[%d]", k), "check %q names itself", ch)
			}
			if seen[ch] {
				bad(fmt.Sprintf("children[%d]", k), "child %q listed twice", ch)
			}
			seen[ch] = true
		}
		switch {
		case cc.MinHealthy < 0 || cc.MinHealthy > len(cc.Children):
			bad("min_healthy", "must be between 0 (all) and the %d children, got %d", len(cc.Children), cc.MinHealthy)
		case cc.MinHealthy == 0:
			cc.MinHealthy = len(cc.Children)
		}
		for _, f := range []struct {
			key string
			set bool
		}{
			{"url", cc.URL != ""}, {"host", cc.Host != ""}, {"match", cc.Match != ""},
			{"insecure_skip_verify", cc.InsecureSkipVerify}, {"address", cc.Address != ""},
			{"service", cc.Service != ""}, {"tls", cc.TLS}, {"interval", cc.Interval != 0},
			{"timeout", cc.Timeout != 0}, {"failure_threshold", cc.FailureThreshold != 0},
			{"success_threshold", cc.SuccessThreshold != 0}, {"jitter", cc.Jitter != 0},
			{"initial", cc.Initial != ""},
		} {
			notFor(f.key, f.set)
		}
		return cc, errs
	case "":
		bad("kind", "a check needs a kind (one of %s)", strings.Join(Kinds(), ", "))
		return cc, errs
	default:
		bad("kind", "unknown kind %q (want one of %s)", cc.Kind, strings.Join(Kinds(), ", "))
		return cc, errs
	}
	if cc.Kind != KindCalculated {
		notFor("children", len(cc.Children) > 0)
		notFor("min_healthy", cc.MinHealthy != 0)
	}

	switch {
	case cc.Interval == 0:
		cc.Interval = DefaultInterval
	case cc.Interval < MinInterval:
		bad("interval", "%v is below the minimum of %v", cc.Interval, MinInterval)
	}
	switch {
	case cc.Timeout == 0:
		cc.Timeout = min(DefaultTimeout, cc.Interval)
	case cc.Timeout < 0:
		bad("timeout", "%v is negative", cc.Timeout)
	case cc.Timeout > cc.Interval:
		bad("timeout", "%v exceeds the interval %v", cc.Timeout, cc.Interval)
	}
	if cc.FailureThreshold == 0 {
		cc.FailureThreshold = DefaultFailureThreshold
	} else if cc.FailureThreshold < 1 || cc.FailureThreshold > MaxThreshold {
		bad("failure_threshold", "must be between 1 and %d, got %d", MaxThreshold, cc.FailureThreshold)
	}
	if cc.SuccessThreshold == 0 {
		cc.SuccessThreshold = cc.FailureThreshold
	} else if cc.SuccessThreshold < 1 || cc.SuccessThreshold > MaxThreshold {
		bad("success_threshold", "must be between 1 and %d, got %d", MaxThreshold, cc.SuccessThreshold)
	}
	if math.IsNaN(cc.Jitter) || cc.Jitter < 0 || cc.Jitter > MaxJitter {
		bad("jitter", "must be between 0 and %v, got %v", MaxJitter, cc.Jitter)
	}
	switch cc.Initial {
	case "":
		cc.Initial = InitialHealthy
	case InitialHealthy, InitialUnhealthy:
	default:
		bad("initial", "unknown initial state %q (want healthy or unhealthy)", cc.Initial)
	}
	return cc, errs
}

// findCycle returns the names along a cycle of calculated checks, the
// first name repeated at the end, or nil when there is none.
func findCycle(checks []CheckConfig, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(checks))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		color[i] = grey
		stack = append(stack, checks[i].Name)
		for _, ch := range checks[i].Children {
			j := index[ch]
			switch color[j] {
			case grey:
				k := slices.Index(stack, ch)
				return append(slices.Clone(stack[k:]), ch)
			case white:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return nil
	}
	for i := range checks {
		if color[i] == white {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// target describes what a check probes, for the status page and logs.
func (cc CheckConfig) target() string {
	switch cc.Kind {
	case KindHTTP:
		t := cc.URL
		if cc.Host != "" {
			t += " (host " + cc.Host + ")"
		}
		if cc.Match != "" {
			t += fmt.Sprintf(" match %q", cc.Match)
		}
		return t
	case KindGRPC:
		if cc.Service != "" {
			return cc.Address + " service " + cc.Service
		}
		return cc.Address
	case KindCalculated:
		return fmt.Sprintf("%d of [%s]", cc.MinHealthy, strings.Join(cc.Children, ", "))
	}
	return cc.Address
}
