package limit

// DefaultLimiterConfig returns a LimiterConfig with every default filled
// in, its Limit a new Gradient of its own (each Limiter needs its own).
func DefaultLimiterConfig() LimiterConfig {
	c, _ := LimiterConfig{}.withDefaults() // the zero GradientConfig is valid
	return c
}

// DefaultShedderConfig returns a ShedderConfig with every default filled
// in (a 100 ms target at the 99th percentile, and the rest as documented
// on each field).
func DefaultShedderConfig() ShedderConfig { return ShedderConfig{}.withDefaults() }
