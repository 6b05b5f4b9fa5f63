package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countingSource counts its reads: Welcomes is the read's number, every
// third read fails when flaky.
type countingSource struct {
	n     atomic.Int64
	flaky bool
}

func (c *countingSource) Read(context.Context) (int64, int64, error) {
	n := c.n.Add(1)
	if c.flaky && n%3 == 0 {
		return 0, 0, errors.New("no answer")
	}
	return n, 7, nil
}

type deadSource struct{}

func (deadSource) Read(context.Context) (int64, int64, error) {
	return 0, 0, errors.New("connection refused")
}

// TestSamplerReadsEveryInterval: over 1.05 s at 100 ms, each hub is read
// at once and on each of the 10 ticks, at times 0, 100 ms, ... 1 s; a
// failed reading is counted and left out; a hub none of whose readings
// succeeded is an error that names it.
func TestSamplerReadsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 1050*time.Millisecond)
		defer cancel()
		steady, flaky := &countingSource{}, &countingSource{flaky: true}
		got, err := Sampler{Every: 100 * time.Millisecond, Sources: map[string]Source{"hub-1": steady, "hub-2": flaky}}.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rs := got.Hubs["hub-1"]; len(rs) != 11 || rs[10].At != time.Second || rs[10].Welcomes != 11 || rs[3].Open != 7 || got.Failed["hub-1"] != 0 {
			t.Errorf("hub-1: %d readings %+v, %d failed; want 11, the last at 1 s with the 11th read", len(rs), rs, got.Failed["hub-1"])
		}
		if rs := got.Hubs["hub-2"]; len(rs) != 8 || got.Failed["hub-2"] != 3 || rs[2].At != 300*time.Millisecond {
			t.Errorf("hub-2: %d readings %+v, %d failed; want 8 and 3 failed (every third), the third at 300 ms", len(rs), rs, got.Failed["hub-2"])
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
		defer cancel()
		_, err := Sampler{Every: 100 * time.Millisecond, Sources: map[string]Source{"hub-1": &countingSource{}, "hub-9": deadSource{}}}.Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "hub-9: no reading of its metrics succeeded: connection refused") {
			t.Errorf("a hub that never answers: %v, want an error naming it", err)
		}
	})
	if _, err := (Sampler{Sources: map[string]Source{"hub-1": deadSource{}}}).Run(context.Background()); err == nil {
		t.Error("a sampler without an interval ran")
	}
}
