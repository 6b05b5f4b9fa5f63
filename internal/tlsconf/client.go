package tlsconf

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/tlssession"
)

// ClientConfig is the TLS of a client of corral's servers: the edge's
// Relay streams to the hubs. TLS is on when Enabled; zero fields take
// their defaults.
type ClientConfig struct {
	// Enabled turns TLS on. The other fields need it.
	Enabled bool `yaml:"enabled"`
	// CAFile is the PEM CA certificates that a server's certificate must
	// chain to. Empty: the system's roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name a server's certificate must hold (and the
	// SNI sent). Empty: the name the caller passes to Config.
	ServerName string `yaml:"server_name"`
	// CertFile and KeyFile are the client's own certificate chain and key
	// (PEM), presented when a server asks for one (mutual TLS). Both or
	// neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// MinVersion is the oldest TLS version offered: "1.3" (default) or
	// "1.2".
	MinVersion string `yaml:"min_version"`
	// ReloadInterval is how often the files are checked for a change; a
	// changed, valid set is used by the next handshakes, an invalid one
	// is logged and counted and the old set kept. Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Validate checks the fields without reading the files (Client.Load reads
// them); the errors name the key.
func (c ClientConfig) Validate() error {
	if !c.Enabled {
		for _, f := range []struct{ key, v string }{{"ca_file", c.CAFile}, {"server_name", c.ServerName},
			{"cert_file", c.CertFile}, {"key_file", c.KeyFile}, {"min_version", c.MinVersion}} {
			if f.v != "" {
				return config.Errorf(f.key, "tlsconf: set with enabled: true only (TLS is off)")
			}
		}
		if c.ReloadInterval != 0 {
			return config.Errorf("reload_interval", "tlsconf: set with enabled: true only (TLS is off)")
		}
		return nil
	}
	if c.CertFile != "" && c.KeyFile == "" {
		return config.Errorf("key_file", "tlsconf: a client certificate (cert_file) needs its key_file")
	}
	if c.KeyFile != "" && c.CertFile == "" {
		return config.Errorf("cert_file", "tlsconf: a client key (key_file) needs its cert_file")
	}
	if _, err := minVersion(c.MinVersion); err != nil {
		return config.Field("min_version", err)
	}
	if c.ReloadInterval < 0 {
		return config.Errorf("reload_interval", "tlsconf: must not be negative, got %v", c.ReloadInterval)
	}
	return nil
}

// Client holds the TLS state of the client side of one process: the CA
// pool that verifies servers and the optional client certificate, read
// from files and replaced when they change, and a session cache so that
// reconnections resume. Config gives a *tls.Config per server; its
// handshakes always use the current files, so a reload never touches an
// open connection. Create it with NewClient, Load the files, then Run it
// for the reloads. Its methods are safe for concurrent use.
type Client struct {
	cfg     ClientConfig
	version uint16
	log     *slog.Logger
	cache   tls.ClientSessionCache

	state atomic.Pointer[clientState]

	handshakes *prometheus.CounterVec // kind: full, resumed, rejected
	reloads    *prometheus.CounterVec // result: ok, error
	expiry     prometheus.Gauge

	mu     sync.Mutex // guards the fields below
	seen   [3]fileStamp
	loaded bool
}

// clientState is one loaded set of files.
type clientState struct {
	roots *x509.CertPool   // nil: the system's roots
	cert  *tls.Certificate // nil: no client certificate
}

// NewClient checks cfg and returns a Client with its metrics registered
// (Options.MetricPrefix starts their names). It reads no file: call Load
// before the first handshake.
func NewClient(cfg ClientConfig, opts Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return nil, errors.New("tlsconf: client TLS is not enabled")
	}
	cfg.ReloadInterval = cmp.Or(cfg.ReloadInterval, DefaultReloadInterval)
	v, _ := minVersion(cfg.MinVersion)
	c := &Client{cfg: cfg, version: v, log: opts.Logger, cache: tlssession.NewCache(256)}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	prefix := cmp.Or(opts.MetricPrefix, "corral_tls_client")
	c.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_handshakes_total",
		Help: "TLS handshakes with servers, by kind: full, resumed with a session ticket, or rejected (the server's certificate failed verification)."}, []string{"kind"})
	c.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_reloads_total",
		Help: "Loads of the CA and client certificate files, by result: ok, or error (the previous set is still used)."}, []string{"result"})
	c.expiry = prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "_certificate_expiry_timestamp_seconds",
		Help: "When the client certificate expires (its NotAfter), in Unix seconds; 0 without one."})
	for _, k := range []string{"full", "resumed", "rejected"} {
		c.handshakes.WithLabelValues(k)
	}
	c.reloads.WithLabelValues("ok")
	c.reloads.WithLabelValues("error")
	if opts.Registerer != nil {
		for _, m := range []prometheus.Collector{c.handshakes, c.reloads, c.expiry} {
			if err := opts.Registerer.Register(m); err != nil {
				return nil, errors.New("tlsconf: metrics: " + err.Error())
			}
		}
	}
	return c, nil
}

