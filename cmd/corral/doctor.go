package main

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/hostcheck"
	"github.com/corralhq/corral/internal/report"
)

// doctorNotReady is the exit code of `corral doctor` on a host that needs
// a change for the connections asked.
const doctorNotReady = 3

// doctorJSON is what `corral doctor --json` prints.
type doctorJSON struct {
	// Connections is the N checked for; Ready is false when a check asks for
	// a change.
	Connections int64         `json:"connections"`
	Ready       bool          `json:"ready"`
	OS          string        `json:"os"`
	Checks      []doctorCheck `json:"checks"`
	// Sysctl holds the sysctl.d lines of every change, in table order.
	Sysctl []string `json:"sysctl,omitempty"`
}

type doctorCheck struct {
	Name  string `json:"name"`
	State string `json:"state"` // ok, change, skipped or unknown
	Have  string `json:"have,omitempty"`
	Want  string `json:"want"`
	Fix   string `json:"fix,omitempty"`
	Note  string `json:"note,omitempty"`
	Why   string `json:"why"`
	Scope string `json:"scope"` // process, network namespace or node
}

func newDoctorCmd(g *globals) *cobra.Command {
	var (
		n        int64
		outbound bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "doctor [--connections N]",
		Short: "Check that this host can hold N idle connections, and print what to change",
		Long: `corral doctor checks this host the way a server of many idle connections
needs it: the process's and the system's file limits, the accept backlog
(somaxconn, which Go listens with, and the SYN backlog), the ephemeral port
range, TIME_WAIT reuse and buckets, socket memory (tcp_mem against one page
queued on each of N connections, the minimum socket buffers) and conntrack
when its module is loaded. It prints each value against what N connections
want and, for each change, the sysctl.d line (or the systemd directive).
With --outbound it also checks that the ephemeral ports times the host's
source addresses reach N (a host that dials, such as a kraken agent).

Linux values come from /proc/sys; on other systems the kernel checks are
reported as unknown. deploy/ carries the same settings for Kubernetes and
systemd, sized for 1,000,000 connections per host.

Exit code: 0 ready, 3 a change is needed, 1 an error.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if n < 1 {
				return errors.New("doctor: --connections must be at least 1")
			}
			res := hostcheck.Check(hostcheck.Host(), n)
			if outbound {
				res = append(res, hostcheck.Outbound(hostcheck.Host(), n, sourceAddresses()))
			}
			out := doctorJSON{Connections: n, Ready: hostcheck.Ready(res), OS: runtime.GOOS}
			for _, r := range res {
				out.Checks = append(out.Checks, doctorCheck{Name: r.Setting.Name, State: r.State.String(), Have: r.Have,
					Want: r.Want, Fix: r.Fix, Note: r.Note, Why: r.Setting.Why, Scope: r.Setting.Scope.String()})
				if r.State == hostcheck.Change && r.Setting.Kind == hostcheck.Sysctl && strings.Contains(r.Fix, " = ") {
					out.Sysctl = append(out.Sysctl, r.Fix)
				}
			}
			if asJSON {
				if err := report.JSON(g.stdout, out); err != nil {
					return err
				}
			} else if err := writeDoctor(g, out); err != nil {
				return err
			}
			if !out.Ready {
				return &exitError{code: doctorNotReady, err: fmt.Errorf("doctor: this host needs changes for %d connections", n)}
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&n, "connections", 100_000, "idle connections this host should hold")
	cmd.Flags().BoolVar(&outbound, "outbound", false, "also check that this host can dial N connections to one address (ports x source addresses)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON: {connections, ready, os, checks: [{name, state, have, want, fix, note, why, scope}], sysctl}")
	return cmd
}

func writeDoctor(g *globals, out doctorJSON) error {
	t := report.Table{Title: fmt.Sprintf("host settings for %d connections (%s)", out.Connections, out.OS),
		Header: []string{"setting", "state", "have", "want"}}
	unknown := 0
	for _, c := range out.Checks {
		have := c.Have
		if have == "" {
			have = "-"
		}
		t.Add(c.Name, c.State, have, c.Want)
		if c.State == "unknown" {
			unknown++
		}
	}
	if err := t.Write(g.stdout); err != nil {
		return err
	}
	var b strings.Builder
	if len(out.Sysctl) > 0 {
		b.WriteString("\nSet these (e.g. in /etc/sysctl.d/99-corral.conf, then sysctl --system):\n\n")
		for _, l := range out.Sysctl {
			b.WriteString("    " + l + "\n")
		}
	}
	for _, c := range out.Checks {
		if c.State == "change" && !strings.Contains(c.Fix, " = ") {
			fmt.Fprintf(&b, "\n%s: %s\n", c.Name, c.Fix)
		}
	}
	if unknown > 0 {
		fmt.Fprintf(&b, "\n%d checks cannot be run here: %s\n", unknown, firstNote(out.Checks))
	}
	if out.Ready {
		fmt.Fprintf(&b, "\nready for %d connections\n", out.Connections)
	}
	_, err := fmt.Fprint(g.stdout, b.String())
	return err
}

func firstNote(cs []doctorCheck) string {
	for _, c := range cs {
		if c.State == "unknown" {
			return c.Note
		}
	}
	return ""
}

// sourceAddresses counts the host's global unicast addresses, which
// outbound connections can be bound to.
func sourceAddresses() int {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return 1
	}
	n := 0
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.IsGlobalUnicast() {
			n++
		}
	}
	return max(n, 1)
}
