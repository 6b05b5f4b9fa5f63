// Package hostcheck holds the host settings a server of many idle
// connections needs (file limits, accept backlog, ephemeral ports,
// TIME_WAIT reuse, socket memory, conntrack), what each should be for N
// connections, and the check of a host against them. `corral doctor` runs
// the check; the files under deploy/ carry the same table for Kubernetes
// and systemd, and a test holds them to it.
//
// The package imports nothing of corral.
package hostcheck

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kind says where a setting lives.
type Kind int

const (
	// Sysctl is a kernel parameter under /proc/sys.
	Sysctl Kind = iota
	// Rlimit is a resource limit of the process (soft, hard).
	Rlimit
)

// Scope says which part of a host a setting belongs to, which decides
// where a Kubernetes deployment sets it.
type Scope int

const (
	// Process settings belong to one process (its resource limits): systemd
	// sets them in the unit, Kubernetes through the container runtime.
	Process Scope = iota
	// NetNS settings are per network namespace: a pod sets its own.
	NetNS
	// Node settings are shared by the whole host: set on the node.
	Node
)

// String returns the scope's name as the deploy files say it.
func (s Scope) String() string {
	switch s {
	case Process:
		return "process"
	case NetNS:
		return "network namespace"
	default:
		return "node"
	}
}

// Setting is one row of the table.
type Setting struct {
	// Name is the sysctl key ("net.core.somaxconn") or the resource limit
	// ("RLIMIT_NOFILE").
	Name  string
	Kind  Kind
	Scope Scope
	// KubeSafe is true for the sysctls Kubernetes allows in a pod's
	// securityContext without the kubelet's --allowed-unsafe-sysctls.
	KubeSafe bool
	// Optional settings belong to a kernel module; a host without it
	// passes.
	Optional bool
	// Why is one line on what the setting bounds.
	Why string

	want func(n int64) []Bound
}

// Bound is what one field of a setting's value must be.
type Bound struct {
	// Min and Max bound the field; HasMin and HasMax say which apply.
	Min, Max       int64
	HasMin, HasMax bool
}

func atLeast(v int64) Bound       { return Bound{Min: v, HasMin: true} }
func atMost(v int64) Bound        { return Bound{Max: v, HasMax: true} }
func between(lo, hi int64) Bound  { return Bound{Min: lo, Max: hi, HasMin: true, HasMax: true} }
func anyValue() Bound             { return Bound{} }
func (b Bound) ok(v int64) bool   { return (!b.HasMin || v >= b.Min) && (!b.HasMax || v <= b.Max) }
func (b Bound) fix(v int64) int64 { return min(max(v, b.Min), b.maxOr(v)) }

func (b Bound) maxOr(v int64) int64 {
	if b.HasMax {
		return b.Max
	}
	return max(v, b.Min)
}

// String says the bound in words: ">= 65535", "<= 4096", "1", "any".
func (b Bound) String() string {
	switch {
	case b.HasMin && b.HasMax && b.Min == b.Max:
		return strconv.FormatInt(b.Min, 10)
	case b.HasMin && b.HasMax:
		return fmt.Sprintf("%d..%d", b.Min, b.Max)
	case b.HasMin:
		return ">= " + strconv.FormatInt(b.Min, 10)
	case b.HasMax:
		return "<= " + strconv.FormatInt(b.Max, 10)
	}
	return "any"
}

// Want returns the bounds of each field of the setting's value for n
// connections.
func (s Setting) Want(n int64) []Bound { return s.want(n) }

// WantString says the wanted value for n connections, one bound per field.
func (s Setting) WantString(n int64) string {
	var parts []string
	for _, b := range s.want(n) {
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ", ")
}

// Meets reports whether value (the fields as /proc/sys prints them,
// separated by blanks) meets the setting for n connections.
func (s Setting) Meets(n int64, value string) (bool, error) {
	have, err := ParseValue(value)
	if err != nil {
		return false, fmt.Errorf("hostcheck: %s: %w", s.Name, err)
	}
	want := s.want(n)
	if len(have) != len(want) {
		return false, fmt.Errorf("hostcheck: %s: %d fields, want %d", s.Name, len(have), len(want))
	}
	for i, b := range want {
		if !b.ok(have[i]) {
			return false, nil
		}
	}
	return true, nil
}

// Suggest returns the value closest to have that meets the setting for n
// connections (have may be nil: the bounds alone).
func (s Setting) Suggest(n int64, have []int64) []int64 {
	want := s.want(n)
	out := make([]int64, len(want))
	for i, b := range want {
		var v int64
		if i < len(have) {
			v = have[i]
		}
		out[i] = b.fix(v)
	}
	// Fields of tcp_mem and tcp_rmem are ordered: keep them so.
	for i := 1; i < len(out) && s.Kind == Sysctl && len(out) == 3; i++ {
		out[i] = max(out[i], out[i-1])
	}
	return out
}

// ParseValue reads the blank-separated integers of a sysctl value.
func ParseValue(value string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Fields(value) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("value %q is not a list of integers", value)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("empty value")
	}
	return out, nil
}

// FormatValue writes fields as sysctl reads them: blank-separated.
func FormatValue(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, " ")
}
