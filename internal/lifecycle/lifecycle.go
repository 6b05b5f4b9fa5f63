// Package lifecycle runs the parts of a corral process (a server, its admin
// listener, a health checker) together: they start at once, and when the
// context ends (SIGINT or SIGTERM in the binary) or one part fails, every
// part is shut down within a grace period, one after the other in reverse
// order of the list. A server lists its admin listener first, so that the
// admin listener stops last: /readyz answers 503 and /metrics answers for
// the whole of the server's drain.
//
// The package imports nothing of corral.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Part is anything shaped like a corral server: Run blocks until the part
// stops, Shutdown asks it to stop gracefully within ctx.
type Part interface {
	Run(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// Stopper is a Part that wants to know when the shutdown begins, before any
// part's Shutdown is called: the admin listener turns /readyz to 503 then,
// whatever the server's own readiness says.
type Stopper interface {
	Stopping()
}

// Named labels a Part for logs and errors.
type Named struct {
	Name string
	Part Part
}

// Run starts every part and blocks until all have returned. When ctx ends
// or any part returns (with or without an error), every part that is a
// Stopper is told, then the parts are shut down one at a time in reverse
// order of the list (the first part listed stops last, after every other
// Shutdown has returned), all within grace, after which their Run contexts
// are cancelled. Run returns the errors of the parts, each prefixed with its
// name; a clean stop returns nil.
func Run(ctx context.Context, log *slog.Logger, grace time.Duration, parts ...Named) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()

	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(parts))
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- result{p.Name, p.Part.Run(runCtx)}
		}()
	}

	var errs []error
	pending := len(parts)
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case r := <-results:
		pending--
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, r.err))
			log.Error("part failed, shutting down", "part", r.name, "err", r.err)
		} else {
			log.Info("part stopped, shutting down", "part", r.name)
		}
	}

	for _, p := range parts {
		if s, ok := p.Part.(Stopper); ok {
			s.Stopping()
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for i := len(parts) - 1; i >= 0; i-- {
		if err := parts[i].Part.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("shutdown", "part", parts[i].Name, "err", err)
		}
	}
	cancelRun()
	for ; pending > 0; pending-- {
		if r := <-results; r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, r.err))
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Every calls f each period until ctx ends, the first time one period
// after the call; a call of f that outlasts a period delays the next
// (ticks are dropped, not queued). It is the periodic loop of a server's
// background work (health, dedupe windows, session timers, load samples).
func Every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}
