package client

import "github.com/corralhq/corral/backoff"

// WithRetryRand returns cfg with its reconnect delays drawn from r (a
// seeded generator, for tests).
func WithRetryRand(cfg Config, r backoff.Rand) Config {
	cfg.rand = r
	return cfg
}
