package health

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Probe outcomes, the values of the outcome label of
// corral_health_check_results_total.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
	OutcomeTimeout = "timeout"
)

// metrics are the Prometheus series of a Checker.
type metrics struct {
	healthy     *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	results     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corral_health_check_healthy",
			Help: "State of a health check: 1 healthy, 0 unhealthy.",
		}, []string{"check"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_health_check_transitions_total",
			Help: "Changes of state of a health check, by the state entered.",
		}, []string{"check", "to"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_health_check_results_total",
			Help: "Probes of a health check, by outcome (success, failure, timeout).",
		}, []string{"check", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "corral_health_check_duration_seconds",
			Help:    "Time a probe took, by check kind.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.healthy, m.transitions, m.results, m.duration} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// add creates the series of a new check, so that they read 0 rather than
// being absent.
func (m *metrics) add(name string, healthy bool) {
	m.setState(name, healthy)
	for _, to := range []string{InitialHealthy, InitialUnhealthy} {
		m.transitions.WithLabelValues(name, to)
	}
	for _, o := range []string{OutcomeSuccess, OutcomeFailure, OutcomeTimeout} {
		m.results.WithLabelValues(name, o)
	}
}

// remove deletes the series of a check that left the configuration.
func (m *metrics) remove(name string) {
	l := prometheus.Labels{"check": name}
	m.healthy.DeletePartialMatch(l)
	m.transitions.DeletePartialMatch(l)
	m.results.DeletePartialMatch(l)
}

func (m *metrics) setState(name string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	m.healthy.WithLabelValues(name).Set(v)
}

func (m *metrics) transition(name string, healthy bool) {
	to := InitialUnhealthy
	if healthy {
		to = InitialHealthy
	}
	m.transitions.WithLabelValues(name, to).Inc()
	m.setState(name, healthy)
}
