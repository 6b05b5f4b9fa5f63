package authdns

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// DefaultWatchInterval is how often Watch looks at the configuration file.
const DefaultWatchInterval = time.Second

// WatchOptions configure Watch.
type WatchOptions struct {
	// Path is the configuration file.
	Path string
	// Load reads and validates the file; nil means LoadConfig.
	Load func(path string) (*Config, error)
	// Signals triggers a reload on every value received (the command sends
	// SIGHUP here); nil means only file changes.
	Signals <-chan os.Signal
	// Interval is how often the file is checked for a change of content;
	// 0 means DefaultWatchInterval, negative disables polling.
	Interval time.Duration
}

// Watch reloads the configuration at o.Path when its content changes and
// on every signal, until ctx ends. A file that fails to load or validate
// leaves the running zones untouched; its error, which names the file,
// line and key, is logged.
func (s *Server) Watch(ctx context.Context, o WatchOptions) {
	if o.Load == nil {
		o.Load = LoadConfig
	}
	if o.Interval == 0 {
		o.Interval = DefaultWatchInterval
	}
	var tick <-chan time.Time
	if o.Interval > 0 {
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		tick = t.C
	}
	// The baseline is the content the running zones came from when
	// LoadConfig read them: a change made before Watch started is still a
	// change.
	last := s.cfg.sum
	if last == nil {
		last = fileSum(o.Path)
	}
	reload := func(why string) {
		cfg, err := o.Load(o.Path)
		if err == nil {
			err = s.Reload(cfg)
		} else {
			s.reloadErrors.Add(1)
		}
		if err != nil {
			s.log.Error("reload failed; still serving the previous zones", "trigger", why, "err", err)
			return
		}
		s.log.Info("config reloaded", "trigger", why, "path", o.Path)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.Signals:
			last = fileSum(o.Path)
			reload("signal")
		case <-tick:
			sum := fileSum(o.Path)
			if sum == nil || bytes.Equal(sum, last) {
				continue
			}
			last = sum
			reload("file change")
		}
	}
}

// fileSum hashes the content of path; nil when it cannot be read.
func fileSum(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return contentSum(b)
}

// contentSum is the digest Watch compares file contents by.
func contentSum(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}
