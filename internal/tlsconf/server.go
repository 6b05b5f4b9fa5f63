package tlsconf

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/internal/config"
)

// Options are the parts of a Server that are not configuration.
type Options struct {
	// Registerer receives the metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// MetricPrefix starts the metric names, for example "corral_hub_tls"
	// (default "corral_tls"), so that two servers of one process keep
	// apart.
	MetricPrefix string
	// Logger receives reloads, reload errors and rotations; nil discards
	// them.
	Logger *slog.Logger
}

// Server holds the TLS state of one server process: the certificate and
// key read from files and replaced when the files change, the client CA
// pool, and the session ticket keys, rotated. ServerConfig gives a
// *tls.Config for a listener; handshakes through it always use the
// current certificate and keys, so a reload or a rotation never touches
// an open connection. Create it with New, Load the files, then Run it
// for the reloads and rotations. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	version uint16
	log     *slog.Logger
	m       *metrics

	cert atomic.Pointer[tls.Certificate]

	mu        sync.Mutex // guards the fields below
	keys      [][32]byte // newest first
	clientCAs *x509.CertPool
	seen      [3]fileStamp // cert, key, client CA as last read
	loaded    bool
	listeners []*listenerConfig
}

// listenerConfig is the state behind one ServerConfig: the protocols it
// offers and the configuration of its next handshakes, replaced whole
// (never changed) when the keys rotate or the client CAs change.
type listenerConfig struct {
	protos []string
	cur    atomic.Pointer[tls.Config]
}

// fileStamp is what a poll compares: a file's size and modification time.
type fileStamp struct {
	size int64
	mod  time.Time
	err  bool // the file could not be read
}

// New checks cfg and returns a Server with fresh ticket keys and its
// metrics registered. It reads no file: call Load before the first
// handshake.
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("tlsconf: cert_file and key_file are not set")
	}
	cfg = cfg.WithDefaults()
	v, _ := minVersion(cfg.MinVersion)
	s := &Server{cfg: cfg, version: v, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer, opts.MetricPrefix)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.keys = [][32]byte{newTicketKey()}
	return s, nil
}

func newTicketKey() [32]byte {
	var k [32]byte
	_, _ = rand.Read(k[:]) // crypto/rand.Read never fails (Go 1.24)
	return k
}

// ServerConfig returns the configuration for a listener that offers the
// ALPN protocols protos ("h2" for gRPC, "http/1.1" for HTTP and
// WebSocket). Every handshake takes the Server's current certificate,
// client CAs and ticket keys: the returned value may be cloned (grpc's
// credentials.NewTLS does) and stays current.
func (s *Server) ServerConfig(protos ...string) *tls.Config {
	lc := &listenerConfig{protos: slices.Clone(protos)}
	s.mu.Lock()
	lc.cur.Store(s.handshakeConfigLocked(lc.protos))
	s.listeners = append(s.listeners, lc)
	s.mu.Unlock()
	return &tls.Config{
		MinVersion: s.version,
		NextProtos: slices.Clone(protos),
		// The configuration of each handshake is the listener's current
		// one; the fields above are only what a caller reading this
		// value sees.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return lc.cur.Load(), nil },
		GetCertificate:     s.getCertificate,
	}
}

// handshakeConfigLocked builds the configuration of the next handshakes
// of a listener; s.mu is held.
func (s *Server) handshakeConfigLocked(protos []string) *tls.Config {
	c := &tls.Config{
		MinVersion:       s.version,
		NextProtos:       protos,
		GetCertificate:   s.getCertificate,
		VerifyConnection: s.observe,
	}
	if s.clientCAs != nil {
		c.ClientCAs = s.clientCAs
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	c.SetSessionTicketKeys(s.keys)
	return c
}

// refreshLocked gives every listener a configuration with the current
// keys and client CAs; s.mu is held.
func (s *Server) refreshLocked() {
	for _, lc := range s.listeners {
		lc.cur.Store(s.handshakeConfigLocked(lc.protos))
	}
}

func (s *Server) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("tlsconf: no certificate loaded")
}

// observe counts a handshake that got to its end, full or resumed.
func (s *Server) observe(cs tls.ConnectionState) error {
	if cs.DidResume {
		s.m.resumed.Inc()
	} else {
		s.m.full.Inc()
	}
	return nil
}

// Certificate returns the certificate served now, nil before a Load
// succeeded.
func (s *Server) Certificate() *tls.Certificate { return s.cert.Load() }

