package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// mem is a snapshot of the process's memory.
type mem struct {
	RSSKiB     int64  `json:"rss_kib"`
	HeapInuse  uint64 `json:"heap_inuse"`
	HeapAlloc  uint64 `json:"heap_alloc"`
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
	Goroutines int    `json:"goroutines"`
}

func measure() mem {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{RSSKiB: rssKiB("self"), HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc,
		StackInuse: ms.StackInuse, Sys: ms.Sys, Goroutines: runtime.NumGoroutine()}
}

// rssKiB reads VmRSS of /proc/<pid>/status.
func rssKiB(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}

// serverResult is what the server half prints when it holds n connections.
type serverResult struct {
	Lib      string `json:"lib"`
	N        int64  `json:"n"`
	Base     mem    `json:"base"`
	Held     mem    `json:"held"`     // after the settle time and a GC
	Released mem    `json:"released"` // after debug.FreeOSMemory
}

func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	lib := fs.String("lib", "nbio", "library")
	n := fs.Int64("n", 5000, "connections to wait for")
	settle := fs.Duration("settle", 3*time.Second, "wait after the last connection before measuring")
	_ = fs.Parse(args)
	mk, ok := servers[*lib]
	if !ok {
		return fmt.Errorf("unknown library %q", *lib)
	}
	s := mk()
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	res := serverResult{Lib: *lib, Base: measure()}
	fmt.Printf("addr %s\n", addr)
	deadline := time.Now().Add(10 * time.Minute)
	for s.Open() < *n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: only %d of %d connections after 10 minutes", *lib, s.Open(), *n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(*settle)
	runtime.GC()
	res.N = s.Open()
	res.Held = measure()
	debug.FreeOSMemory()
	res.Released = measure()
	b, _ := json.Marshal(res)
	fmt.Printf("result %s\n", b)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	s.Close()
	return nil
}

// dialWS opens a TCP connection from local to addr and performs the
// WebSocket opening handshake by hand, offering the subprotocol
// corral.v1.proto as corral's clients do; it returns the connection and the
// reader that holds any bytes past the handshake.
func dialWS(addr string, local net.Addr, timeout time.Duration) (net.Conn, *bufio.Reader, error) {
	c, br, _, err := dialWSProto(addr, local, timeout, "corral.v1.proto")
	return c, br, err
}

// dialWSProto is dialWS offering the subprotocols in offer (comma-separated,
// none if empty); it also returns the subprotocol the server selected.
func dialWSProto(addr string, local net.Addr, timeout time.Duration, offer string) (net.Conn, *bufio.Reader, string, error) {
	d := net.Dialer{LocalAddr: local, Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, "", err
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	req := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\nSec-WebSocket-Version: 13\r\n"
	if offer != "" {
		req += "Sec-WebSocket-Protocol: " + offer + "\r\n"
	}
	req += "\r\n"
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, nil, "", err
	}
	br := bufio.NewReaderSize(c, 512)
	selected := ""
	status, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, nil, "", err
	}
	if !strings.Contains(status, " 101 ") {
		c.Close()
		return nil, nil, "", fmt.Errorf("handshake: %q", strings.TrimSpace(status))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, nil, "", err
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Sec-WebSocket-Protocol") {
			selected = strings.TrimSpace(v)
		}
	}
	_ = c.SetDeadline(time.Time{})
	return c, br, selected, nil
}

// sourceAddr spreads connections over 127.1.0.0/16, 250 per address.
func sourceAddr(i int) net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/250/250), byte(i/250%250+1))}
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	addr := fs.String("addr", "", "server address")
	n := fs.Int("n", 5000, "connections")
	conc := fs.Int("conc", 16, "parallel dialers")
	hello := fs.Bool("hello", false, "exchange one 64-byte message on each connection before going idle")
	_ = fs.Parse(args)
	conns := make([]net.Conn, *n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, *conc)
	start := time.Now()
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *n {
					return
				}
				var err error
				for try := 0; try < 5; try++ {
					var c net.Conn
					var br *bufio.Reader
					c, br, err = dialWS(*addr, sourceAddr(i), 10*time.Second)
					if err == nil && *hello {
						err = exchange(c, br)
						if err != nil {
							c.Close()
						}
					}
					if err == nil {
						conns[i] = c
						break
					}
					time.Sleep(time.Duration(50*(try+1)) * time.Millisecond)
				}
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("ready %d %s rss_kib=%d\n", *n, time.Since(start).Round(time.Millisecond), rssKiB("self"))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return nil
}

// exchange sends one 64-byte text message, as a Hello would be, and reads
// the echo, as the Welcome.
func exchange(c net.Conn, br *bufio.Reader) error {
	msg := strings.Repeat("h", 64)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if err := writeFrame(c, data(opText, true, msg)); err != nil {
		return err
	}
	f, err := readFrame(br)
	if err != nil {
		return err
	}
	if f.op != opText || string(f.payload) != msg {
		return fmt.Errorf("echo: op %#x, %d bytes", f.op, len(f.payload))
	}
	return nil
}

// child is a spawned half with its stdout read line by line.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func spawn(args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: in, lines: bufio.NewScanner(out)}, nil
}

// expect returns the rest of the first line that starts with prefix.
func (c *child) expect(prefix string) (string, error) {
	for c.lines.Scan() {
		if rest, ok := strings.CutPrefix(c.lines.Text(), prefix); ok {
			return rest, nil
		}
	}
	return "", errors.New("child exited before printing " + strings.TrimSpace(prefix))
}

func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

func runIdle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	lib := fs.String("lib", "nbio", "library")
	n := fs.Int("n", 5000, "idle connections")
	jsonOut := fs.Bool("json", false, "print the raw JSON result too")
	hello := fs.Bool("hello", false, "exchange one message per connection before going idle")
	_ = fs.Parse(args)
	srv, err := spawn("server", "-lib", *lib, "-n", strconv.Itoa(*n))
	if err != nil {
		return err
	}
	defer srv.stop()
	addr, err := srv.expect("addr ")
	if err != nil {
		return err
	}
	cli, err := spawn("client", "-addr", addr, "-n", strconv.Itoa(*n), "-hello="+strconv.FormatBool(*hello))
	if err != nil {
		return err
	}
	defer cli.stop()
	ready, err := cli.expect("ready ")
	if err != nil {
		return err
	}
	line, err := srv.expect("result ")
	if err != nil {
		return err
	}
	var r serverResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return err
	}
	per := func(a, b int64) float64 { return float64(a-b) / float64(r.N) }
	mode := "idle"
	if *hello {
		mode = "hello"
	}
	fmt.Printf("%-8s %-5s n=%d rss/conn=%.0f B (after FreeOSMemory %.0f B) heap_inuse/conn=%.0f B stack/conn=%.0f B goroutines=%d base_rss=%d KiB held_rss=%d KiB client: %s\n",
		r.Lib, mode, r.N,
		per(r.Held.RSSKiB*1024, r.Base.RSSKiB*1024), per(r.Released.RSSKiB*1024, r.Base.RSSKiB*1024),
		per(int64(r.Held.HeapInuse), int64(r.Base.HeapInuse)), per(int64(r.Held.StackInuse), int64(r.Base.StackInuse)),
		r.Held.Goroutines, r.Base.RSSKiB, r.Held.RSSKiB, ready)
	if *jsonOut {
		fmt.Printf("json %s\n", line)
	}
	return nil
}
