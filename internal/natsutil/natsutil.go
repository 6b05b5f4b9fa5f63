package natsutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Conn is a connection to NATS with JetStream, and the embedded server
// behind it when there is one. Create it with Connect and release it with
// Close. It is safe for concurrent use.
type Conn struct {
	// NC is the NATS client connection.
	NC *nats.Conn
	// JS is JetStream on NC.
	JS jetstream.JetStream

	emb        *Embedded
	persistent bool
}

// Embedded is an embedded nats-server and the temporary store directory it
// owns, if any. Shutdown stops it.
type Embedded struct {
	// Server is the running nats-server.
	Server *server.Server
	tmpDir string
}

// Shutdown stops the server, waits for it and removes its temporary store.
// It is safe to call more than once.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}

// Connect starts the embedded server (when cfg.URL is empty) and connects
// to it or to the external URL; an external URL that does not answer yet is
// retried in the background (Connect returns a connection that is still
// connecting). name labels the client connection (it shows
// in NATS monitoring). The logger receives the embedded server's warnings
// and errors; nil discards them.
func Connect(ctx context.Context, cfg Config, name string, log *slog.Logger) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{nats.Name(name), nats.Timeout(cfg.timeout()), nats.MaxReconnects(-1)}
	if cfg.URL != "" {
		// An external NATS that is not up yet (its pods start with the
		// hubs') is waited for, as a lost connection is: the connection
		// keeps trying in the background and its user sees JetStream fail
		// until it connects.
		opts = append(opts, nats.RetryOnFailedConnect(true))
	}
	c := &Conn{persistent: cfg.URL != "" || cfg.StoreDir != ""}
	if cfg.URL == "" {
		emb, err := StartServer(cfg, log)
		if err != nil {
			return nil, err
		}
		c.emb = emb
		opts = append(opts, nats.InProcessServer(emb.Server))
	}
	if err := c.open(cfg.URL, fmt.Sprintf("%q", cfg.URL), opts...); err != nil {
		c.Close()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Server returns the embedded server, or nil when connected to an external
// URL.
func (c *Conn) Server() *server.Server {
	if c.emb == nil {
		return nil
	}
	return c.emb.Server
}

// Persistent reports whether JetStream keeps files (an external server, or
// an embedded one with a store directory): streams should then use file
// storage so that history survives a restart.
func (c *Conn) Persistent() bool { return c.persistent }

// Close drains nothing: it closes the client connection and shuts the
// embedded server down. It is safe to call more than once.
func (c *Conn) Close() {
	if c.NC != nil {
		c.NC.Close()
	}
	if c.emb != nil {
		c.emb.Shutdown()
	}
}

// StartServer starts an embedded nats-server with JetStream from the
// embedded-server fields of cfg and waits until it takes connections. It
// opens a client port only when cfg.Listen is set and a route port only when
// cfg.Cluster.Listen is set (a clustered server also opens a client port on
// a free port of the route host, because nats-server routes only once its
// client accept loop runs). Without cfg.StoreDir, JetStream state goes to a
// fresh temporary directory that Shutdown removes. The caller shuts it down.
func StartServer(cfg Config, log *slog.Logger) (*Embedded, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &server.Options{
		ServerName: cfg.ServerName,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		DontListen: cfg.Listen == "",
	}
	emb := &Embedded{}
	if cfg.StoreDir == "" {
		// nats-server would share os.TempDir()/jetstream between servers of
		// one process; give each its own.
		dir, err := os.MkdirTemp("", "corral-nats-")
		if err != nil {
			return nil, fmt.Errorf("natsutil: %w", err)
		}
		emb.tmpDir, o.StoreDir = dir, dir
	}
	fail := func(err error) (*Embedded, error) {
		if emb.tmpDir != "" {
			_ = os.RemoveAll(emb.tmpDir)
		}
		return nil, err
	}
	if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return fail(fmt.Errorf("natsutil: listen: %w", err))
		}
		o.Host, o.Port = host, port
	}
	if cfg.Cluster.Listen != "" {
		host, port, err := splitHostPort(cfg.Cluster.Listen)
		if err != nil {
			return fail(fmt.Errorf("natsutil: cluster.listen: %w", err))
		}
		o.Cluster = server.ClusterOpts{Name: cfg.Cluster.Name, Host: host, Port: port}
		if o.DontListen {
			// nats-server starts routing only after its client accept
			// loop: a clustered server needs a client port, so it gets a
			// free one on the route host.
			o.DontListen, o.Host, o.Port = false, host, -1
		}
		for _, r := range cfg.Cluster.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return fail(fmt.Errorf("natsutil: cluster.routes: %w", err))
			}
			o.Routes = append(o.Routes, u)
		}
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return fail(fmt.Errorf("natsutil: embedded server: %w", err))
	}
	emb.Server = srv
	nl := &natsLogger{log: log}
	srv.SetLoggerV2(nl, false, false, false)
	srv.Start()
	// A listener that fails (a port taken) leaves the server never ready:
	// its fatal error ends the wait at once instead of the timeout.
	deadline := time.Now().Add(cfg.timeout())
	for !srv.ReadyForConnections(100 * time.Millisecond) {
		if msg := nl.fatal(); msg != "" {
			emb.Shutdown()
			return nil, fmt.Errorf("natsutil: embedded server: %s: %w", msg, errServerFailed)
		}
		if time.Now().After(deadline) {
			emb.Shutdown()
			return nil, fmt.Errorf("natsutil: embedded server not ready within %v", cfg.timeout())
		}
	}
	return emb, nil
}

