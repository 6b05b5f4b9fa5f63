// Package admin is the admin HTTP listener every corral server runs beside
// its data port: Prometheus metrics on /metrics, liveness on /healthz,
// readiness on /readyz and the Go profiler under /debug/pprof/, and an
// index of its pages at /. Servers add their own pages (a status page, say)
// with Page; StatusPage is the one status page every server renders.
//
// The package imports nothing of corral.
package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is the admin listener's part of a server configuration.
type Config struct {
	// Addr is the host:port to listen on. Empty turns the listener off;
	// port 0 picks a free port (read it back with Server.Addr).
	Addr string `yaml:"addr"`
	// The listener's connection bounds (net/http's); zero takes the
	// default. ReadHeaderTimeout (5s) bounds a request header,
	// ReadTimeout (30s) a whole request, WriteTimeout (2m: above the 30 s
	// of a default /debug/pprof/profile) a response, IdleTimeout (60s) a
	// keep-alive connection waiting for its next request.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
}

// Validate checks the address form and that no bound is negative.
func (c Config) Validate() error {
	if c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 {
		return errors.New("admin: timeouts must not be negative")
	}
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("admin: addr %q: %w", c.Addr, err)
	}
	return nil
}

// Options are what the admin listener serves.
type Options struct {
	// Gatherer is served on /metrics; nil serves an empty registry.
	Gatherer prometheus.Gatherer
	// Ready reports whether the server is ready to take traffic; nil means
	// always ready. /readyz answers 503 with the error's text otherwise.
	Ready func() error
	// Logger receives listener errors; nil discards them.
	Logger *slog.Logger
	// Title heads the index page at /, for instance "corral hub hub-1";
	// empty says "corral".
	Title string
}

// NewRegistry returns a metrics registry holding the Go runtime and process
// collectors, which every corral server exports.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Server is an admin HTTP listener. Create it with New, add pages with
// Handle before Run, then Run it. It is safe for concurrent use.
type Server struct {
	cfg  Config
	opts Options
	mux  *http.ServeMux
	http *http.Server

	stopping atomic.Bool // the process is shutting down: /readyz answers 503

	mu      sync.Mutex
	ln      net.Listener
	started chan struct{}
	pages   []indexEntry // listed at /, in the order added
}

// indexEntry is one page of the index.
type indexEntry struct{ Path, About string }

// New builds an admin listener; it opens no socket until Run.
func New(cfg Config, opts Options) *Server {
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, opts: opts, mux: http.NewServeMux(), started: make(chan struct{})}
	s.Page("GET /metrics", "Prometheus metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelError)}))
	s.Page("GET /healthz", "liveness: ok while the process serves", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	s.Page("GET /readyz", "readiness: 503 with the reason while not ready or shutting down", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if s.stopping.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		if opts.Ready != nil {
			if err := opts.Ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	}))
	s.Page("/debug/pprof/", "the Go profiler", http.HandlerFunc(pprof.Index))
	s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.mux.HandleFunc("GET /{$}", s.index)
	s.http = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, 5*time.Second),
		ReadTimeout:       cmp.Or(cfg.ReadTimeout, 30*time.Second),
		WriteTimeout:      cmp.Or(cfg.WriteTimeout, 2*time.Minute),
		IdleTimeout:       cmp.Or(cfg.IdleTimeout, 60*time.Second),
	}
	return s
}

// Stopping makes /readyz answer 503 from now on, while /metrics and the
// other pages keep answering until Shutdown: lifecycle.Run calls it when
// the process begins to shut down, so that load balancers stop sending
// before the server drains (it implements lifecycle.Stopper).
func (s *Server) Stopping() { s.stopping.Store(true) }

// Handle adds a page, with the pattern syntax of http.ServeMux; the index
// lists it without a description.
func (s *Server) Handle(pattern string, h http.Handler) { s.Page(pattern, "", h) }

// Page adds a page, with the pattern syntax of http.ServeMux, and lists
// its path with about on the index at /. A pattern of another method than
// GET (a control, say) is served but not listed.
func (s *Server) Page(pattern, about string, h http.Handler) {
	s.mux.Handle(pattern, h)
	path := pattern
	if method, p, ok := strings.Cut(pattern, " "); ok {
		if method != http.MethodGet {
			return // not a page a browser opens: not listed
		}
		path = p
	}
	if i := strings.IndexByte(path, '/'); i > 0 { // a host in the pattern
		path = path[i:]
	}
	s.mu.Lock()
	s.pages = append(s.pages, indexEntry{Path: path, About: about})
	s.mu.Unlock()
}

// index serves the list of pages at /, as HTML or (format=json) JSON.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	pages := append([]indexEntry(nil), s.pages...)
	s.mu.Unlock()
	title := cmp.Or(s.opts.Title, "corral")
	if WantsJSON(r) {
		type page struct {
			Path  string `json:"path"`
			About string `json:"about,omitempty"`
		}
		out := struct {
			Title string `json:"title"`
			Pages []page `json:"pages"`
		}{Title: title}
		for _, p := range pages {
			out.Pages = append(out.Pages, page(p))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = indexTemplate.Execute(w, struct {
		Title string
		Pages []indexEntry
	}{title, pages})
}

var indexTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>` + pageStyle + `</style></head><body>
<h1>{{.Title}}</h1>
<table>
{{range .Pages}}<tr><td><a href="{{.Path}}">{{.Path}}</a></td><td>{{.About}}</td></tr>
{{end}}</table>
</body></html>
`))

// Run listens and serves until ctx ends or Shutdown is called. With an
// empty Addr it only waits for ctx.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.Addr == "" {
		close(s.started)
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		close(s.started)
		return fmt.Errorf("admin: %w", err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	close(s.started)
	s.opts.Logger.Info("admin listener up", "addr", ln.Addr().String())
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.http.Shutdown(sctx)
	})
	defer stop()
	if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin: %w", err)
	}
	return nil
}

// Started is closed once Run has bound its listener (or failed to).
func (s *Server) Started() <-chan struct{} { return s.started }

// Addr returns the bound address, or nil before Run has bound it.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops the listener, waiting for requests in flight until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}
