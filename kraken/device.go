package kraken

import (
	"encoding/binary"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/backoff"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// Close codes a peer never sends in a frame: no status in the close frame
// (1005) and a connection that ended without a close frame (1006).
const (
	closeNoStatus wire.CloseCode = 1005
	closeAbnormal wire.CloseCode = 1006
)

// Device states.
const (
	stIdle    uint8 = iota // not started, or waiting for its next attempt
	stDialing              // TCP connect and upgrade in flight
	stHello                // upgraded, Hello sent, waiting for Welcome
	stUp                   // session held (Welcome received)
	stStopped              // the run ended, or a terminal close
)

// conn is one attempt's connection to a server: a WebSocket on the
// poller (wsConn, ws.go) or a gRPC Connect stream (grpcConn, grpc.go).
// Both hand the device the server's frames (device.frame), the upgrade or
// the stream's start (device.upgraded) and their end (device.ended), so
// the device's rules and counts are one whatever the transport.
type conn interface {
	// sendFrame sends one client frame; safe for concurrent use.
	sendFrame(f *corralv1.ClientFrame) error
	// cut ends the connection without a word, as a network drop would.
	cut()
	// close ends the connection as a client that leaves: code on
	// WebSocket, the end of the stream on gRPC.
	close(code wire.CloseCode)
}

// chanPos is a device's position in one channel, as the client SDK keeps
// it: the epoch and the highest offset delivered (the resume position;
// P0 is acknowledged on receipt, so nothing unacknowledged holds it back),
// plus what the application-level checks need.
type chanPos struct {
	epoch    string
	received uint64 // highest offset delivered: the resume position
	from     uint64 // offset at the first subscription: P0 after it is expected
	fromSet  bool
	appLast  uint64 // highest offset the application saw (duplicate check)
	p0       uint32 // P0 messages the application saw
}

// devRand is a device's own random source for its backoff draws
// (splitmix64): eight bytes instead of a math/rand generator, seeded from
// the scenario's seed and the device's number so a run is reproducible.
type devRand struct{ s uint64 }

func (r *devRand) Float64() float64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// device is one simulated device: a session with the session protocol of
// package wire, its resume positions, and its reconnect schedule. Its
// mutex guards every field below it; callbacks come from the poller, the
// attempts' dial goroutines and timers.
type device struct {
	r      *runner
	id     int32
	prio   uint8 // 0 (P0) .. 2
	tenant uint16
	region atomic.Uint32 // index of the device's region (Config.Regions)
	node   *originCount  // the origin of the held session (under mu)

	mu        sync.Mutex
	state     uint8
	gen       uint32 // attempt number, to drop callbacks of old attempts
	conn      conn
	said      *wire.Close // a GoAway or Error that explains the coming close
	attemptAt time.Time
	timer     *time.Timer
	retry     backoff.Backoff
	rnd       devRand
	storm     int16     // storm whose drop the device is recovering from; -1 none
	pending   int16     // storm that is cutting the device now; -1 none
	cutAt     time.Time // when kraken cut it for pending
	downAt    time.Time
	tries     int32  // attempts since the drop
	envBase   uint32 // the reconnect envelope of the last Welcome, ms (0: none)
	envCap    uint32
	chans     []chanPos
	round     []endpoint // the endpoints of the round of attempts under way (nil: none)
	order     []int      // the indexes in round of its attempts still to come (backoff.Round)
	last      string     // the address of the last attempt: last in the next round

	tickets tickets // its last TLS session (wss, grpcs), outside mu
}

// schedule arms the device's timer to call f after d.
func (d *device) schedule(delay time.Duration, f func()) {
	if d.timer != nil {
		d.timer.Stop()
	}
	d.timer = d.r.afterFunc(delay, f)
}

// attempt starts a connection attempt.
func (d *device) attempt() {
	d.mu.Lock()
	if d.state == stStopped || d.r.stopping() {
		d.mu.Unlock()
		return
	}
	now := time.Now()
	d.gen++
	gen := d.gen
	d.state, d.attemptAt, d.conn, d.said = stDialing, now, nil, nil
	if d.storm >= 0 {
		d.tries++
	}
	d.schedule(d.r.connectTimeout, func() { d.timeout(gen) })
	// The attempt goes to the next endpoint of the round under way, or
	// begins a round: at once over addresses, after resolving over names
	// (beginRound, from the dial).
	var ep endpoint
	var targets []target // set: names to resolve, the round begins in the dial
	if len(d.order) == 0 {
		ts, eps := d.r.targetsOf(d)
		if eps == nil {
			targets = ts
		} else {
			d.beginRoundLocked(eps)
		}
	}
	if targets == nil {
		ep = d.nextLocked()
	}
	d.mu.Unlock()
	d.r.poisonAttempt(d, now)
	d.r.rec.attempt(now)
	d.r.attempts.Add(1)
	d.r.dial(d, gen, ep, targets)
}

// beginRoundLocked begins a round of attempts over eps in the client
// SDK's order (backoff.Round: a random order, the last attempt's endpoint
// last). Caller holds mu.
func (d *device) beginRoundLocked(eps []endpoint) {
	last := slices.IndexFunc(eps, func(e endpoint) bool { return e.addr == d.last })
	d.round, d.order = eps, backoff.Round(len(eps), last, &d.rnd)
}

// nextLocked takes the round's next endpoint for an attempt. Caller holds
// mu; the round has one left.
func (d *device) nextLocked() endpoint {
	ep := d.round[d.order[0]]
	d.order = d.order[1:]
	d.last = ep.addr
	return ep
}

// beginRound begins the round of attempt gen over the endpoints its
// targets resolved to and returns the first; false when the attempt is
// over.
func (d *device) beginRound(gen uint32, eps []endpoint) (endpoint, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stale(gen) || d.state != stDialing {
		return endpoint{}, false
	}
	d.beginRoundLocked(eps)
	return d.nextLocked(), true
}

// endRoundLocked ends the round under way: the next attempt begins one.
// Caller holds mu.
func (d *device) endRoundLocked() { d.round, d.order = nil, nil }

// stale reports whether gen is not the current attempt (caller holds mu).
func (d *device) stale(gen uint32) bool { return gen != d.gen || d.state == stStopped }

// dialFailed: the TCP connect or the request failed.
func (d *device) dialFailed(gen uint32, reason string) {
	d.mu.Lock()
	if d.stale(gen) || d.state != stDialing {
		d.mu.Unlock()
		return
	}
	d.failLocked(reason, wire.Close{Code: closeAbnormal})
}

// connected: TCP is up.
func (d *device) connected(gen uint32) {
	d.mu.Lock()
	at, ok := d.attemptAt, !d.stale(gen)
	d.mu.Unlock()
	if ok {
		d.r.rec.res.Latency.Connect.Record(time.Since(at))
	}
}

// attach makes w the attempt's connection; false when the attempt is over.
func (d *device) attach(gen uint32, w conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stale(gen) || d.state != stDialing {
		return false
	}
	d.conn = w
	return true
}

// timeout: the attempt did not reach Welcome within connect_timeout.
func (d *device) timeout(gen uint32) {
	d.mu.Lock()
	if d.stale(gen) || d.state == stUp || d.state == stIdle {
		d.mu.Unlock()
		return
	}
	w := d.conn
	d.conn = nil
	d.failLocked("timeout", wire.Close{Code: closeAbnormal})
	if w != nil {
		w.cut()
	}
}

// failLocked counts a failed attempt and schedules the next one, or stops
// the device on a terminal close. It unlocks mu.
func (d *device) failLocked(reason string, cl wire.Close) {
	d.state, d.conn = stIdle, nil
	terminal := !cl.Code.Retryable()
	var delay time.Duration
	if terminal {
		d.state = stStopped
		d.timer.Stop()
	} else if backoff.TryNext(true, cl.RetryAfter) && len(d.order) > 0 {
		// The client SDK's round: a failure without a hint goes on to
		// the round's next endpoint at once.
		d.schedule(0, d.attempt)
	} else {
		d.endRoundLocked()
		delay = d.retry.NextAfterWithin(cl.RetryAfter, cl.RetryWithin)
		d.schedule(delay, d.attempt)
	}
	at := d.attemptAt
	d.mu.Unlock()
	d.r.poisonFailed(d, at)
	d.r.rec.failure(reason, int(d.prio))
	d.r.rec.failedAt(time.Now(), int(d.prio))
	if terminal {
		d.r.rec.terminal(int(d.prio))
	}
}

// upgraded: the server accepted the WebSocket; send Hello with a
// subscription per channel, each from its resume position.
func (d *device) upgraded(w conn) {
	d.mu.Lock()
	if d.conn != w {
		d.mu.Unlock()
		return
	}
	d.state = stHello
	h := &corralv1.Hello{Token: d.r.tokens[d.tenant][d.prio], Priority: wire.PriorityOfRank(int(d.prio)), Client: "kraken"}
	for i := range d.chans {
		s := &corralv1.Subscribe{Channel: channelName(i)}
		if c := &d.chans[i]; c.epoch != "" {
			s.From = &corralv1.Position{Epoch: c.epoch, Offset: c.received}
		}
		h.Subscribe = append(h.Subscribe, s)
	}
	d.mu.Unlock()
	d.sendFrame(w, &corralv1.ClientFrame{Id: 1, Frame: &corralv1.ClientFrame_Hello{Hello: h}})
}

func (d *device) sendFrame(w conn, f *corralv1.ClientFrame) {
	if err := w.sendFrame(f); err != nil {
		w.cut()
	}
}

// channelName is the name of a device's i-th channel.
func channelName(i int) string { return "c" + strconv.Itoa(i) }

// frame handles one server frame, whatever the transport it came by.
func (d *device) frame(w conn, f *corralv1.ServerFrame) {
	now := time.Now()
	switch fr := f.GetFrame().(type) {
	case *corralv1.ServerFrame_Welcome:
		d.welcome(w, fr.Welcome, now)
	case *corralv1.ServerFrame_Subscribed:
		d.subscribed(w, fr.Subscribed, now)
	case *corralv1.ServerFrame_Message:
		d.onMessage(w, fr.Message, now)
	case *corralv1.ServerFrame_Ping:
		d.sendFrame(w, &corralv1.ClientFrame{Id: f.GetId(), Frame: &corralv1.ClientFrame_Pong{Pong: &corralv1.Pong{Payload: fr.Ping.GetPayload()}}})
	case *corralv1.ServerFrame_GoAway, *corralv1.ServerFrame_Error:
		if e := f.GetError(); e != nil && e.GetChannel() != "" {
			d.r.rec.failure("subscribe_"+strconv.Itoa(int(e.GetCode())), int(d.prio))
			return
		}
		if cl, ok := wire.CloseFromFrame(f); ok {
			d.mu.Lock()
			if d.conn == w {
				d.said = &cl
			}
			d.mu.Unlock()
		}
	}
}

func (d *device) welcome(w conn, wl *corralv1.Welcome, now time.Time) {
	d.mu.Lock()
	if d.conn != w || d.state != stHello {
		d.mu.Unlock()
		return
	}
	d.state = stUp
	d.envelope(wl.GetHints())
	d.retry.Reset()
	lat := now.Sub(d.attemptAt)
	storm, down, tries := d.storm, d.downAt, d.tries
	d.storm, d.tries = -1, 0
	d.node = d.r.originHeld(wl.GetNodeId())
	d.node.held.Add(1)
	at := d.attemptAt
	d.mu.Unlock()
	d.r.poisonWelcome(d, at, wl.GetNodeId())
	d.r.held.Add(1)
	rec := d.r.rec
	rec.res.Latency.Welcome.Record(lat)
	rec.welcome(wl.GetNodeId(), int(d.prio))
	if storm >= 0 {
		rec.back(int(storm), now, now.Sub(down), int(tries), int(d.prio))
		d.r.recovering.Add(-1)
	}
}

// envelope sets the device's reconnect schedule for the session a
// Welcome with hints started, as package client does: the base and cap
// the server advertised (reconnect_base_ms, reconnect_cap_ms) in place of
// the scenario's, and the scenario's again after a Welcome without them.
// Called with mu held.
func (d *device) envelope(h *corralv1.ServerHints) {
	base, hcap := h.GetReconnectBaseMs(), h.GetReconnectCapMs()
	if base == d.envBase && hcap == d.envCap {
		return
	}
	c := d.r.backoff.Envelope(time.Duration(base)*time.Millisecond, time.Duration(hcap)*time.Millisecond)
	b, err := backoff.NewBackoff(c, &d.rnd)
	if err != nil {
		return // Envelope keeps a valid Config valid; the schedule stays
	}
	d.retry, d.envBase, d.envCap = *b, base, hcap
}

func (d *device) subscribed(w conn, s *corralv1.Subscribed, now time.Time) {
	i, ok := channelIndex(s.GetChannel(), len(d.chans))
	if !ok {
		return
	}
	d.mu.Lock()
	if d.conn != w {
		d.mu.Unlock()
		return
	}
	c := &d.chans[i]
	pos := s.GetPosition()
	if !s.GetRecovered() {
		// Live, or a resume that could not recover: continue from the
		// server's position (the loss stays counted as missing P0).
		if c.epoch != pos.GetEpoch() {
			c.epoch = d.r.intern(pos.GetEpoch())
			c.appLast = 0
		}
		c.received = pos.GetOffset()
		c.appLast = max(c.appLast, c.received)
	}
	if !c.fromSet {
		c.from, c.fromSet = pos.GetOffset(), true
	}
	at := d.attemptAt
	d.mu.Unlock()
	if s.GetResumed() {
		d.r.rec.resume(s.GetRecovered())
		d.r.rec.res.Latency.Resume.Record(now.Sub(at))
	}
}

// channelIndex parses "c<i>".
func channelIndex(name string, n int) (int, bool) {
	if len(name) < 2 || name[0] != 'c' {
		return 0, false
	}
	i, err := strconv.Atoi(name[1:])
	return i, err == nil && i >= 0 && i < n
}

func (d *device) onMessage(w conn, m *corralv1.Message, now time.Time) {
	i, ok := channelIndex(m.GetChannel(), len(d.chans))
	if !ok {
		return
	}
	p := wire.Rank(m.GetPriority())
	rec := d.r.rec
	d.mu.Lock()
	if d.conn != w {
		d.mu.Unlock()
		return
	}
	c := &d.chans[i]
	dup, appDup := false, false
	switch {
	case m.GetEpoch() == c.epoch && m.GetOffset() <= c.received:
		dup = true // dedupe by offset: already delivered
	default:
		if m.GetEpoch() != c.epoch {
			c.epoch, c.appLast = d.r.intern(m.GetEpoch()), 0
		}
		c.received = m.GetOffset()
		// The application's own check: an offset it saw already.
		appDup = m.GetOffset() <= c.appLast
		c.appLast = max(c.appLast, m.GetOffset())
		if p == 0 && !appDup {
			c.p0++
		}
	}
	d.mu.Unlock()
	rec.messages(func(ms *Messages) {
		ms.Received[priorityLabels[p]]++
		switch {
		case dup:
			ms.WireDuplicates++
		case appDup:
			if p == 0 {
				ms.P0Duplicated++
			}
		default:
			ms.Delivered[priorityLabels[p]]++
		}
	})
	if !dup && len(m.GetData()) >= 8 {
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(m.GetData())))
		rec.res.Latency.Deliver[priorityLabels[p]].Record(now.Sub(sent))
	}
	if p == 0 {
		d.sendFrame(w, &corralv1.ClientFrame{Frame: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Channel: m.GetChannel(), Epoch: m.GetEpoch(), Offset: m.GetOffset()}}})
	}
}