// Load reads the certificate, the key and the client CAs now. A valid
// set replaces the one served (for the next handshakes); an invalid one
// is logged and counted, and the one served stays. The error names the
// key and the file.
func (s *Server) Load() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked(s.stamps())
}

// stamps returns the current stamps of the files.
func (s *Server) stamps() [3]fileStamp {
	return stampFiles(s.cfg.CertFile, s.cfg.KeyFile, s.cfg.ClientCAFile)
}

// stampFiles returns the current stamps of up to three files ("" for
// none).
func stampFiles(names ...string) [3]fileStamp {
	var st [3]fileStamp
	for i, name := range names[:min(len(names), len(st))] {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			st[i].err = true
			continue
		}
		st[i] = fileStamp{size: fi.Size(), mod: fi.ModTime()}
	}
	return st
}

func (s *Server) loadLocked(st [3]fileStamp) error {
	s.seen = st // also on failure: a broken pair is read again once it changes
	cert, pool, err := s.read()
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		if s.loaded {
			s.log.Error("tls reload failed; the previous certificate is still served", "err", err)
		}
		return err
	}
	s.cert.Store(cert)
	s.m.expiry.Set(float64(cert.Leaf.NotAfter.Unix()))
	s.m.reloads.WithLabelValues("ok").Inc()
	if s.loaded {
		s.log.Info("tls certificate reloaded", "cert_file", s.cfg.CertFile, "not_after", cert.Leaf.NotAfter)
	}
	s.loaded = true
	if pool != nil || s.clientCAs != nil {
		s.clientCAs = pool
		s.refreshLocked()
	}
	return nil
}

// read reads and checks the files.
func (s *Server) read() (*tls.Certificate, *x509.CertPool, error) {
	cert, err := loadPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return nil, nil, err
	}
	var pool *x509.CertPool
	if s.cfg.ClientCAFile != "" {
		b, err := os.ReadFile(s.cfg.ClientCAFile)
		if err != nil {
			return nil, nil, config.Errorf("client_ca_file", "tlsconf: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, nil, config.Errorf("client_ca_file", "tlsconf: %s holds no PEM certificate", s.cfg.ClientCAFile)
		}
	}
	return cert, pool, nil
}

// loadPair reads a certificate chain and its key, with the leaf parsed;
// the errors name the key and the files.
func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, config.Errorf("cert_file", "tlsconf: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, config.Errorf("key_file", "tlsconf: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, config.Errorf("key_file", "tlsconf: %s with %s: %v", keyFile, certFile, err)
	}
	if cert.Leaf == nil { // GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, config.Errorf("cert_file", "tlsconf: %s: %v", certFile, err)
		}
	}
	return &cert, nil
}

// Check loads the files again if one changed (size or modification time)
// since they were last read, and returns Load's error; nil when nothing
// changed. Run calls it every reload_interval.
func (s *Server) Check() error {
	st := s.stamps()
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == s.seen {
		return nil
	}
	return s.loadLocked(st)
}

// RotateTicketKeys makes a new session ticket key that seals the tickets
// issued from now on, and keeps the ticket_keys-1 newest previous ones to
// open older tickets. Run calls it every ticket_key_rotation.
func (s *Server) RotateTicketKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = slices.Insert(s.keys, 0, newTicketKey())
	s.keys = s.keys[:min(len(s.keys), s.cfg.TicketKeys)]
	s.refreshLocked()
	s.m.rotations.Inc()
	s.log.Debug("tls session ticket key rotated", "keys", len(s.keys))
}

// Run checks the files every reload_interval and rotates the ticket keys
// every ticket_key_rotation until ctx ends; it returns nil then. It loads
// the files first when no Load has succeeded yet, and returns that error.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded {
		if err := s.Load(); err != nil {
			return err
		}
	}
	reload := time.NewTicker(s.cfg.ReloadInterval)
	defer reload.Stop()
	rotate := time.NewTicker(s.cfg.TicketKeyRotation)
	defer rotate.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reload.C:
			_ = s.Check() // logged and counted
		case <-rotate.C:
			s.RotateTicketKeys()
		}
	}
}

// String names the files, for logs.
func (s *Server) String() string {
	return fmt.Sprintf("tls(cert_file=%s, key_file=%s)", s.cfg.CertFile, s.cfg.KeyFile)
}
