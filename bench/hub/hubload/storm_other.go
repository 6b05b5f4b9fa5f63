//go:build !linux

package main

import "errors"

func epollStorm(stormConfig) (stormResult, error) {
	return stormResult{}, errors.New("-dialer epoll needs Linux: use -dialer go")
}
