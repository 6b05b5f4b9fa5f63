package limit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Common holds the settings every adaptive Limit shares. A zero field takes
// the default written next to it.
type Common struct {
	// InitialLimit is the limit before any sample. Default 20.
	InitialLimit int `yaml:"initial_limit"`
	// MinLimit is the floor of the limit. Default 1.
	MinLimit int `yaml:"min_limit"`
	// MaxLimit is the ceiling of the limit. Default 10,000; at most 1<<30.
	MaxLimit int `yaml:"max_limit"`
	// Window is the measurement window: the limit changes at most once per
	// window. Default 500 ms.
	Window time.Duration `yaml:"window"`
	// MinSamples is the sample weight (successes and drops) a window needs
	// before it closes, however long that takes: fewer are no evidence to
	// move the limit on. Default 10.
	MinSamples int `yaml:"min_samples"`
	// Percentile is the latency percentile measured per window. Default 0.99.
	Percentile float64 `yaml:"percentile"`
	// AppLimitRatio: a window whose peak in-flight stays below this
	// fraction of the limit is app-limited: it neither raises the limit
	// (an idle limit does not creep up) nor lowers it (its slow latencies
	// or drops are not the limit's doing), and a limit below InitialLimit
	// returns toward it. Default 0.5.
	AppLimitRatio float64 `yaml:"app_limit_ratio"`
	// DropRatio multiplies the limit after a window with dropped work.
	// Default 0.9.
	DropRatio float64 `yaml:"drop_ratio"`
}

// maxLimitCeiling keeps limits inside the 32 bits the Limiter packs them in.
const maxLimitCeiling = 1 << 30

func (c Common) withDefaults() Common {
	def(&c.InitialLimit, 20)
	def(&c.MinLimit, 1)
	def(&c.MaxLimit, 10_000)
	def(&c.Window, 500*time.Millisecond)
	def(&c.MinSamples, 10)
	def(&c.Percentile, 0.99)
	def(&c.AppLimitRatio, 0.5)
	def(&c.DropRatio, 0.9)
	return c
}

func (c Common) validate(name string) error {
	switch {
	case c.MinLimit < 1:
		return fmt.Errorf("limit: %s: min_limit %d below 1", name, c.MinLimit)
	case c.MaxLimit > maxLimitCeiling:
		return fmt.Errorf("limit: %s: max_limit %d above %d", name, c.MaxLimit, maxLimitCeiling)
	case c.MaxLimit < c.MinLimit:
		return fmt.Errorf("limit: %s: max_limit %d below min_limit %d", name, c.MaxLimit, c.MinLimit)
	case c.InitialLimit < c.MinLimit || c.InitialLimit > c.MaxLimit:
		return fmt.Errorf("limit: %s: initial_limit %d outside [%d, %d]", name, c.InitialLimit, c.MinLimit, c.MaxLimit)
	case c.Window <= 0:
		return fmt.Errorf("limit: %s: window %v not positive", name, c.Window)
	case c.MinSamples < 1:
		return fmt.Errorf("limit: %s: min_samples %d below 1", name, c.MinSamples)
	}
	if err := ratio(name, "percentile", c.Percentile, false); err != nil {
		return err
	}
	if err := ratio(name, "app_limit_ratio", c.AppLimitRatio, true); err != nil {
		return err
	}
	return ratio(name, "drop_ratio", c.DropRatio, false)
}

// ProbeConfig schedules baseline probes: every Interval (jittered to
// [0.5, 1.5) x Interval) the limit drops to Ratio x limit for two windows,
// one to drain the queue and one to measure the ideal latency again. A probe that
// still finds a queue (its latency fell by more than a tenth, so the limit
// was above the knee by more than Ratio) makes the next probe deeper, down
// to 0.25 x limit; one that finds none resets the depth to Ratio.
type ProbeConfig struct {
	// Interval between probes. Default 5 s; negative disables probing.
	Interval time.Duration `yaml:"interval"`
	// Ratio of the limit kept during a probe window. Default 0.75.
	Ratio float64 `yaml:"ratio"`
}

