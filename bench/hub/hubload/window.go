package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/bench/internal/proccpu"
)

// window measures the steady part of a storm: from the moment a tenth of
// the sessions are set up to the moment nine tenths are, leaving out the
// ramp (the first dials) and the tail (the last few sessions, when the
// dials in flight run out), in which no server keeps its core busy. At
// both moments it reads the server's CPU (/proc/PID/stat), this
// process's own, and the two cores' idle time (/proc/stat). The zero
// value measures nothing; its methods are called with the storm's results
// held (one goroutine at a time).
type window struct {
	pid      int // the server's process; 0: no window
	from, to int // the set-ups that open and close the window
	done     int
	marks    [2]mark
}

type mark struct {
	at          time.Time
	server      time.Duration
	self        time.Duration
	cores, idle [2]int64 // CPU 0 and 1: all and idle ticks
	ok          bool
}

func newWindow(pid, n int) *window {
	return &window{pid: pid, from: n / 10, to: n - n/10}
}

// setUp counts one session set up.
func (w *window) setUp() {
	if w == nil || w.pid == 0 {
		return
	}
	w.done++
	switch w.done {
	case w.from:
		w.marks[0] = w.read()
	case w.to:
		w.marks[1] = w.read()
	}
}

func (w *window) read() mark {
	m := mark{at: time.Now(), self: proccpu.Self()}
	srv, err := proccpu.Of(w.pid)
	if err != nil {
		return m
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m
	}
	m.server = srv.CPU()
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || (f[0] != "cpu0" && f[0] != "cpu1") {
			continue
		}
		c := int(f[0][3] - '0')
		for i := 1; i <= 8; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			m.cores[c] += v
			if i == 4 || i == 5 { // idle, iowait
				m.idle[c] += v
			}
		}
	}
	m.ok = true
	return m
}

// fields is the window's part of the ready line: its length, the server's
// and this process's CPU in it, and each core's idle share (-1 without a
// window).
func (w *window) fields() string {
	if w == nil || !w.marks[0].ok || !w.marks[1].ok {
		return "window_ms -1 window_server_cpu_ms -1 window_self_cpu_ms -1 window_core0_idle_pct -1 window_core1_idle_pct -1"
	}
	a, b := w.marks[0], w.marks[1]
	idle := func(c int) float64 {
		if all := b.cores[c] - a.cores[c]; all > 0 {
			return 100 * float64(b.idle[c]-a.idle[c]) / float64(all)
		}
		return -1
	}
	return fmt.Sprintf("window_ms %d window_server_cpu_ms %d window_self_cpu_ms %d window_core0_idle_pct %.0f window_core1_idle_pct %.0f",
		b.at.Sub(a.at).Milliseconds(), (b.server - a.server).Milliseconds(), (b.self - a.self).Milliseconds(), idle(0), idle(1))
}
