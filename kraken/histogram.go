package kraken

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: values are microseconds from 1 µs to 1 h, three
// significant digits (0.1 % resolution), so histograms of every agent have
// one geometry and merge without loss.
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histDigits  = 3
)

// Histogram is an HDR histogram of durations in microseconds, safe for
// concurrent use. The zero value is not usable: make one with
// NewHistogram. In JSON it is a summary (count, min, max, mean and
// percentiles in milliseconds) plus "hdr", the histogram itself in the
// HdrHistogram V2 compressed encoding (base64), from which Merge and
// UnmarshalJSON rebuild it exactly.
type Histogram struct {
	mu sync.Mutex
	h  *hdr.Histogram
}

// NewHistogram returns an empty Histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdr.New(histLowest, histHighest, histDigits)}
}

// Record adds one duration; values outside [1 µs, 1 h] are clamped to it.
func (h *Histogram) Record(d time.Duration) {
	v := min(max(d.Microseconds(), histLowest), histHighest)
	h.mu.Lock()
	_ = h.h.RecordValue(v) // in range by the clamp
	h.mu.Unlock()
}

// Count returns the number of recorded values.
func (h *Histogram) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.h.TotalCount()
}

// Quantile returns the value at quantile q in [0, 100] (0 when empty).
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.h.ValueAtQuantile(q)) * time.Microsecond
}

// Max returns the largest value recorded (within the resolution).
func (h *Histogram) Max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.h.Max()) * time.Microsecond
}

// Merge adds every value of o to h. It is exact: both have the same
// geometry.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o == h {
		return
	}
	o.mu.Lock()
	c := o.h.Clone()
	o.mu.Unlock()
	h.mu.Lock()
	h.h.Merge(c)
	h.mu.Unlock()
}

// Equal reports whether h and o hold the same counts.
func (h *Histogram) Equal(o *Histogram) bool {
	h.mu.Lock()
	a := h.h.Clone()
	h.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	return a.Equals(o.h)
}

// histogramJSON is the JSON form of a Histogram.
type histogramJSON struct {
	Count  int64   `json:"count"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	HDR    string  `json:"hdr"`
}

func ms(us int64) float64 { return float64(us) / 1000 }

// MarshalJSON writes the summary and the encoded histogram.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	enc, err := h.h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("kraken: encoding a histogram: %w", err)
	}
	j := histogramJSON{Count: h.h.TotalCount(), HDR: string(enc)}
	if j.Count > 0 {
		j.MinMs, j.MeanMs, j.MaxMs = ms(h.h.Min()), h.h.Mean()/1000, ms(h.h.Max())
		j.P50Ms, j.P90Ms = ms(h.h.ValueAtQuantile(50)), ms(h.h.ValueAtQuantile(90))
		j.P99Ms, j.P999Ms = ms(h.h.ValueAtQuantile(99)), ms(h.h.ValueAtQuantile(99.9))
	}
	return json.Marshal(j)
}

// UnmarshalJSON rebuilds the histogram from its "hdr" field.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histogramJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.HDR == "" {
		return errors.New("kraken: a histogram without its hdr field")
	}
	d, err := hdr.Decode([]byte(j.HDR))
	if err != nil {
		return fmt.Errorf("kraken: decoding a histogram: %w", err)
	}
	if d.LowestTrackableValue() != histLowest || d.HighestTrackableValue() != histHighest || d.SignificantFigures() != histDigits {
		return errors.New("kraken: a histogram of another geometry (kraken records 1 µs to 1 h, 3 digits)")
	}
	h.mu.Lock()
	h.h = d
	h.mu.Unlock()
	return nil
}
