package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The hub's own series the measuring pass samples (hub/README.md,
// Metrics):
//
//   - welcomesMetric, the handshake histogram: one observation per Welcome
//     the hub sent, after its admission said yes, so its count is the
//     sessions the hub set up (admitted), whatever kraken has handled of
//     its side yet. Not corral_hub_sessions_opened_total: that counts the
//     connections accepted, before Hello, those the admission then refuses
//     included (at TestCalibrationSmall's stand-ins, most of them).
//   - openMetric, the open sessions after Welcome (every transport): its
//     fall is the hub seeing the drop, so it places the drop on the hub's
//     clock; it is not the measure (it mixes the hub's own teardown with
//     the return).
const (
	welcomesMetric = "corral_hub_handshake_duration_seconds"
	openMetric     = "corral_hub_sessions"
)

// Sample is one reading of a hub's metrics.
type Sample struct {
	// At is the time of the reading from the start of the sampling (the
	// middle of its request).
	At time.Duration `json:"at_ns"`
	// Welcomes is the sessions the hub has set up since it started (its
	// handshake histogram's count); Open the sessions it holds.
	Welcomes int64 `json:"welcomes"`
	Open     int64 `json:"open"`
}

// Samples are the readings of every hub of a run, taken every Every.
type Samples struct {
	Every time.Duration `json:"every_ns"`
	// Hubs holds each hub's readings in time order, by node id.
	Hubs map[string][]Sample `json:"hubs"`
	// Failed counts the readings of each hub that failed (none recorded).
	Failed map[string]int64 `json:"failed"`
}

// Source reads one hub's counts.
type Source interface {
	Read(ctx context.Context) (welcomes, open int64, err error)
}

// HTTPSource reads a hub's metrics page (its admin port's /metrics, the
// Prometheus text format).
type HTTPSource struct {
	URL    string
	Client *http.Client // nil: a client with a 2 s timeout
}

var defaultClient = &http.Client{Timeout: 2 * time.Second}

// Read fetches and parses the page.
func (s HTTPSource) Read(ctx context.Context) (int64, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("calibrate: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	c := s.Client
	if c == nil {
		c = defaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("calibrate: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, 0, fmt.Errorf("calibrate: %s: %s", s.URL, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("calibrate: %s: %w", s.URL, err)
	}
	return hubCounts(fams)
}

// GathererSource reads a hub's registry in process (as TestCalibrationSmall
// does).
type GathererSource struct{ Gatherer prometheus.Gatherer }

// Read gathers the registry.
func (s GathererSource) Read(context.Context) (int64, int64, error) {
	fs, err := s.Gatherer.Gather()
	if err != nil {
		return 0, 0, fmt.Errorf("calibrate: %w", err)
	}
	fams := make(map[string]*dto.MetricFamily, len(fs))
	for _, f := range fs {
		fams[f.GetName()] = f
	}
	return hubCounts(fams)
}

// hubCounts reads the Welcomes and the open sessions from a hub's metric
// families.
func hubCounts(fams map[string]*dto.MetricFamily) (welcomes, open int64, err error) {
	w, o := fams[welcomesMetric], fams[openMetric]
	if w == nil || o == nil || len(w.GetMetric()) == 0 || w.GetType() != dto.MetricType_HISTOGRAM {
		return 0, 0, fmt.Errorf("calibrate: no %s histogram and %s gauge: not a corral hub's metrics", welcomesMetric, openMetric)
	}
	for _, m := range w.GetMetric() {
		welcomes += int64(m.GetHistogram().GetSampleCount())
	}
	for _, m := range o.GetMetric() {
		open += int64(m.GetGauge().GetValue())
	}
	return welcomes, open, nil
}

// Sampler reads each hub's counts every Every until its context ends. The
// zero value samples nothing; Run is the method callers want.
type Sampler struct {
	Every time.Duration
	// Sources are the hubs to read, by node id (the names kraken's
	// per-origin series use, from Welcome.node_id).
	Sources map[string]Source
}

// Run samples until ctx ends, one goroutine per hub, each reading at
// once and then on every tick (a reading slower than Every skips the
// ticks it overran), and returns the readings. A hub none of whose
// readings succeeded is an error that names it.
func (s Sampler) Run(ctx context.Context) (*Samples, error) {
	if s.Every <= 0 {
		return nil, errors.New("calibrate: the sampling interval must be positive")
	}
	if len(s.Sources) == 0 {
		return nil, errors.New("calibrate: no hub to sample")
	}
	out := &Samples{Every: s.Every, Hubs: map[string][]Sample{}, Failed: map[string]int64{}}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = map[string]error{}
	)
	t0 := time.Now()
	for name, src := range s.Sources {
		wg.Go(func() {
			var got []Sample
			var failed int64
			var last error
			tick := time.NewTicker(s.Every)
			defer tick.Stop()
			for {
				start := time.Now()
				w, o, err := src.Read(ctx)
				end := time.Now()
				switch {
				case err == nil:
					mid := start.Add(end.Sub(start) / 2)
					got = append(got, Sample{At: mid.Sub(t0), Welcomes: w, Open: o})
				case ctx.Err() == nil:
					failed++
					last = err
				}
				select {
				case <-ctx.Done():
					mu.Lock()
					out.Hubs[name], out.Failed[name] = got, failed
					if len(got) == 0 {
						errs[name] = last
					}
					mu.Unlock()
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		name := slices.Min(slices.Collect(maps.Keys(errs)))
		err := errs[name]
		if err == nil {
			err = errors.New("none before the end")
		}
		return out, fmt.Errorf("calibrate: %s: no reading of its metrics succeeded: %w", name, err)
	}
	return out, nil
}
