// Package proccpu reads the CPU time of processes for the benchmark
// programs under bench/: another process's from /proc/PID/stat (Linux),
// this one's from getrusage (unix).
package proccpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go supports.
const ClockTick = 100

// Times is a process's CPU time: user (utime) and kernel (stime).
type Times struct{ User, Sys time.Duration }

// CPU is the user and kernel time together.
func (t Times) CPU() time.Duration { return t.User + t.Sys }

// Of returns the CPU time of process pid, all of its threads, from
// /proc/PID/stat; zero for pid 0.
func Of(pid int) (Times, error) {
	if pid == 0 {
		return Times{}, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Times{}, err
	}
	return Parse(string(b))
}

// Parse reads utime and stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may hold spaces
// and parentheses: the fields are counted from the last ')'.
func Parse(s string) (Times, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Times{}, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return Times{}, errors.New("/proc stat: too few fields")
	}
	var ticks [2]int64
	for j, v := range f[11:13] {
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Times{}, fmt.Errorf("/proc stat: %v", err)
		}
		ticks[j] = t
	}
	return Times{User: time.Duration(ticks[0]) * time.Second / ClockTick, Sys: time.Duration(ticks[1]) * time.Second / ClockTick}, nil
}
