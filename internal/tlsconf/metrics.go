package tlsconf

import (
	"cmp"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Server's Prometheus series, registered on the Registerer
// of Options.
type metrics struct {
	full, resumed prometheus.Counter
	reloads       *prometheus.CounterVec // result: ok, error
	expiry        prometheus.Gauge
	rotations     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, prefix string) (*metrics, error) {
	prefix = cmp.Or(prefix, "corral_tls")
	handshakes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_handshakes_total",
		Help: "TLS handshakes completed, by kind: full, or resumed with a session ticket."}, []string{"kind"})
	m := &metrics{
		full:    handshakes.WithLabelValues("full"),
		resumed: handshakes.WithLabelValues("resumed"),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_reloads_total",
			Help: "Loads of the certificate, key and client CA files, by result: ok, or error (the previous certificate is still served)."}, []string{"result"}),
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "_certificate_expiry_timestamp_seconds",
			Help: "When the certificate served expires (its NotAfter), in Unix seconds."}),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "_ticket_key_rotations_total",
			Help: "Session ticket key rotations."}),
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{handshakes, m.reloads, m.expiry, m.rotations} {
		if err := reg.Register(c); err != nil {
			return nil, errors.New("tlsconf: metrics: " + err.Error())
		}
	}
	return m, nil
}