// Config returns the configuration of connections to the server at addr
// (host:port): its certificate must chain to the current CAs and hold the
// configured server_name, or name when server_name is empty (a DNS name
// or an IP address). The client certificate, when configured, is the
// current one. Reconnections to addr resume through the Client's session
// cache, whose entries are per address: crypto/tls keys them by server
// name, which servers behind one DNS name share while each process seals
// tickets with keys of its own, so one entry per name would hand each
// server the last other one's ticket. The value may be cloned (grpc's
// credentials.NewTLS does) and stays current.
func (c *Client) Config(addr, name string) *tls.Config {
	name = cmp.Or(c.cfg.ServerName, name)
	return &tls.Config{
		MinVersion:         c.version,
		ServerName:         name,
		ClientSessionCache: tlssession.PerAddress(c.cache, addr),
		// The chain is verified by verify against the CAs loaded now, so
		// that a changed ca_file applies without a restart: crypto/tls's
		// own check would keep the pool of this value (and of every copy
		// of it) for ever. verify runs on resumed handshakes too.
		InsecureSkipVerify:   true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection:     func(cs tls.ConnectionState) error { return c.verify(name, cs) },
		GetClientCertificate: c.clientCertificate,
	}
}

// verify checks the server's chain against the current CAs and name.
func (c *Client) verify(name string, cs tls.ConnectionState) error {
	st := c.state.Load()
	if st == nil {
		return errors.New("tlsconf: no CA loaded")
	}
	if len(cs.PeerCertificates) == 0 {
		c.handshakes.WithLabelValues("rejected").Inc()
		return fmt.Errorf("tlsconf: %s sent no certificate", name)
	}
	opts := x509.VerifyOptions{Roots: st.roots, DNSName: name, Intermediates: x509.NewCertPool()}
	for _, ic := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		c.handshakes.WithLabelValues("rejected").Inc()
		trust := "the system's roots"
		if c.cfg.CAFile != "" {
			trust = "ca_file " + c.cfg.CAFile
		}
		err = fmt.Errorf("tlsconf: the certificate of %s is not trusted (checked against %s): %w", name, trust, err)
		c.log.Error("tls: server certificate rejected", "server_name", name, "err", err)
		return err
	}
	if cs.DidResume {
		c.handshakes.WithLabelValues("resumed").Inc()
	} else {
		c.handshakes.WithLabelValues("full").Inc()
	}
	return nil
}

func (c *Client) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if st := c.state.Load(); st != nil && st.cert != nil {
		return st.cert, nil
	}
	// None: the server decides. A server that requires one ends the
	// connection after the handshake, which the caller sees as a broken
	// connection (in TLS 1.3 the client's handshake is over by then), so
	// the log says what happened.
	c.log.Warn("tls: the server asked for a client certificate and none is configured (cert_file, key_file); a server that requires one refuses the connection")
	return &tls.Certificate{}, nil
}

// Load reads the files now. A valid set replaces the one used (for the
// next handshakes); an invalid one is logged and counted, and the one
// used stays. The error names the key and the file.
func (c *Client) Load() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loadLocked(stampFiles(c.cfg.CAFile, c.cfg.CertFile, c.cfg.KeyFile))
}

// Check loads the files again if one changed (size or modification time)
// since they were last read, and returns Load's error; nil when nothing
// changed. Run calls it every reload_interval.
func (c *Client) Check() error {
	st := stampFiles(c.cfg.CAFile, c.cfg.CertFile, c.cfg.KeyFile)
	c.mu.Lock()
	defer c.mu.Unlock()
	if st == c.seen {
		return nil
	}
	return c.loadLocked(st)
}

func (c *Client) loadLocked(st [3]fileStamp) error {
	c.seen = st // also on failure: a broken set is read again once it changes
	next, err := c.read()
	if err != nil {
		c.reloads.WithLabelValues("error").Inc()
		if c.loaded {
			c.log.Error("tls client reload failed; the previous files are still used", "err", err)
		}
		return err
	}
	c.state.Store(next)
	c.reloads.WithLabelValues("ok").Inc()
	if next.cert != nil {
		c.expiry.Set(float64(next.cert.Leaf.NotAfter.Unix()))
	}
	if c.loaded {
		c.log.Info("tls client files reloaded", "ca_file", c.cfg.CAFile, "cert_file", c.cfg.CertFile)
	}
	c.loaded = true
	return nil
}

// read reads and checks the files.
func (c *Client) read() (*clientState, error) {
	st := &clientState{}
	if c.cfg.CAFile != "" {
		b, err := os.ReadFile(c.cfg.CAFile)
		if err != nil {
			return nil, config.Errorf("ca_file", "tlsconf: %w", err)
		}
		st.roots = x509.NewCertPool()
		if !st.roots.AppendCertsFromPEM(b) {
			return nil, config.Errorf("ca_file", "tlsconf: %s holds no PEM certificate", c.cfg.CAFile)
		}
	}
	if c.cfg.CertFile != "" {
		cert, err := loadPair(c.cfg.CertFile, c.cfg.KeyFile)
		if err != nil {
			return nil, err
		}
		st.cert = cert
	}
	return st, nil
}

// Run checks the files every reload_interval until ctx ends; it returns
// nil then. It loads the files first when no Load has succeeded yet, and
// returns that error.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	loaded := c.loaded
	c.mu.Unlock()
	if !loaded {
		if err := c.Load(); err != nil {
			return err
		}
	}
	reload := time.NewTicker(c.cfg.ReloadInterval)
	defer reload.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reload.C:
			_ = c.Check() // logged and counted
		}
	}
}
