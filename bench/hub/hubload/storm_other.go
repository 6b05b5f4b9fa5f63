//go:build !linux

package main

import (
	"errors"
	"time"
)

func epollStorm(stormConfig) (stormResult, error) {
	return stormResult{}, errors.New("-dialer epoll needs Linux: use -dialer go")
}

// cpuTime is not measured outside Linux (0).
func cpuTime() time.Duration { return 0 }