// IdealConfig says how the ideal (no-queueing) latency is estimated: the
// Percentile of the per-window latencies of the last Windows windows.
type IdealConfig struct {
	// Percentile over the recent windows. Default 0.05 (the second lowest
	// of 30), so one lucky window cannot set the ideal.
	Percentile float64 `yaml:"percentile"`
	// Windows is how many recent windows are kept. Default 30.
	Windows int `yaml:"windows"`
	// Probe schedules the re-measurement of the ideal.
	Probe ProbeConfig `yaml:"probe"`
}

func (c IdealConfig) withDefaults() IdealConfig {
	def(&c.Percentile, 0.05)
	def(&c.Windows, 30)
	def(&c.Probe.Interval, 5*time.Second)
	def(&c.Probe.Ratio, 0.75)
	return c
}

func (c IdealConfig) validate(name string) error {
	if c.Windows < 1 || c.Windows > 10_000 {
		return fmt.Errorf("limit: %s: ideal windows %d outside [1, 10000]", name, c.Windows)
	}
	if err := ratio(name, "ideal percentile", c.Percentile, true); err != nil {
		return err
	}
	return ratio(name, "probe ratio", c.Probe.Ratio, false)
}

// GradientConfig configures a Gradient limit. The zero value is valid and
// takes every default.
type GradientConfig struct {
	Common `yaml:",inline"`
	// QueueSize is the headroom added to limit x gradient each window.
	// Default 4.
	QueueSize int `yaml:"queue_size"`
	// MinGradient bounds how fast the limit falls in one window.
	// Default 0.5.
	MinGradient float64 `yaml:"min_gradient"`
	// Tolerance is how far the measured latency may exceed the ideal
	// before the limit is cut: gradient = min(1, Tolerance x ideal / rtt).
	// Default 1.0.
	Tolerance float64 `yaml:"tolerance"`
	// Ideal configures the ideal-latency estimate and its probes.
	Ideal IdealConfig `yaml:"ideal"`
	// Seed seeds the probe jitter, so simulations are reproducible.
	Seed uint64 `yaml:"seed"`
}

// Validate reports the first bad setting after defaults are applied.
func (c GradientConfig) Validate() error {
	c = c.withDefaults()
	if err := c.Common.validate("gradient"); err != nil {
		return err
	}
	if err := c.Ideal.validate("gradient"); err != nil {
		return err
	}
	if c.QueueSize < 0 {
		return fmt.Errorf("limit: gradient: queue_size %d negative", c.QueueSize)
	}
	if err := ratio("gradient", "min_gradient", c.MinGradient, false); err != nil {
		return err
	}
	if c.Tolerance < 1 || c.Tolerance > 10 || math.IsNaN(c.Tolerance) {
		return fmt.Errorf("limit: gradient: tolerance %v outside [1, 10]", c.Tolerance)
	}
	return nil
}

func (c GradientConfig) withDefaults() GradientConfig {
	c.Common = c.Common.withDefaults()
	c.Ideal = c.Ideal.withDefaults()
	def(&c.QueueSize, 4)
	def(&c.MinGradient, 0.5)
	def(&c.Tolerance, 1.0)
	return c
}

// Gradient2Config configures a Gradient2 limit (Netflix semantics). The
// zero value is valid and takes every default.
type Gradient2Config struct {
	Common `yaml:",inline"`
	// QueueSize is the headroom added each window. Default 4.
	QueueSize int `yaml:"queue_size"`
	// Tolerance is how far the short-term latency may exceed the long-term
	// average before the limit is cut. Default 1.5.
	Tolerance float64 `yaml:"tolerance"`
	// Smoothing weighs the new limit against the old one. Default 0.2.
	Smoothing float64 `yaml:"smoothing"`
	// LongWindows is the span, in windows, of the long-term exponential
	// average. Default 100.
	LongWindows int `yaml:"long_windows"`
}

