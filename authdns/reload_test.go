package authdns

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"

	"github.com/miekg/dns"
)

const reloadZone = `
listen: 127.0.0.1:0
rrl: {enabled: false}
zones:
  - origin: corral.test
    ns: [ns1.corral.test]
    records:
      - {name: app, type: A, values: [ADDR]}
`

// TestReloadBadConfigKeepsOldZone edits the config file of a running
// server: a broken file leaves the old zone answering, a good one replaces
// it; a signal reloads too.
func TestReloadBadConfigKeepsOldZone(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, strings.Replace(reloadZone, "ADDR", "10.0.0.1", 1))
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	s, addr := startConfig(t, cfg, Options{Logger: testLogger(&logs)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, WatchOptions{Path: path, Signals: sig, Interval: 10 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	answers := func() []string { return answerData(ask(t, addr, "udp", "app.corral.test", dns.TypeA, nil)) }
	if got := answers(); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("before reload: %v", got)
	}

	// A bad value on line 8: the old zone keeps answering and the log
	// names the file and line.
	writeFile(t, dir, strings.Replace(reloadZone, "ADDR", "10.0.0.300", 1))
	testkit.WaitFor(t, 10*time.Second, "the failed reload to be logged", func() bool { return strings.Contains(logs.String(), "reload failed") })
	if !strings.Contains(logs.String(), path+":8:") {
		t.Errorf("log does not name %s:8:\n%s", path, logs.String())
	}
	if s.reloadErrors.Load() == 0 {
		t.Error("the failed reload was not counted")
	}
	if got := answers(); !slices.Equal(got, []string{"10.0.0.1"}) || s.Reloads() != 0 {
		t.Fatalf("after a bad config: %v (reloads %d), want the old zone", got, s.Reloads())
	}

	writeFile(t, dir, strings.Replace(reloadZone, "ADDR", "10.0.0.2", 1))
	testkit.WaitFor(t, 10*time.Second, "the good config to serve", func() bool { return slices.Equal(answers(), []string{"10.0.0.2"}) })

	// A signal reloads without a change of content.
	before := s.Reloads()
	sig <- os.Interrupt
	testkit.WaitFor(t, 10*time.Second, "a reload on signal", func() bool { return s.Reloads() > before })
}

func TestReloadRejectsInvalidConfig(t *testing.T) {
	s := newTestServer(t)
	bad := decodeConfig(t, testZone)
	bad.Zones[0].Records[1].Values[0].Value = "not-an-ip"
	if err := s.Reload(bad); err == nil {
		t.Fatal("Reload accepted an invalid config")
	}
	r, _ := handleRaw(t, s, mkQuery("static.corral.test", dns.TypeA, nil), false)
	if len(r.Answer) != 2 {
		t.Errorf("old zone lost after a failed reload: %v", r)
	}
}

// TestNewRejectsInvalidRecord checks that New, which compiles the zones
// once instead of calling Validate, still refuses a bad record and names
// its key.
func TestNewRejectsInvalidRecord(t *testing.T) {
	bad := decodeConfig(t, testZone)
	bad.Zones[0].Records[1].Values[0].Value = "not-an-ip"
	_, err := New(bad, Options{})
	if err == nil || !strings.Contains(err.Error(), "zones[0].records[1].values[0]") {
		t.Fatalf("New: %v, want an error naming zones[0].records[1].values[0]", err)
	}
	if verr := bad.Validate(); verr == nil || verr.Error() != err.Error() {
		t.Errorf("New said %v, Validate said %v: want the same error", err, verr)
	}
}

// A change made after the config was loaded but before Watch started is a
// change: the watcher compares the file with what is served.
func TestWatchSeesChangeMadeBeforeItStarted(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, strings.Replace(reloadZone, "ADDR", "10.0.0.1", 1))
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s, addr := startConfig(t, cfg, Options{})
	writeFile(t, dir, strings.Replace(reloadZone, "ADDR", "10.0.0.2", 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, WatchOptions{Path: path, Interval: 10 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	testkit.WaitFor(t, 10*time.Second, "the file written before Watch to serve", func() bool {
		return slices.Equal(answerData(ask(t, addr, "udp", "app.corral.test", dns.TypeA, nil)), []string{"10.0.0.2"})
	})
}
