package wsserve

import (
	"bufio"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// TestUpgradeAtTheDescriptorLimitIsAnswered runs the server at its
// process's descriptor limit: the connection is accepted (the last free
// descriptor) and nbio's move to its poller, which duplicates the
// descriptor, fails with EMFILE. The device must get 503 with
// Retry-After at once, on the listener's path and on net/http's, not a
// connection that stays open until the collector closes it without a
// word. Not parallel: the limit is the whole process's.
func TestUpgradeAtTheDescriptorLimitIsAnswered(t *testing.T) {
	var unserved atomic.Int64
	addr := startServer(t, Config{Unserved: func() { unserved.Add(1) }}, new(testHandler), nil)
	// net/http's complaints go to the standard logger: none is expected.
	logged := new(testkit.SyncBuffer)
	defer log.SetOutput(log.Writer())
	log.SetOutput(logged)
	slowHead := strings.Replace(wsHead, "Host: corral\r\n", "Host: corral\r\nX-Pad: "+strings.Repeat("x", headMax)+"\r\n", 1)
	for i, tc := range []struct{ name, head string }{
		{"the listener's path", wsHead},
		{"net/http's path", slowHead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialAtTheLimit(t, addr)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tc.head); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to an upgrade the server could not take: %v", err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != strconv.Itoa(int(UnservedRetryAfter/time.Second)) {
				t.Fatalf("answered %d, Retry-After %q; want 503 with %v", resp.StatusCode, resp.Header.Get("Retry-After"), UnservedRetryAfter)
			}
			// The server has closed its side: its descriptor is free
			// before the next subtest fills the table again.
			_, _ = io.Copy(io.Discard, br)
			if n := unserved.Load(); n != int64(i+1) {
				t.Fatalf("Unserved called %d times, want %d", n, i+1)
			}
			if l := logged.String(); strings.Contains(l, "hijacked") {
				t.Fatalf("the standard logger got net/http's complaint:\n%s", l)
			}
		})
	}
}

// dialAtTheLimit lowers the process's descriptor limit to a little above
// its highest open descriptor, fills every free descriptor below it but
// two, and dials addr on one of the two: the server's accept takes the
// other. The limit and the descriptors are given back when t ends.
func dialAtTheLimit(t *testing.T, addr string) net.Conn {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	top := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			top = max(top, n)
		}
	}
	lim := syscall.Rlimit{Cur: uint64(top) + 64, Max: old.Max}
	if lim.Cur > old.Cur {
		t.Skipf("descriptor limit %d too low to lower", old.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	runtime.GC() // a finalizer that closes a leaked descriptor later would free one more
	var fill []int
	t.Cleanup(func() {
		for _, fd := range fill {
			_ = syscall.Close(fd)
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring the descriptor limit: %v", err)
		}
	})
	for {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fill = append(fill, fd)
	}
	if len(fill) < 2 {
		t.Fatalf("filled %d descriptors", len(fill))
	}
	for _, fd := range fill[len(fill)-2:] {
		_ = syscall.Close(fd)
	}
	fill = fill[:len(fill)-2]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