// Validate reports the first bad setting after defaults are applied.
func (c Gradient2Config) Validate() error {
	c = c.withDefaults()
	if err := c.Common.validate("gradient2"); err != nil {
		return err
	}
	if c.QueueSize < 0 {
		return fmt.Errorf("limit: gradient2: queue_size %d negative", c.QueueSize)
	}
	if c.Tolerance < 1 || c.Tolerance > 10 || math.IsNaN(c.Tolerance) {
		return fmt.Errorf("limit: gradient2: tolerance %v outside [1, 10]", c.Tolerance)
	}
	if c.LongWindows < 2 {
		return fmt.Errorf("limit: gradient2: long_windows %d below 2", c.LongWindows)
	}
	return ratio("gradient2", "smoothing", c.Smoothing, false)
}

func (c Gradient2Config) withDefaults() Gradient2Config {
	c.Common = c.Common.withDefaults()
	def(&c.QueueSize, 4)
	def(&c.Tolerance, 1.5)
	def(&c.Smoothing, 0.2)
	def(&c.LongWindows, 100)
	return c
}

// VegasConfig configures a Vegas limit. The zero value is valid and takes
// every default.
type VegasConfig struct {
	Common `yaml:",inline"`
	// Ideal configures the ideal-latency estimate and its probes.
	Ideal IdealConfig `yaml:"ideal"`
	// Seed seeds the probe jitter.
	Seed uint64 `yaml:"seed"`
}

// Validate reports the first bad setting after defaults are applied.
func (c VegasConfig) Validate() error {
	c = c.withDefaults()
	if err := c.Common.validate("vegas"); err != nil {
		return err
	}
	return c.Ideal.validate("vegas")
}

func (c VegasConfig) withDefaults() VegasConfig {
	c.Common = c.Common.withDefaults()
	c.Ideal = c.Ideal.withDefaults()
	return c
}

// AIMDConfig configures an AIMD limit. The zero value is valid and takes
// every default.
type AIMDConfig struct {
	Common `yaml:",inline"`
	// Timeout: a window whose latency percentile exceeds it counts as
	// congested. Default 1 s.
	Timeout time.Duration `yaml:"timeout"`
	// Increase is added per uncongested, saturated window once slow start
	// is over. Default 1.
	Increase int `yaml:"increase"`
	// BackoffRatio multiplies the limit after a congested window.
	// Default 0.9.
	BackoffRatio float64 `yaml:"backoff_ratio"`
}

// Validate reports the first bad setting after defaults are applied.
func (c AIMDConfig) Validate() error {
	c = c.withDefaults()
	if err := c.Common.validate("aimd"); err != nil {
		return err
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("limit: aimd: timeout %v not positive", c.Timeout)
	}
	if c.Increase < 1 {
		return fmt.Errorf("limit: aimd: increase %d below 1", c.Increase)
	}
	return ratio("aimd", "backoff_ratio", c.BackoffRatio, false)
}

func (c AIMDConfig) withDefaults() AIMDConfig {
	c.Common = c.Common.withDefaults()
	def(&c.Timeout, time.Second)
	def(&c.Increase, 1)
	def(&c.BackoffRatio, 0.9)
	return c
}

// ratio checks that v is in (0, 1], or [0, 1] when zeroOK.
func ratio(name, field string, v float64, zeroOK bool) error {
	if math.IsNaN(v) || v > 1 || v < 0 || (v == 0 && !zeroOK) {
		return fmt.Errorf("limit: %s: %s %v outside (0, 1]", name, field, v)
	}
	return nil
}

