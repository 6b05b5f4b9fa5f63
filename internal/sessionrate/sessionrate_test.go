package sessionrate

import (
	"testing"
	"time"
	"unsafe"
)

func TestBuckets(t *testing.T) {
	r := Rates{FrameRate: 10, FrameBurst: 3, PublishRate: 1, PublishBurst: 2}
	t0 := time.Unix(1000, 0)
	b := Full(r, t0)
	for i := range 3 {
		if !b.TakeFrame(t0, r) {
			t.Fatalf("frame %d of a burst of 3 refused", i+1)
		}
	}
	if b.TakeFrame(t0, r) {
		t.Fatal("a 4th frame within a burst of 3 taken")
	}
	if !b.TakeFrame(t0.Add(100*time.Millisecond), r) {
		t.Fatal("no frame token after 100 ms at 10/s")
	}
	if b.TakeFrame(t0.Add(100*time.Millisecond), r) {
		t.Fatal("two frame tokens after 100 ms at 10/s")
	}
	// The publish bucket refilled to its burst meanwhile, no further.
	t1 := t0.Add(time.Hour)
	for i := range 2 {
		if !b.TakePublish(t1, r) {
			t.Fatalf("publish %d of a burst of 2 refused", i+1)
		}
	}
	if b.TakePublish(t1, r) {
		t.Fatal("a publish beyond the burst taken after an hour")
	}
	if b.TakePublish(t1.Add(-time.Second), r) {
		t.Fatal("a clock gone back earned a token")
	}
	if n := unsafe.Sizeof(b); n != 16 {
		t.Fatalf("Buckets take %d bytes a session, want 16", n)
	}
}
