// Command tlsload drives TLS handshakes against a server for
// bench/edge/tls.sh: -conc workers each dial, run one TLS 1.3 handshake
// and close (close_notify, then read to the server's close), over and
// over, and after -warmup it counts the handshakes of a -d window. With -server-pid it reads the
// server process's own CPU accounting (utime+stime of /proc/PID/stat) at
// the window's two ends, and prints the server's CPU per handshake beside
// its own (getrusage): the figure of issue 12 is the server's.
//
//	tlsload -addr 127.0.0.1:7490 -mode full -conc 16 -d 10s -server-pid PID
//	tlsload -addr 127.0.0.1:7490 -mode resumed ...   # each worker resumes its own ticket
//	tlsload ... -cpuprofile FILE                       # its own CPU profile of the window
//
// Every handshake must negotiate TLS 1.3 and -group (X25519MLKEM768 by
// default, what BenchmarkBound measures); in resumed mode every
// handshake after a worker's first must resume. Any other outcome is
// counted as an error and makes the exit status 1. The server's
// certificate chain is not verified (the signature over the handshake
// still is, by crypto/tls): the load generator spends its core on the
// handshakes, and the server's work is the same either way.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/bench/internal/proccpu"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tlsload:", err)
		os.Exit(1)
	}
}

// counts are one worker's outcomes, summed over the workers.
type counts struct {
	ok, resumed, errs atomic.Int64
	firstErr          atomic.Pointer[string]
}

func (c *counts) fail(err error) {
	c.errs.Add(1)
	s := err.Error()
	c.firstErr.CompareAndSwap(nil, &s)
}

func run(args []string) error {
	fs := flag.NewFlagSet("tlsload", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7490", "the server's TLS address")
	mode := fs.String("mode", "full", "full (no session cache) or resumed (each worker resumes its ticket)")
	conc := fs.Int("conc", 16, "workers, each with one handshake in flight")
	d := fs.Duration("d", 10*time.Second, "the counted window")
	warmup := fs.Duration("warmup", 2*time.Second, "handshakes before the window, not counted")
	group := fs.String("group", "X25519MLKEM768", "the key exchange every handshake must negotiate: X25519MLKEM768 or X25519 (also offered alone)")
	pid := fs.Int("server-pid", 0, "the server process whose CPU time is read at the window's ends (0: none)")
	cpuprofile := fs.String("cpuprofile", "", "write tlsload's own CPU profile of the window to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mode != "full" && *mode != "resumed" {
		return fmt.Errorf("-mode %q: full or resumed", *mode)
	}
	if *conc < 1 || *d <= 0 || *warmup < 0 {
		return errors.New("-conc must be at least 1, -d positive, -warmup not negative")
	}
	var want tls.CurveID
	switch *group {
	case "X25519MLKEM768":
		want = tls.X25519MLKEM768
	case "X25519":
		want = tls.X25519
	default:
		return fmt.Errorf("-group %q: X25519MLKEM768 or X25519", *group)
	}

	var counting atomic.Bool
	var c counts
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range *conc {
		cfg := &tls.Config{
			InsecureSkipVerify: true, // see the package comment
			MinVersion:         tls.VersionTLS13,
			CurvePreferences:   []tls.CurveID{want},
			NextProtos:         []string{"http/1.1"},
		}
		if *mode == "resumed" {
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
		}
		wg.Go(func() { worker(ctx, *addr, cfg, want, *mode == "resumed", &counting, &c) })
	}

	time.Sleep(*warmup)
	sStart, err := proccpu.Of(*pid)
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			cancel()
			wg.Wait()
			return err
		}
	}
	cStart := proccpu.Self()
	t0 := time.Now()
	counting.Store(true)
	time.Sleep(*d)
	counting.Store(false)
	wall := time.Since(t0)
	pprof.StopCPUProfile() // nothing without -cpuprofile
	sEnd, err := proccpu.Of(*pid)
	cEnd := proccpu.Self()
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}

	n := c.ok.Load()
	line := fmt.Sprintf("mode=%s conc=%d handshakes=%d resumed=%d errors=%d seconds=%.2f rate=%.0f",
		*mode, *conc, n, c.resumed.Load(), c.errs.Load(), wall.Seconds(), float64(n)/wall.Seconds())
	cc := cEnd - cStart
	line += fmt.Sprintf(" client_cpu_s=%.2f client_busy=%.3f", cc.Seconds(), cc.Seconds()/wall.Seconds())
	if n > 0 {
		line += fmt.Sprintf(" client_us_per_hs=%.1f", float64(cc.Microseconds())/float64(n))
	}
	if *pid > 0 {
		sc := sEnd.CPU() - sStart.CPU()
		line += fmt.Sprintf(" server_cpu_s=%.2f server_user_s=%.2f server_sys_s=%.2f server_busy=%.3f",
			sc.Seconds(), (sEnd.User - sStart.User).Seconds(), (sEnd.Sys - sStart.Sys).Seconds(), sc.Seconds()/wall.Seconds())
		if n > 0 {
			line += fmt.Sprintf(" server_us_per_hs=%.1f", float64(sc.Microseconds())/float64(n))
		}
	}
	fmt.Println(line)
	if e := c.firstErr.Load(); e != nil {
		return fmt.Errorf("%d handshakes failed; the first: %s", c.errs.Load(), *e)
	}
	if n == 0 {
		return errors.New("no handshake in the window")
	}
	return nil
}

// worker runs handshakes until ctx ends, counting those that end while
// counting is set.
func worker(ctx context.Context, addr string, cfg *tls.Config, want tls.CurveID, resume bool, counting *atomic.Bool, c *counts) {
	d := net.Dialer{Timeout: 10 * time.Second}
	first := true
	for ctx.Err() == nil {
		resumed, err := handshake(ctx, &d, addr, cfg, want, resume && !first)
		first = false
		if !counting.Load() {
			continue
		}
		switch {
		case err == nil:
			c.ok.Add(1)
			if resumed {
				c.resumed.Add(1)
			}
		case ctx.Err() != nil: // cut at the end
		default:
			c.fail(err)
		}
	}
}

// handshake dials addr, runs one handshake and closes; it reports
// whether the handshake resumed a session.
func handshake(ctx context.Context, d *net.Dialer, addr string, cfg *tls.Config, want tls.CurveID, mustResume bool) (bool, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	tc := tls.Client(conn, cfg)
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		return false, err
	}
	// close_notify, then read to the server's close: crypto/tls takes the
	// session ticket the server sent after its Finished only while
	// reading, and the next handshake resumes it.
	if err := tc.CloseWrite(); err != nil {
		return false, err
	}
	if _, err := io.Copy(io.Discard, tc); err != nil {
		return false, err
	}
	cs := tc.ConnectionState()
	switch {
	case cs.Version != tls.VersionTLS13:
		return false, fmt.Errorf("negotiated %s, not TLS 1.3", tls.VersionName(cs.Version))
	case cs.CurveID != want:
		return false, fmt.Errorf("negotiated %v, not %v", cs.CurveID, want)
	case mustResume && !cs.DidResume:
		return false, errors.New("the handshake did not resume")
	}
	return cs.DidResume, nil
}
