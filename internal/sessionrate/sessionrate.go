// Package sessionrate is the rate limit of one session's incoming frames:
// two token buckets, frames of any kind and publishes, refilled together
// from one timestamp so that an idle session pays 16 bytes for both. The
// hub and the edge enforce session.frame_rate and session.publish_rate
// with it. It imports nothing of corral.
package sessionrate

import "time"

// Rates are the refill rates (tokens a second) and the bursts (the most a
// bucket holds) of both buckets.
type Rates struct {
	FrameRate    float64
	FrameBurst   int
	PublishRate  float64
	PublishBurst int
}

// Buckets are one session's two buckets. Make them with Full; they are not
// safe for concurrent use (the session's reader alone uses them).
type Buckets struct {
	frame, pub float32 // tokens
	at         int64   // unix ns of the last refill
}

// Full returns buckets holding their bursts at now.
func Full(r Rates, now time.Time) Buckets {
	return Buckets{frame: float32(r.FrameBurst), pub: float32(r.PublishBurst), at: now.UnixNano()}
}

// TakeFrame refills both buckets to now and spends a frame token if there
// is one.
func (b *Buckets) TakeFrame(now time.Time, r Rates) bool {
	b.refill(now, r)
	return take(&b.frame)
}

// TakePublish refills both buckets to now and spends a publish token if
// there is one.
func (b *Buckets) TakePublish(now time.Time, r Rates) bool {
	b.refill(now, r)
	return take(&b.pub)
}

// refill adds the tokens earned since the last refill, up to the bursts.
func (b *Buckets) refill(now time.Time, r Rates) {
	t := now.UnixNano()
	if t <= b.at {
		return
	}
	dt := float64(t-b.at) / 1e9
	b.frame = float32(min(float64(r.FrameBurst), float64(b.frame)+r.FrameRate*dt))
	b.pub = float32(min(float64(r.PublishBurst), float64(b.pub)+r.PublishRate*dt))
	b.at = t
}

// take spends one token of a bucket if it has one.
func take(tokens *float32) bool {
	if *tokens < 1 {
		return false
	}
	*tokens--
	return true
}
