package backoff

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Policy names accepted in Config.Policy.
const (
	PolicyNone         = "none"
	PolicyExponential  = "exponential"
	PolicyFull         = "full"
	PolicyEqual        = "equal"
	PolicyDecorrelated = "decorrelated"
	PolicyGRPC         = "grpc"
)

// Names returns the accepted policy names in a stable order.
func Names() []string {
	return []string{PolicyNone, PolicyExponential, PolicyFull, PolicyEqual, PolicyDecorrelated, PolicyGRPC}
}

// Defaults of the none, exponential, full, equal and decorrelated policies.
const (
	DefaultBase                   = 500 * time.Millisecond
	DefaultCap                    = 30 * time.Second
	DefaultMultiplier             = 2.0
	DefaultDecorrelatedMultiplier = 3.0
	DefaultMaxHint                = time.Hour
)

// Defaults of the grpc policy, from the gRPC connection backoff protocol.
const (
	GRPCBase              = time.Second
	GRPCMultiplier        = 1.6
	GRPCJitter            = 0.2
	GRPCCap               = 120 * time.Second
	GRPCMinConnectTimeout = 20 * time.Second
)

// Config names a policy and its parameters. A zero field takes the policy's
// default, so the zero Config is full jitter with base 500 ms, cap 30 s and
// multiplier 2. Use Validate to check it, New to build a Policy and
// NewBackoff to build a Backoff.
type Config struct {
	// Policy is one of "none", "exponential", "full", "equal",
	// "decorrelated" and "grpc". Empty means "full", the AWS study's
	// recommendation.
	Policy string `yaml:"policy"`
	// Base is the first delay of the exponential envelope (INITIAL_BACKOFF
	// for grpc, the lower bound of every draw for decorrelated, the constant
	// delay for none). Default 500 ms; 1 s for grpc; 0 (retry at once) for
	// none.
	Base time.Duration `yaml:"base"`
	// Cap bounds the delay (for grpc it bounds the centre of the jitter
	// window, as MAX_BACKOFF does in the protocol). It must be at least Base.
	// Default 30 s; 120 s for grpc.
	Cap time.Duration `yaml:"cap"`
	// Multiplier is the growth factor per attempt, at least 1. For
	// decorrelated it is the factor on the previous delay (3 in the AWS
	// study). Default 2; 3 for decorrelated; 1.6 for grpc. None rejects it.
	Multiplier float64 `yaml:"multiplier"`
	// Jitter is the relative half-width of the grpc jitter window, in
	// (0, 1]. Default 0.2. The other policies reject it: their jitter is
	// fixed by their formula.
	Jitter float64 `yaml:"jitter"`
	// MinConnectTimeout is the least time a connection attempt is given
	// (MIN_CONNECT_TIMEOUT of the gRPC protocol); see
	// Backoff.ConnectTimeout. Default 20 s for grpc, 0 (none prescribed) for
	// the others.
	MinConnectTimeout time.Duration `yaml:"min_connect_timeout"`
	// MaxHint clamps server retry-after hints: a hint above it counts as
	// MaxHint. Default 1 h.
	MaxHint time.Duration `yaml:"max_hint"`
}

// Validate reports whether c describes a usable policy. Its errors start
// with "backoff: " and name the offending field.
func (c Config) Validate() error {
	_, err := c.WithDefaults()
	return err
}

// DefaultConfig returns the zero Config with its defaults filled in: full
// jitter, base 500 ms, cap 30 s, multiplier 2, hints clamped at 1 h.
func DefaultConfig() Config {
	c, _ := Config{}.WithDefaults() // the zero Config is valid
	return c
}

// Envelope returns c with the base and cap a server advertised (corral's
// Welcome hints reconnect_base_ms and reconnect_cap_ms) in place of c's,
// each when above 0, and the cap raised to the base if below it: the
// server knows how many clients it can take back how fast. c should have
// its defaults filled (WithDefaults), so that a zero means "no hint".
func (c Config) Envelope(base, cap time.Duration) Config {
	if base > 0 {
		c.Base = base
	}
	if cap > 0 {
		c.Cap = cap
	}
	c.Cap = max(c.Cap, c.Base)
	return c
}

