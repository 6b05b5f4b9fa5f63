// Command hubload drives a corral hub for the benchmarks of bench/hub: it
// opens many WebSocket sessions from source addresses spread over
// 127.0.0.0/8 (one process holds at most about 19,000 connections here),
// sends Hello and one Subscribe on each, reports when they are all up, then
// records the latency of every channel message it receives (the payload
// carries the publish time), and prints a summary when its stdin closes.
//
//	hubload clients -addr 127.0.0.1:7400 -n 9500 -first 0 -token T -channel bench
//	hubload clients -tls -addr 127.0.0.1:7470 ...   # wss (no certificate check: loopback benches)
//	hubload clients -dialer epoll ...   # one goroutine and raw sockets for every dial in flight (bench/hub/run.sh)
//	hubload clients -server centrifugo -addr 127.0.0.1:7460 -token T ...   # the same storm against Centrifugo
//	hubload publish -addr 127.0.0.1:7400 -key K -tenant bench -channel bench -count 20 -every 500ms
//	hubload merge file...    # latency files written by clients -lat FILE
//	hubload token -secret S -tenant bench   # a session JWT for the bench config (with sub, so Centrifugo takes it too)
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/bench/hub/internal/wsframe"
	"github.com/corralhq/corral/bench/internal/proccpu"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hubload clients|publish|merge ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "clients":
		err = runClients(os.Args[2:])
	case "publish":
		err = runPublish(os.Args[2:])
	case "merge":
		err = runMerge(os.Args[2:])
	case "token":
		err = runToken(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hubload:", err)
		os.Exit(1)
	}
}

// sourceAddr spreads connections over 127.2.0.0/15, 250 per address.
func sourceAddr(i int) net.Addr {
	a := i / 250
	return &net.TCPAddr{IP: net.IPv4(127, byte(2+a/62500), byte(a/250%250+1), byte(a%250+1))}
}

var codec, _ = wire.NewCodec(wire.FormatProto, wire.Config{})

// server is what the clients talk to: a corral hub, or Centrifugo (its
// protobuf or JSON protocol: connect with the token, then subscribe) for
// the side-by-side run of bench/hub/run.sh.
type server struct {
	centrifugo bool
	protobuf   bool // Centrifugo's protobuf protocol instead of JSON
	path       string
	tls        *tls.Config // wss; nil: ws
}

func dial(srv server, addr string, local net.Addr, timeout time.Duration) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{LocalAddr: local, Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if srv.tls != nil {
		tc := tls.Client(c, srv.tls)
		_ = tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("tls: %w", err)
		}
		c = tc
	}
	req := upgradeRequest(srv, addr)
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(c, 1024)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 101 ") {
		c.Close()
		return nil, nil, fmt.Errorf("handshake: %q %v", strings.TrimSpace(status), err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	return c, br, nil
}

// upgradeRequest is the WebSocket upgrade request of a session, with a
// fresh key.
func upgradeRequest(srv server, addr string) string {
	var key [16]byte
	_, _ = rand.Read(key[:])
	req := "GET " + srv.path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\nSec-WebSocket-Version: 13\r\n"
	if !srv.centrifugo {
		req += "Sec-WebSocket-Protocol: " + wire.SubprotocolProto + "\r\n"
	}
	return req + "\r\n"
}

// setup is the timing of one session set-up.
type setup struct {
	upgrade, welcome, subscribed time.Duration // TCP connect to 101, Hello to Welcome, Subscribe to Subscribed
	lostHello                    bool          // upgraded and sent Hello, but no Welcome within the Hello timeout
}