// errServerFailed marks a start that nats-server gave up with a fatal
// error (a listener it could not open), which StartCluster retries on new
// ports.
var errServerFailed = errors.New("natsutil: embedded server failed to start")

// splitHostPort parses host:port; port 0 becomes -1, which nats-server
// reads as "pick a free port".
func splitHostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	if p == 0 {
		p = -1
	}
	return host, p, nil
}

// EnsureStream creates the stream, or updates it to cfg when it exists with
// another configuration.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("natsutil: stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// ScaleStream raises the replicas of the named stream to n when it has
// fewer (JetStream copies the data to the new peers) and leaves it
// otherwise. Several callers may do it at once.
func ScaleStream(ctx context.Context, js jetstream.JetStream, name string, n int) error {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("natsutil: stream %s: %w", name, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Replicas >= n {
		return nil
	}
	cfg.Replicas = n
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("natsutil: stream %s to %d replicas: %w", name, n, err)
	}
	return nil
}

// IsWrongLastSequence reports whether err is JetStream's answer to a publish
// whose expected last sequence did not match (optimistic concurrency lost).
func IsWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return err != nil && strings.Contains(err.Error(), "wrong last sequence")
}

// natsLogger forwards nats-server warnings and errors to slog, and keeps
// the first fatal error for StartServer.
type natsLogger struct {
	log      *slog.Logger
	mu       sync.Mutex
	firstErr string
}

// fatal returns the first fatal error logged, "" when none was.
func (l *natsLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstErr
}

func (l *natsLogger) Noticef(string, ...any) {}
func (l *natsLogger) Debugf(string, ...any)  {}
func (l *natsLogger) Tracef(string, ...any)  {}
func (l *natsLogger) Warnf(format string, v ...any) {
	l.log.Warn("nats: " + fmt.Sprintf(format, v...))
}
func (l *natsLogger) Errorf(format string, v ...any) {
	l.log.Error("nats: " + fmt.Sprintf(format, v...))
}
func (l *natsLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error("nats: fatal: " + msg)
	l.mu.Lock()
	if l.firstErr == "" {
		l.firstErr = msg
	}
	l.mu.Unlock()
}

// ConnectEmbedded connects in process to a running embedded server (a
// member of a Cluster, say) and opens JetStream. The server is not owned:
// Close leaves it running. persistent is what Persistent reports.
func ConnectEmbedded(srv *server.Server, name string, persistent bool) (*Conn, error) {
	c := &Conn{persistent: persistent}
	if err := c.open("", "in process", nats.Name(name), nats.InProcessServer(srv), nats.MaxReconnects(-1)); err != nil {
		return nil, err
	}
	return c, nil
}

// open connects c.NC to url with opts and opens c.JS on it; where names
// the server in the errors. On an error it leaves c.NC and c.JS nil.
func (c *Conn) open(url, where string, opts ...nats.Option) error {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("natsutil: connect %s: %w", where, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("natsutil: jetstream: %w", err)
	}
	c.NC, c.JS = nc, js
	return nil
}