// WithDefaults returns c with every zero field replaced by the policy's
// default, or the first error Validate would report.
func (c Config) WithDefaults() (Config, error) {
	if c.Policy == "" {
		c.Policy = PolicyFull
	}
	if !slices.Contains(Names(), c.Policy) {
		return c, fmt.Errorf("backoff: unknown policy %q (want one of %s)", c.Policy, strings.Join(Names(), ", "))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"base", c.Base}, {"cap", c.Cap}, {"min_connect_timeout", c.MinConnectTimeout}, {"max_hint", c.MaxHint}} {
		if f.v < 0 {
			return c, fmt.Errorf("backoff: %s %v is negative", f.name, f.v)
		}
	}
	if math.IsNaN(c.Multiplier) || math.IsInf(c.Multiplier, 0) {
		return c, fmt.Errorf("backoff: multiplier %v is not a finite number", c.Multiplier)
	}
	if c.Multiplier != 0 && c.Multiplier < 1 {
		return c, fmt.Errorf("backoff: multiplier %v is below 1 (delays would shrink)", c.Multiplier)
	}
	if c.Policy == PolicyNone && c.Multiplier != 0 {
		return c, fmt.Errorf("backoff: multiplier has no effect on policy none (it retries after a constant base)")
	}
	if math.IsNaN(c.Jitter) || c.Jitter < 0 || c.Jitter > 1 {
		return c, fmt.Errorf("backoff: jitter %v is outside (0, 1]", c.Jitter)
	}
	if c.Policy != PolicyGRPC && c.Jitter != 0 {
		return c, fmt.Errorf("backoff: jitter applies only to policy grpc; policy %s has its jitter fixed by its formula", c.Policy)
	}

	switch c.Policy {
	case PolicyGRPC:
		c.Base = or(c.Base, GRPCBase)
		c.Cap = or(c.Cap, GRPCCap)
		c.Multiplier = or(c.Multiplier, GRPCMultiplier)
		c.Jitter = or(c.Jitter, GRPCJitter)
		c.MinConnectTimeout = or(c.MinConnectTimeout, GRPCMinConnectTimeout)
	case PolicyNone:
		c.Cap = or(c.Cap, DefaultCap)
	case PolicyDecorrelated:
		c.Base = or(c.Base, DefaultBase)
		c.Cap = or(c.Cap, DefaultCap)
		c.Multiplier = or(c.Multiplier, DefaultDecorrelatedMultiplier)
	default:
		c.Base = or(c.Base, DefaultBase)
		c.Cap = or(c.Cap, DefaultCap)
		c.Multiplier = or(c.Multiplier, DefaultMultiplier)
	}
	c.MaxHint = or(c.MaxHint, DefaultMaxHint)
	if c.Cap < c.Base {
		return c, fmt.Errorf("backoff: cap %v is below base %v", c.Cap, c.Base)
	}
	return c, nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// New builds the Policy that c describes, after filling defaults and
// validating it.
func New(c Config) (Policy, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	return newPolicy(c), nil
}

// newPolicy builds the Policy of a Config that WithDefaults returned.
func newPolicy(c Config) Policy {
	switch c.Policy {
	case PolicyNone:
		return &None{s: newShape(c.Base, c.Cap, 1, c.MaxHint, 0)}
	case PolicyExponential:
		return &Exponential{s: newShape(c.Base, c.Cap, c.Multiplier, c.MaxHint, 0)}
	case PolicyFull:
		return &FullJitter{s: newShape(c.Base, c.Cap, c.Multiplier, c.MaxHint, 1)}
	case PolicyEqual:
		return &EqualJitter{s: newShape(c.Base, c.Cap, c.Multiplier, c.MaxHint, 0.5)}
	case PolicyDecorrelated:
		return &DecorrelatedJitter{s: newShape(c.Base, c.Cap, c.Multiplier, c.MaxHint, c.Multiplier-1)}
	default: // PolicyGRPC; WithDefaults rejected every other name.
		return &GRPC{
			s:          newShape(c.Base, c.Cap, c.Multiplier, c.MaxHint, 2*c.Jitter),
			jitter:     c.Jitter,
			minConnect: c.MinConnectTimeout,
		}
	}
}

// Parse returns the named policy with its default parameters, so a scenario
// file or a caller can write Parse("decorrelated").
func Parse(name string) (Policy, error) {
	if name == "" {
		return nil, fmt.Errorf("backoff: empty policy name (want one of %s)", strings.Join(Names(), ", "))
	}
	return New(Config{Policy: name})
}
