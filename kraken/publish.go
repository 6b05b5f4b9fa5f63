package kraken

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// publishWorkers is the number of publishes in flight at once.
const publishWorkers = 8

// publisher sends the scenario's messages through the hub publish API
// (HTTP, POST /v1/publish with the API key) and keeps, per tenant and
// channel, the P0 offsets the hub acknowledged: what every subscriber
// must receive.
type publisher struct {
	r      *runner
	client *http.Client
	url    string
	jobs   chan pubJob
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Uint64

	mu   sync.Mutex
	logs map[string]*chanLog // "t0/c0"
}

// chanLog is what was published on one channel.
type chanLog struct {
	epoch string
	p0    []uint64 // acknowledged P0 offsets, ascending
}

type pubJob struct {
	at     time.Time // intended send time (the open model's schedule)
	rank   int
	tenant int
	ch     int
}

// publishClient is the publishers' HTTP client: an https:// publish URL
// is checked against roots (Config.CAFile's CAs; nil: the system's).
func publishClient(roots *x509.CertPool) *http.Client {
	c := &http.Client{Timeout: 10 * time.Second}
	if roots != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
		c.Transport = tr
	}
	return c
}

func newPublisher(r *runner) *publisher {
	ctx, cancel := context.WithCancel(context.Background())
	p := &publisher{
		r: r, client: publishClient(r.roots), url: strings.TrimSuffix(r.cfg.PublishURL, "/") + "/v1/publish",
		jobs: make(chan pubJob, 1024), ctx: ctx, cancel: cancel, logs: map[string]*chanLog{},
	}
	for range publishWorkers {
		p.wg.Go(p.worker)
	}
	return p
}

// stop ends the streams and waits for the publishes in flight.
func (p *publisher) stop() {
	p.cancel()
	p.wg.Wait()
	p.client.CloseIdleConnections()
}

// stream publishes at s.rate from t0+s.at for s.dur: message k is due at
// t0 + at + k/rate whatever became of the previous ones, and carries its
// due time, so the publish -> deliver latency counts the time a message
// waited behind slow ones (coordinated omission corrected by the schedule).
func (p *publisher) stream(ctx context.Context, t0 time.Time, s publishStream) {
	start, end := t0.Add(s.at), t0.Add(s.at+s.dur)
	T, C := p.r.pl.tenants, p.r.pl.channels
	for k := int64(0); ; k++ {
		due := start.Add(time.Duration(float64(k) * float64(time.Second) / s.rate))
		if !due.Before(end) || !sleepUntil(ctx, due) || p.ctx.Err() != nil {
			return
		}
		n := int(p.seq.Add(1) - 1)
		select {
		case p.jobs <- pubJob{at: due, rank: s.rank, tenant: n % T, ch: n / T % C}:
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *publisher) worker() {
	for {
		select {
		case j := <-p.jobs:
			p.publish(j)
		case <-p.ctx.Done():
			return
		}
	}
}

type publishReply struct {
	Epoch  string `json:"epoch"`
	Offset uint64 `json:"offset"`
}

func (p *publisher) publish(j pubJob) {
	data := make([]byte, 16)
	binary.BigEndian.PutUint64(data, uint64(j.at.UnixNano()))
	body, _ := json.Marshal(map[string]any{ // plain types: cannot fail
		"tenant": "t" + strconv.Itoa(j.tenant), "channel": channelName(j.ch),
		"priority": priorityLabels[j.rank], "data_base64": data,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		p.fail("request")
		return
	}
	req.Header.Set("Authorization", "Bearer "+p.r.cfg.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		p.fail("error")
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var rep publishReply
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &rep) != nil {
		p.fail("http_" + strconv.Itoa(resp.StatusCode))
		return
	}
	p.r.rec.messages(func(m *Messages) { m.Published[priorityLabels[j.rank]]++ })
	if j.rank != 0 {
		return
	}
	key := "t" + strconv.Itoa(j.tenant) + "/" + channelName(j.ch)
	p.addP0(key, rep.Epoch, rep.Offset)
	if p.r.link != nil {
		p.r.link.p0Acked(key, rep.Epoch, rep.Offset) // the other agents' devices expect it too
	}
}

// addP0 keeps an acknowledged P0 offset of channel key ("t0/c0").
func (p *publisher) addP0(key, epoch string, offset uint64) {
	p.mu.Lock()
	l := p.logs[key]
	if l == nil || l.epoch != epoch {
		l = &chanLog{epoch: epoch}
		p.logs[key] = l
	}
	// Replies of concurrent publishes arrive out of order: keep the
	// offsets sorted.
	i := len(l.p0)
	for i > 0 && l.p0[i-1] > offset {
		i--
	}
	l.p0 = append(l.p0, 0)
	copy(l.p0[i+1:], l.p0[i:])
	l.p0[i] = offset
	p.mu.Unlock()
}

func (p *publisher) fail(reason string) {
	p.r.rec.messages(func(m *Messages) { m.PublishFailures[reason]++ })
}

// p0Tally returns the P0 messages the devices should have received (every
// acknowledged P0 offset of their tenant's channels after their first
// subscription) and how many of those they did not.
func (r *runner) p0Tally() (expected, lost int64) {
	p := r.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range r.devices {
		d.mu.Lock()
		for i := range d.chans {
			c := &d.chans[i]
			l := p.logs["t"+strconv.Itoa(int(d.tenant))+"/"+channelName(i)]
			if !c.fromSet || l == nil {
				continue
			}
			var e int64
			for j := len(l.p0) - 1; j >= 0 && l.p0[j] > c.from; j-- {
				e++
			}
			expected += e
			lost += max(e-int64(c.p0), 0)
		}
		d.mu.Unlock()
	}
	return expected, lost
}

func (r *runner) p0Missing() int64 {
	_, lost := r.p0Tally()
	return lost
}

// finishMessages fills the P0 tallies into the result.
func (r *runner) finishMessages() {
	e, l := r.p0Tally()
	r.rec.messages(func(m *Messages) { m.P0Expected, m.P0Lost = e, l })
}