// session opens one session: handshake, Hello, Welcome, Subscribe,
// Subscribed (against Centrifugo: connect and subscribe commands).
func session(srv server, addr string, local net.Addr, token, channel string, timeout, helloTimeout time.Duration) (net.Conn, *bufio.Reader, setup, error) {
	var st setup
	t0 := time.Now()
	c, br, err := dial(srv, addr, local, timeout)
	if err != nil {
		return nil, nil, st, err
	}
	t1 := time.Now()
	st.upgrade = t1.Sub(t0)
	if err := exchange(c, br, protocolOf(srv), token, channel, helloTimeout, &st); err != nil {
		c.Close()
		return nil, nil, st, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, br, st, nil
}

// exchange sends the Hello (connect) and, with a channel, the Subscribe
// of p on an upgraded connection and waits for their answers.
func exchange(c net.Conn, br *bufio.Reader, p protocol, token, channel string, helloTimeout time.Duration, st *setup) error {
	expect := func(step int) error {
		for {
			op, b, err := wsframe.Read(br)
			if err != nil {
				return err
			}
			ok, err := p.reply(step, op, b)
			if err != nil || ok {
				return err
			}
		}
	}
	t := time.Now()
	if err := wsframe.Write(c, p.op, p.hello(token)); err != nil {
		return err
	}
	_ = c.SetReadDeadline(t.Add(helloTimeout))
	if err := expect(1); err != nil {
		st.lostHello = isTimeout(err)
		return err
	}
	st.welcome = time.Since(t)
	if channel == "" {
		return nil
	}
	t = time.Now()
	if err := wsframe.Write(c, p.op, p.subscribe(channel)); err != nil {
		return err
	}
	if err := expect(2); err != nil {
		return err
	}
	st.subscribed = time.Since(t)
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// median returns the median of ds in milliseconds (0 when empty).
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / 1e6
}

// stormConfig is one dial storm: n sessions, conc of them in flight.
type stormConfig struct {
	srv                   server
	addr                  string
	n, first, conc        int
	token, channel        string
	timeout, helloTimeout time.Duration
	window                *window // the steady part's figures, or nil
}

// stormResult is what a storm leaves: the sessions (nil where all five
// attempts failed) and the set-up times.
type stormResult struct {
	conns                    []net.Conn
	readers                  []*bufio.Reader
	failed, lost             int64
	firstErr                 string
	upgrades, welcomes, subs []time.Duration
}

// goStorm runs the storm with a goroutine per dial in flight on Go's net
// package (blocking reads and writes over the netpoller).
func goStorm(cfg stormConfig) stormResult {
	res := stormResult{conns: make([]net.Conn, cfg.n), readers: make([]*bufio.Reader, cfg.n)}
	var next, failed, lost atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.n {
					return
				}
				var err error
				for attempt := 0; attempt < attempts; attempt++ {
					var st setup
					res.conns[i], res.readers[i], st, err = session(cfg.srv, cfg.addr, sourceAddr(cfg.first+i), cfg.token, cfg.channel, cfg.timeout, cfg.helloTimeout)
					if st.lostHello {
						lost.Add(1)
					}
					if err == nil {
						mu.Lock()
						res.record(st, cfg.channel != "")
						cfg.window.setUp()
						mu.Unlock()
						break
					}
					time.Sleep(retryPause)
				}
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if res.firstErr == "" {
						res.firstErr = err.Error()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.failed, res.lost = failed.Load(), lost.Load()
	return res
}

// attempts is how many times a session is tried, retryPause apart.
const (
	attempts   = 5
	retryPause = 100 * time.Millisecond
)

// record adds the times of a session set up.
func (r *stormResult) record(st setup, subscribed bool) {
	r.upgrades, r.welcomes = append(r.upgrades, st.upgrade), append(r.welcomes, st.welcome)
	if subscribed {
		r.subs = append(r.subs, st.subscribed)
	}
}

func runClients(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:7400", "hub HTTP address")
	n := fs.Int("n", 9500, "sessions")
	first := fs.Int("first", 0, "index of the first session (selects the source addresses)")
	conc := fs.Int("conc", 64, "parallel dialers")
	token := fs.String("token", "", "session JWT")
	channel := fs.String("channel", "bench", "channel to subscribe (empty: none)")
	latFile := fs.String("lat", "", "write the latencies (ns, one per line) of received messages here")
	kind := fs.String("server", "corral", "corral or centrifugo")
	cfProto := fs.String("centrifugo-protocol", "protobuf", "protobuf or json: Centrifugo's protocol")
	path := fs.String("path", "", "WebSocket path (default /v1/ws, Centrifugo /connection/websocket)")
	helloTimeout := fs.Duration("hello-timeout", 10*time.Second, "a Hello (connect) not answered within this is counted lost")
	serverPID := fs.Int("server-pid", 0, "the server's process id: the ready line then has the steady part's figures (window_*: from a tenth of the sessions set up to nine tenths, the server's CPU, this process's and each core's idle share)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the dial storm (until the ready line) to this file")
	useTLS := fs.Bool("tls", false, "wss: TLS 1.3 without certificate verification (a loopback bench server's self-signed certificate)")
	dialer := fs.String("dialer", "go", "go (a goroutine per dial on Go's net package) or epoll (Linux, ws only: one goroutine drives every dial in flight over raw non-blocking sockets)")
	_ = fs.Parse(args)
	if *dialer != "epoll" && *dialer != "go" {
		return fmt.Errorf("unknown dialer %q", *dialer)
	}
	if *dialer == "epoll" && *useTLS {
		return errors.New("-tls needs -dialer go")
	}
	srv := server{centrifugo: *kind == "centrifugo", protobuf: *cfProto == "protobuf", path: *path}
	if *useTLS {
		srv.tls = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}} //nolint:gosec // bench on loopback
	}
	if *cfProto != "protobuf" && *cfProto != "json" {
		return fmt.Errorf("unknown Centrifugo protocol %q", *cfProto)
	}
	if *kind != "corral" && *kind != "centrifugo" {
		return fmt.Errorf("unknown server %q", *kind)
	}
	if srv.path == "" {
		srv.path = "/v1/ws"
		if srv.centrifugo {
			srv.path = "/connection/websocket"
			if srv.protobuf {
				srv.path += "?cf_protocol=protobuf"
			}
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
	}
	cfg := stormConfig{srv: srv, addr: *addr, n: *n, first: *first, conc: *conc, token: *token, channel: *channel, timeout: 30 * time.Second, helloTimeout: *helloTimeout,
		window: newWindow(*serverPID, *n)}
	start := time.Now()
	var res stormResult
	switch *dialer {
	case "epoll":
		var err error
		if res, err = epollStorm(cfg); err != nil {
			return err
		}
	case "go":
		res = goStorm(cfg)
	}
	elapsed, cpu := time.Since(start), proccpu.Self()
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	conns, readers := res.conns, res.readers
	if res.firstErr == "" {
		res.firstErr = "none"
	}
	ok := *n - int(res.failed)
	// Fields by position (run.sh reads them): 2 ready, 4 failed, 6
	// elapsed_ms, 8 rate, 10 lost_hellos, 12, 14, 16 medians in ms, 18
	// the process's CPU (user + system, from its start) in ms, 20 to 28
	// the window's (-1 without -server-pid), then the first error.
	fmt.Printf("ready %d failed %d elapsed_ms %d rate_per_s %.0f lost_hellos %d upgrade_p50_ms %.1f welcome_p50_ms %.1f subscribed_p50_ms %.1f cpu_ms %d %s first_error %s\n",
		ok, res.failed, elapsed.Milliseconds(), float64(ok)/elapsed.Seconds(), res.lost, median(res.upgrades), median(res.welcomes), median(res.subs), cpu.Milliseconds(), cfg.window.fields(), res.firstErr)

	var mu sync.Mutex
	var lats []int64
	var offs []uint64
	for i := range conns {
		if conns[i] == nil {
			continue
		}
		go func() {
			for {
				op, p, err := wsframe.Read(readers[i])
				if err != nil {
					return
				}
				now := time.Now().UnixNano()
				if op != 2 {
					continue
				}
				var f corralv1.ServerFrame
				if codec.DecodeServerFrame(p, &f) != nil || f.GetMessage() == nil {
					continue
				}
				sent, err := strconv.ParseInt(string(f.GetMessage().GetData()), 10, 64)
				if err != nil {
					continue
				}
				mu.Lock()
				lats = append(lats, now-sent)
				offs = append(offs, f.GetMessage().GetOffset())
				mu.Unlock()
			}
		}()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	mu.Lock()
	defer mu.Unlock()
	if *latFile != "" {
		var b bytes.Buffer
		for i, l := range lats {
			fmt.Fprintln(&b, offs[i], l)
		}
		if err := os.WriteFile(*latFile, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("received %d\n", len(lats))
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	return nil
}

func runPublish(args []string) error {
	fs := flag.NewFlagSet("publish", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:7400", "hub HTTP address")
	key := fs.String("key", "", "API key")
	tenant := fs.String("tenant", "bench", "tenant")
	channel := fs.String("channel", "bench", "channel")
	count := fs.Int("count", 20, "messages")
	every := fs.Duration("every", 500*time.Millisecond, "interval")
	_ = fs.Parse(args)
	for i := 0; i < *count; i++ {
		body, _ := json.Marshal(map[string]string{"tenant": *tenant, "channel": *channel, "priority": "p1", "data": strconv.FormatInt(time.Now().UnixNano(), 10)})
		req, _ := http.NewRequest("POST", "http://"+*addr+"/v1/publish", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+*key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("publish: HTTP %d", resp.StatusCode)
		}
		time.Sleep(*every)
	}
	return nil
}

// runMerge reads latency files ("offset latency-ns" lines) and prints
// count, p50, p99, max in ms, and with -v the p99 of every message.
func runMerge(files []string) error {
	verbose := len(files) > 0 && files[0] == "-v"
	if verbose {
		files = files[1:]
	}
	var all []int64
	byOff := map[uint64][]int64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			o, l, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			off, err1 := strconv.ParseUint(o, 10, 64)
			v, err2 := strconv.ParseInt(l, 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("bad line %q", line)
			}
			all = append(all, v)
			byOff[off] = append(byOff[off], v)
		}
	}
	if verbose {
		keys := make([]uint64, 0, len(byOff))
		for k := range byOff {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := byOff[k]
			slices.Sort(v)
			fmt.Printf("message %d: %d deliveries, p50 %.1f ms, p99 %.1f ms\n", k, len(v), float64(v[len(v)/2])/1e6, float64(v[int(0.99*float64(len(v)-1))])/1e6)
		}
	}
	if len(all) == 0 {
		return errors.New("no latencies")
	}
	slices.Sort(all)
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e6 }
	fmt.Printf("deliveries %d p50_ms %.2f p99_ms %.2f max_ms %.2f\n", len(all), q(0.5), q(0.99), float64(all[len(all)-1])/1e6)
	return nil
}

func runToken(args []string) error {
	fs := flag.NewFlagSet("token", flag.ExitOnError)
	secret := fs.String("secret", "", "HS256 secret")
	tenant := fs.String("tenant", "bench", "tenant")
	_ = fs.Parse(args)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: *tenant, Channels: []string{">"}, Publish: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{Subject: "bench", ExpiresAt: jwt.NewNumericDate(time.Now().Add(24 * time.Hour))},
	}).SignedString([]byte(*secret))
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
