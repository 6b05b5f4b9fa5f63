// Command drainload holds WebSocket sessions on a hub and reports what each
// saw when the hub drained: a GoAway (marked drain, with its retry hint),
// then a close frame and its code, or a cut without one. bench/hub/drain.sh
// runs several of it (a process holds at most about 19,000 connections)
// against one hub and adds their reports.
//
//	drainload -addr 127.0.0.1:7450 -n 13334 -src 127.10.0.0 -srcs 64 -secret S
//
// It prints "ready <sessions> <failed>" once every session got its Welcome,
// then, when every session has ended (or -timeout passed), one line
// "summary {json}".
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corralhq/corral/bench/hub/internal/wsframe"
	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// outcome is what one session saw of the drain.
type outcome struct {
	goAway    bool
	drain     bool
	hintMs    int64
	goAwayAt  int64 // unix ms of the GoAway's arrival
	closeCode int   // close frame code; 0: none (cut: 1006 to a browser)
}

// summary is the report of one process.
type summary struct {
	Sessions    int     `json:"sessions"`
	Failed      int     `json:"failed_to_open"`
	GoAway      int     `json:"goaway"`
	DrainFlag   int     `json:"goaway_drain"`
	HintOK      int     `json:"hint_in_range"`
	CloseFrame  int     `json:"close_frame"`
	Close1001   int     `json:"close_1001"`
	Cut         int     `json:"cut_without_close_frame"`
	Unfinished  int     `json:"unfinished_at_timeout"`
	HintMinMs   int64   `json:"hint_min_ms"`
	HintP50Ms   int64   `json:"hint_p50_ms"`
	HintMaxMs   int64   `json:"hint_max_ms"`
	FirstUnixMs int64   `json:"first_goaway_unix_ms"`
	LastUnixMs  int64   `json:"last_goaway_unix_ms"`
	Seconds     float64 `json:"seconds_waiting"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7450", "hub HTTP address (GET /v1/ws)")
	n := flag.Int("n", 1000, "sessions to hold")
	src := flag.String("src", "127.10.0.0", "first source address (127.0.0.0/8)")
	srcs := flag.Int("srcs", 64, "source addresses to spread the sessions over (each has ~28,000 ephemeral ports)")
	secret := flag.String("secret", "", "HS256 secret of the hub's auth.keys")
	hintMin := flag.Duration("hint-min", time.Second, "lowest acceptable retry hint (drain.retry_after)")
	hintMax := flag.Duration("hint-max", 2*time.Second, "highest acceptable retry hint (2 x drain.retry_after)")
	conc := flag.Int("concurrency", 200, "dials in flight")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up waiting for the drain after this long")
	flag.Parse()
	if err := run(*addr, *n, *src, *srcs, *secret, *hintMin, *hintMax, *conc, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "drainload:", err)
		os.Exit(1)
	}
}

func run(addr string, n int, src string, srcs int, secret string, hintMin, hintMax time.Duration, conc int, timeout time.Duration) error {
	if secret == "" {
		return errors.New("-secret is required")
	}
	first, err := netip.ParseAddr(src)
	if err != nil || !first.Is4() {
		return fmt.Errorf("-src %q: want an IPv4 address", src)
	}
	sources := make([]netip.Addr, max(srcs, 1))
	for i, a := 0, first; i < len(sources); i, a = i+1, a.Next() {
		sources[i] = a
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{
		Tenant: "bench", Channels: []string{">"},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(24 * time.Hour))},
	}).SignedString([]byte(secret))
	if err != nil {
		return err
	}
	codec, err := wire.NewCodec(wire.FormatProto, wire.Config{})
	if err != nil {
		return err
	}
	hello, err := codec.AppendClientFrame(nil, &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: tok}}})
	if err != nil {
		return err
	}

	outcomes := make([]outcome, n)
	opened := make([]bool, n)
	finished := make([]atomic.Bool, n) // outcomes[i] is written before finished[i]
	var ready, ended sync.WaitGroup
	sem := make(chan struct{}, max(conc, 1))
	for i := range n {
		ready.Add(1)
		ended.Add(1)
		sem <- struct{}{}
		go func() {
			defer ended.Done()
			c, r, err := open(addr, sources[i%len(sources)], hello, codec)
			<-sem
			opened[i] = err == nil
			ready.Done()
			if err != nil {
				fmt.Fprintf(os.Stderr, "session %d: %v\n", i, err)
				return
			}
			defer c.Close()
			outcomes[i] = watch(c, r, codec)
			finished[i].Store(true)
		}()
	}
	ready.Wait()
	failed := 0
	for _, ok := range opened {
		if !ok {
			failed++
		}
	}
	fmt.Printf("ready %d %d\n", n-failed, failed)

	start := time.Now()
	done := make(chan struct{})
	go func() { ended.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	s := summary{Sessions: n - failed, Failed: failed, Seconds: time.Since(start).Seconds()}
	var hints []int64
	for i, o := range outcomes {
		if !opened[i] {
			continue
		}
		if !finished[i].Load() {
			s.Unfinished++
			continue
		}
		if o.goAway {
			s.GoAway++
			hints = append(hints, o.hintMs)
			if s.FirstUnixMs == 0 || o.goAwayAt < s.FirstUnixMs {
				s.FirstUnixMs = o.goAwayAt
			}
			s.LastUnixMs = max(s.LastUnixMs, o.goAwayAt)
		}
		if o.drain {
			s.DrainFlag++
		}
		if o.goAway && o.hintMs >= hintMin.Milliseconds() && o.hintMs <= hintMax.Milliseconds() {
			s.HintOK++
		}
		switch {
		case o.closeCode == 1001:
			s.Close1001++
			s.CloseFrame++
		case o.closeCode != 0:
			s.CloseFrame++
		default:
			s.Cut++
		}
	}
	if len(hints) > 0 {
		slices.Sort(hints)
		s.HintMinMs, s.HintP50Ms, s.HintMaxMs = hints[0], hints[len(hints)/2], hints[len(hints)-1]
	}
	b, _ := json.Marshal(s)
	fmt.Printf("summary %s\n", b)
	return nil
}

// open dials from src, upgrades, sends Hello and waits for Welcome.
func open(addr string, src netip.Addr, hello []byte, codec *wire.Codec) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	var key [16]byte
	_, _ = rand.Read(key[:])
	req := "GET /v1/ws HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + wire.SubprotocolProto + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, nil, err
	}
	r := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, nil, fmt.Errorf("upgrade answered %s", resp.Status)
	}
	if _, err := c.Write(wsframe.Masked(0x2, hello)); err != nil {
		c.Close()
		return nil, nil, err
	}
	for {
		op, p, err := wsframe.Read(r)
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("waiting for Welcome: %w", err)
		}
		var f corralv1.ServerFrame
		if op == 0x2 && codec.DecodeServerFrame(p, &f) == nil && f.GetWelcome() != nil {
			break
		}
		if op == 0x8 {
			c.Close()
			return nil, nil, fmt.Errorf("closed before Welcome: %x", p)
		}
	}
	_ = c.SetDeadline(time.Time{})
	return c, r, nil
}

// watch reads until the connection ends and returns what it saw. It
// answers a close frame with one, as a client does.
func watch(c net.Conn, r *bufio.Reader, codec *wire.Codec) outcome {
	var o outcome
	for {
		op, p, err := wsframe.Read(r)
		if err != nil {
			return o // cut: no close frame (closeCode stays 0)
		}
		switch op {
		case 0x2:
			var f corralv1.ServerFrame
			if codec.DecodeServerFrame(p, &f) == nil {
				if g := f.GetGoAway(); g != nil {
					o.goAway, o.drain, o.hintMs, o.goAwayAt = true, g.GetDrain(), int64(g.GetRetryAfterMs()), time.Now().UnixMilli()
				}
			}
		case 0x9: // ping: pong
			_, _ = c.Write(wsframe.Masked(0xA, p))
		case 0x8:
			o.closeCode = -1 // a close frame without a code
			if len(p) >= 2 {
				o.closeCode = int(binary.BigEndian.Uint16(p))
			}
			_, _ = c.Write(wsframe.Masked(0x8, p[:min(len(p), 2)]))
			return o
		}
	}
}
