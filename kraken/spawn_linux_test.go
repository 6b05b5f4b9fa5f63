package kraken

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestAgentsInheritNoDescriptor: a local agent starts with no descriptor
// of the coordinator's process but its standard ones, even one made by
// dup(2) (not close-on-exec: nbio's sockets, a hub's in the same
// process), which the agent would otherwise keep open.
func TestAgentsInheritNoDescriptor(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0) // no SOCK_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	dup, err := syscall.Dup(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", "ls /proc/$$/fd")
	cmd.Stdout = &out
	if err := startAgent(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{fds[0], fds[1], dup} {
		for _, got := range strings.Fields(out.String()) {
			if got == strconv.Itoa(fd) {
				t.Errorf("the agent inherited descriptor %d (its descriptors: %s)", fd, strings.Fields(out.String()))
			}
		}
	}
}
