package limit

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// The histograms below are log-linear: values below 16 ns are exact, above
// that each power of two is split in 16 buckets, so a bucket is at most
// 6.25 % wide and its midpoint is within 3.2 % of any value in it.
const (
	subBits    = 4
	subCount   = 1 << subBits
	maxExp     = 42 // 2^42 ns is about 73 minutes, above MaxRTT
	numBuckets = (maxExp-subBits+1)*subCount + subCount
)

// bucketOf returns the bucket index of a latency. Negative values go to
// bucket 0 and values above MaxRTT to the last bucket.
func bucketOf(d time.Duration) int {
	if d < subCount {
		if d < 0 {
			return 0
		}
		return int(d)
	}
	v := uint64(d)
	e := bits.Len64(v) - 1
	if e > maxExp {
		return numBuckets - 1
	}
	sub := int(v>>(uint(e)-subBits)) & (subCount - 1)
	return (e-subBits+1)*subCount + sub
}

// bucketValue returns the representative latency of a bucket (its midpoint).
func bucketValue(i int) time.Duration {
	if i < subCount {
		return time.Duration(i)
	}
	e := i/subCount + subBits - 1
	sub := i % subCount
	lo := uint64(subCount+sub) << uint(e-subBits)
	width := uint64(1) << uint(e-subBits)
	return time.Duration(lo + width/2)
}

// hist is a weighted latency histogram for one goroutine at a time.
type hist struct {
	counts   [numBuckets]int64
	total    int64
	lo, hi   int // range of touched buckets, valid when hasRange
	hasRange bool
}

func (h *hist) add(d time.Duration, w int64) {
	i := bucketOf(d)
	h.counts[i] += w
	h.total += w
	if !h.hasRange {
		h.lo, h.hi, h.hasRange = i, i, true
		return
	}
	h.lo = min(h.lo, i)
	h.hi = max(h.hi, i)
}

// quantile returns the latency at quantile q in [0, 1], or 0 when empty.
func (h *hist) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := int64(q*float64(h.total) + 0.5)
	rank = max(1, min(rank, h.total))
	var seen int64
	for i := h.lo; i <= h.hi; i++ {
		seen += h.counts[i]
		if seen >= rank {
			return bucketValue(i)
		}
	}
	return bucketValue(h.hi)
}

func (h *hist) reset() {
	if h.hasRange {
		clear(h.counts[h.lo : h.hi+1])
	}
	h.total, h.hasRange = 0, false
}

// atomicHist is a latency histogram that many goroutines add to without a
// lock; one goroutine at a time drains it.
type atomicHist struct {
	counts [numBuckets]atomic.Int64
}

func (h *atomicHist) add(d time.Duration) {
	h.counts[bucketOf(d)].Add(1)
}

// drain moves every count out of h, calling fn for each non-empty bucket.
// Counts added while drain runs are either seen now or by the next drain,
// never lost.
func (h *atomicHist) drain(fn func(d time.Duration, n int64)) {
	for i := range h.counts {
		if h.counts[i].Load() == 0 {
			continue
		}
		if n := h.counts[i].Swap(0); n > 0 {
			fn(bucketValue(i), n)
		}
	}
}