// ended: the connection w is over (reason names a failure of ours, or
// "" for the server's close cl).
func (d *device) ended(w conn, reason string, cl wire.Close) {
	d.mu.Lock()
	if d.conn != w || d.state == stStopped {
		d.mu.Unlock()
		return
	}
	if d.said != nil {
		if cl.Code == closeNoStatus || cl.Code == closeAbnormal {
			cl.Code = d.said.Code
		}
		if cl.RetryAfter == 0 {
			cl.RetryAfter, cl.RetryWithin = d.said.RetryAfter, d.said.RetryWithin
		}
		if reason == "cut" {
			reason = ""
		}
	}
	if reason == "" {
		reason = "close_" + strconv.Itoa(int(cl.Code))
	}
	if d.state != stUp {
		d.failLocked(reason, cl)
		return
	}
	// A held session ended: the device starts to recover.
	d.r.held.Add(-1)
	d.r.poisonLost(d, time.Now())
	d.leftOrigin()
	d.r.lastLoss.Store(time.Now().UnixNano())
	// A device loses its session when its network does, not when this
	// process gets round to the socket: under a drop of 50,000 the event
	// loop handles the last close 1-2 s after the cut. A session kraken cut
	// is therefore down from the cut, and its backoff runs from then.
	now := time.Now()
	down := now
	storm := d.pending
	if storm < 0 {
		storm = d.r.latestStorm()
	} else {
		d.r.cutting.Add(-1)
		down = d.cutAt
	}
	d.pending = -1
	d.endRoundLocked()
	if storm >= 0 && d.storm < 0 {
		d.storm, d.downAt, d.tries = storm, down, 0
		d.r.recovering.Add(1)
		d.r.rec.dropped(int(storm), int(d.prio))
	}
	d.state, d.conn = stIdle, nil
	terminal := !cl.Code.Retryable()
	if terminal {
		d.state = stStopped
		d.timer.Stop()
		if d.storm >= 0 {
			d.r.recovering.Add(-1)
		}
	} else {
		d.schedule(max(0, d.retry.NextAfterWithin(cl.RetryAfter, cl.RetryWithin)-now.Sub(down)), d.attempt)
	}
	d.mu.Unlock()
	d.r.rec.disconnect(reason, int(d.prio))
	if terminal {
		d.r.rec.terminal(int(d.prio))
	}
}

// drop cuts the device's session for storm s, as a network drop would;
// false when it holds none.
func (d *device) drop(s int16) bool {
	d.mu.Lock()
	if d.state != stUp || d.conn == nil {
		d.mu.Unlock()
		return false
	}
	if d.pending < 0 {
		d.r.cutting.Add(1) // until ended sees the cut
		d.cutAt = time.Now()
	}
	d.pending = s
	w := d.conn
	d.mu.Unlock()
	w.cut()
	return true
}

// stop ends the device at the end of the run: a normal close.
func (d *device) stop() {
	d.mu.Lock()
	if d.state == stUp {
		d.r.held.Add(-1)
		d.leftOrigin()
	}
	d.state = stStopped
	if d.pending >= 0 {
		d.r.cutting.Add(-1)
		d.pending = -1
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	w := d.conn
	d.conn = nil
	d.mu.Unlock()
	if w != nil {
		w.close(wire.CloseNormal)
	}
}

// leftOrigin counts the held session off its origin (caller holds mu).
func (d *device) leftOrigin() {
	if d.node != nil {
		d.node.held.Add(-1)
		d.node = nil
	}
}
