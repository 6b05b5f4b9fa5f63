package kraken

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/hub"
)

// lockedBuffer is a bytes.Buffer for a run's progress.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const liveScenario = `
name: live
duration: 2s
population: {devices: 10, initial: 10, protocol: websocket, priorities: [{name: P0, share: 0.5}, {name: P2, share: 0.5}]}
dns: {policy: multivalue}
origins: [{name: hub, headroom: 2, max_new_per_second: 1000}]
traffic:
  disconnects:
    - {at: 500ms, share: 0.5}
`

// TestLiveTable: with Live the progress is a table redrawn in place (the
// cursor moved up over the previous one, each line cleared) holding the
// priorities, the origin with its share and the storm; without it, plain
// lines with no escape.
func TestLiveTable(t *testing.T) {
	h := startHub(t, hub.Options{})
	var live, plain lockedBuffer
	cfg := Config{Targets: []string{h.url()}, Token: testToken(testSecret), Progress: &live, Live: true, ProgressEvery: 200 * time.Millisecond}
	runScenario(t, loadScenario(t, "live.yaml", liveScenario), cfg)
	out := live.String()
	for _, want := range []string{"kraken live", "\x1b[2Khub-a", "100.0%", "\x1b[2Kp0 ", "\x1b[2Kdrop", "held 10/10"} {
		if !strings.Contains(out, want) {
			t.Errorf("live output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\x1b[") < 10 || !strings.Contains(out, "A\x1b[2Kkraken live") {
		t.Errorf("the table is not redrawn over itself:\n%q", out)
	}
	cfg.Progress, cfg.Live = &plain, false
	runScenario(t, loadScenario(t, "live.yaml", liveScenario), cfg)
	if p := plain.String(); strings.Contains(p, "\x1b") || !strings.Contains(p, "kraken: end held 10/10") {
		t.Errorf("plain progress:\n%s", p)
	}
}