// def sets *p to d when *p is the zero value.
func def[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// LimiterConfig configures a Limiter. The zero value is valid: a Gradient
// limit with defaults, the system clock, a 20 ms flush interval.
type LimiterConfig struct {
	// Limit is the algorithm. Nil means NewGradient(GradientConfig{}).
	// Give each Limiter its own Limit: two Limiters feeding one Limit
	// would mix their windows.
	Limit Limit `yaml:"-"`
	// Clock is the time source. Nil means the system clock.
	Clock Clock `yaml:"-"`
	// FlushInterval is how often measured latencies are fed to the Limit
	// (and the limit read back). Default 20 ms.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// SamplesPerFlush is how many tokens per flush interval are timed at
	// high rates. Default 64.
	SamplesPerFlush int `yaml:"samples_per_flush"`
	// TimeEvery times every token (two clock reads per token).
	TimeEvery bool `yaml:"time_every"`
	// Reserve is the least share of the limit kept for higher priorities
	// (see TryAcquirePriority).
	Reserve Reserve `yaml:"reserve"`
	// Queue is the waiting room of AcquireOrWait; none by default.
	Queue QueueConfig `yaml:"queue"`
	// Retry shapes the hints of RetryAfter (min 1 s, max 5 min, spread
	// 0.1: the virtual queue's places spread a refused herd already).
	Retry RetryConfig `yaml:"retry"`
	// ClientSpread is the spread of the refused clients' returns above
	// their place in the virtual queue, as a share of it. 0, the default:
	// the clients draw within the window RetryWindow hands out (corral's
	// clients, given wire's retry_within_ms), so the spread is
	// Retry.Spread; 1: clients that get a point hint and add full
	// jitter's [h, 2h] above it (package backoff's HintDelay); negative:
	// clients that come back at the hint exactly. The places are handed
	// out faster by that much, so the refused come back at the node's
	// rate.
	ClientSpread float64 `yaml:"client_spread"`
	// Rand is the random source of RetryAfter's jitter. Nil means an
	// internal SplitMix64 seeded with Seed.
	Rand rand.Source `yaml:"-"`
	// Seed seeds the internal random source when Rand is nil.
	Seed uint64 `yaml:"seed"`
}

// QueueConfig is a Limiter's waiting room (AcquireOrWait): work that
// finds no slot waits for one, highest priority first, instead of being
// refused at once.
type QueueConfig struct {
	// MaxWait is the longest a request waits for a slot before it is
	// refused. Zero or negative: no waiting room (every acquisition is a
	// try).
	MaxWait time.Duration `yaml:"max_wait"`
	// Max is how many requests may wait at once; one more is refused at
	// once. Default 10,000 (with MaxWait).
	Max int `yaml:"max"`
}

// Reserve is the least fraction of the limit that lower priorities may not
// use. Zero fields take the defaults.
type Reserve struct {
	// P0 is kept from P1 and P2. Default 0.05.
	P0 float64 `yaml:"p0"`
	// P1 is kept from P2 (in addition to P0's). Default 0.05.
	P1 float64 `yaml:"p1"`
}

func (r Reserve) withDefaults() Reserve {
	def(&r.P0, 0.05)
	def(&r.P1, 0.05)
	return r
}

// Validate reports the first bad setting after defaults are applied.
func (c LimiterConfig) Validate() error {
	if c.FlushInterval < 0 {
		return fmt.Errorf("limit: limiter: flush_interval %v negative", c.FlushInterval)
	}
	if c.SamplesPerFlush < 0 {
		return fmt.Errorf("limit: limiter: samples_per_flush %d negative", c.SamplesPerFlush)
	}
	r := c.Reserve.withDefaults()
	if math.IsNaN(r.P0) || math.IsNaN(r.P1) || r.P0 < 0 || r.P1 < 0 || r.P0+r.P1 >= 1 {
		return fmt.Errorf("limit: limiter: reserves p0 %v and p1 %v must be >= 0 and sum below 1", r.P0, r.P1)
	}
	if c.Queue.Max < 0 {
		return fmt.Errorf("limit: limiter: queue max %d negative", c.Queue.Max)
	}
	return c.Retry.withDefaults().validate("limiter")
}

func (c RetryConfig) withDefaults() RetryConfig {
	def(&c.Min, time.Second)
	def(&c.Max, 5*time.Minute)
	def(&c.Spread, 1)
	return c
}

func (c RetryConfig) validate(name string) error {
	switch {
	case c.Min <= 0 || c.Max < c.Min:
		return fmt.Errorf("limit: %s: retry min %v and max %v: need 0 < min <= max", name, c.Min, c.Max)
	case !(c.Spread >= 0) || c.Spread > 10:
		return fmt.Errorf("limit: %s: retry spread %v out of range", name, c.Spread)
	}
	return nil
}

func (c LimiterConfig) withDefaults() (LimiterConfig, error) {
	def(&c.FlushInterval, 20*time.Millisecond)
	def(&c.SamplesPerFlush, 64)
	c.Reserve = c.Reserve.withDefaults()
	def(&c.Retry.Spread, 0.1)
	c.Retry = c.Retry.withDefaults()
	if c.Queue.MaxWait > 0 {
		def(&c.Queue.Max, 10_000)
	}
	if c.Limit == nil {
		g, err := NewGradient(GradientConfig{})
		if err != nil {
			return c, err
		}
		c.Limit = g
	}
	return c, nil
}

// ShedderConfig configures a Shedder. The zero value is valid and takes
// every default.
type ShedderConfig struct {
	// Clock is the time source for the methods without an explicit time.
	// Nil means the system clock.
	Clock Clock `yaml:"-"`
	// Target is the latency target: the stage rises while the observed
	// latency percentile is above it. Default 100 ms.
	Target time.Duration `yaml:"target"`
	// Percentile of the observed latencies compared with Target.
	// Default 0.99.
	Percentile float64 `yaml:"percentile"`
	// StepDownRatio: the stage falls only while the latency percentile is
	// at most StepDownRatio x Target (hysteresis). Default 0.7.
	StepDownRatio float64 `yaml:"step_down_ratio"`
	// EvalInterval is how often the stage is evaluated, over the latencies
	// observed since the previous evaluation. Default 500 ms.
	EvalInterval time.Duration `yaml:"eval_interval"`
	// MinSamples is the number of latencies an interval needs for its
	// percentile to count; fewer count as no latency pressure. Default 10.
	MinSamples int `yaml:"min_samples"`
	// LatencyCeiling is the highest stage that latency alone raises the
	// stage to; resource pressure takes it beyond, and once resources are
	// calm it falls back to the ceiling (after FallDwell per stage) however
	// slow the latencies still are. A node whose latency is mostly
	// another's (an edge, whose handshakes wait for an origin) sets
	// sever-p1 so that a slow origin never refuses P0 there. The zero
	// value (normal) takes the default: lifeboat, no ceiling.
	LatencyCeiling Stage `yaml:"latency_ceiling"`
	// RiseDwell is the least time in a stage before it rises. Default 1 s.
	RiseDwell time.Duration `yaml:"rise_dwell"`
	// FallDwell is how long a calm takes a stage down: a reject stage's
	// re-admitted share grows from 0 to 1 over it, a severing stage waits
	// it out. It doubles (up to MaxFallDwell) each time the stage has to
	// rise again soon after falling, so a steady overload does not flap,
	// and each 2 x FallDwell of unbroken calm halves it back. Default 10 s.
	FallDwell time.Duration `yaml:"fall_dwell"`
	// MaxFallDwell caps the doubled FallDwell. Default 5 min.
	MaxFallDwell time.Duration `yaml:"max_fall_dwell"`
	// Resources sets the resource ceilings.
	Resources ResourceConfig `yaml:"resources"`
	// SeverRate is how many sessions per second SeverQuota hands out at
	// most (burst SeverRate/10, at least 1). Default 100.
	SeverRate float64 `yaml:"sever_rate"`
	// EmergencySeverRate replaces SeverRate during a resource emergency.
	// Default 5 x SeverRate.
	EmergencySeverRate float64 `yaml:"emergency_sever_rate"`
	// Retry shapes the retry-after hints.
	Retry RetryConfig `yaml:"retry"`
	// Rand is the random source for retry jitter. Nil means an internal
	// SplitMix64 seeded with Seed, which is lock-free and reproducible.
	Rand rand.Source `yaml:"-"`
	// Seed seeds the internal random source when Rand is nil.
	Seed uint64 `yaml:"seed"`
}

// ResourceConfig holds the hard resource ceilings. Pressure is the highest
// of heap / MaxHeap and fds / MaxFDs; at or above High it counts as
// overload, below Low as calm, and at 1 (a ceiling reached) it is a hard
// emergency: the stage jumps to lifeboat and existing P0 may be severed.
type ResourceConfig struct {
	// MaxHeap in bytes. Zero means no heap ceiling.
	MaxHeap uint64 `yaml:"max_heap"`
	// MaxFDs is the file descriptor ceiling. Zero means none.
	MaxFDs int `yaml:"max_fds"`
	// High pressure counts as overload. Default 0.9.
	High float64 `yaml:"high"`
	// Low pressure counts as calm. Default 0.8.
	Low float64 `yaml:"low"`
}

// RetryConfig shapes retry-after hints. A hint is drawn uniformly from
// [e, e x (1 + Spread)), where e is the recovery estimate clamped to
// [Min, Max].
type RetryConfig struct {
	// Min is the least estimate. Default 1 s.
	Min time.Duration `yaml:"min"`
	// Max is the largest estimate. Default 5 min.
	Max time.Duration `yaml:"max"`
	// Spread is the jitter width relative to the estimate. Default 1.
	Spread float64 `yaml:"spread"`
}

// Validate reports the first bad setting after defaults are applied.
func (c ShedderConfig) Validate() error {
	c = c.withDefaults()
	bad := func(f string, v any) error { return fmt.Errorf("limit: shedder: %s %v out of range", f, v) }
	switch {
	case c.Target <= 0:
		return bad("target", c.Target)
	case c.EvalInterval <= 0:
		return bad("eval_interval", c.EvalInterval)
	case c.MinSamples < 1:
		return bad("min_samples", c.MinSamples)
	case c.LatencyCeiling >= NumStages:
		return bad("latency_ceiling", c.LatencyCeiling)
	case c.RiseDwell < 0:
		return bad("rise_dwell", c.RiseDwell)
	case c.FallDwell < 0:
		return bad("fall_dwell", c.FallDwell)
	case c.MaxFallDwell < c.FallDwell:
		return fmt.Errorf("limit: shedder: max_fall_dwell %v below fall_dwell %v", c.MaxFallDwell, c.FallDwell)
	case c.Resources.MaxFDs < 0:
		return bad("max_fds", c.Resources.MaxFDs)
	case !(c.SeverRate > 0) || math.IsInf(c.SeverRate, 0):
		return bad("sever_rate", c.SeverRate)
	case !(c.EmergencySeverRate > 0) || math.IsInf(c.EmergencySeverRate, 0):
		return bad("emergency_sever_rate", c.EmergencySeverRate)
	case !(c.Resources.Low < c.Resources.High):
		return fmt.Errorf("limit: shedder: resources low %v not below high %v", c.Resources.Low, c.Resources.High)
	}
	if err := c.Retry.validate("shedder"); err != nil {
		return err
	}
	for _, r := range []struct {
		f string
		v float64
	}{{"percentile", c.Percentile}, {"step_down_ratio", c.StepDownRatio}, {"resources high", c.Resources.High}, {"resources low", c.Resources.Low}} {
		if err := ratio("shedder", r.f, r.v, false); err != nil {
			return err
		}
	}
	return nil
}

func (c ShedderConfig) withDefaults() ShedderConfig {
	def(&c.Target, 100*time.Millisecond)
	def(&c.Percentile, 0.99)
	def(&c.StepDownRatio, 0.7)
	def(&c.EvalInterval, 500*time.Millisecond)
	def(&c.MinSamples, 10)
	def(&c.RiseDwell, time.Second)
	def(&c.FallDwell, 10*time.Second)
	def(&c.MaxFallDwell, 5*time.Minute)
	def(&c.Resources.High, 0.9)
	def(&c.Resources.Low, 0.8)
	def(&c.SeverRate, 100)
	def(&c.EmergencySeverRate, 5*c.SeverRate)
	c.Retry = c.Retry.withDefaults()
	return c
}
