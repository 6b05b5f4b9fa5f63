package chart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Format is how a chart's values are written on its axis and in its
// legend. The zero value is SI.
type Format int

const (
	// SI writes values with an SI prefix and the chart's unit: "110 M",
	// "1.2 k/s".
	SI Format = iota
	// Percent takes values as shares (0.38) and writes them as "38 %".
	Percent
)

// TimeAxis is what a chart's times are. The zero value is Seconds.
type TimeAxis int

const (
	// Seconds are seconds from the start of a run, written "30 s", "5 min".
	Seconds TimeAxis = iota
	// Clock are Unix times in seconds, written as the time of day.
	Clock
)

// Series is one line of a chart.
type Series struct {
	// Name is the line's legend entry; it must not be empty.
	Name string
	// Values holds one value per time of the chart; NaN and infinities are
	// refused.
	Values []float64
	// Missing, when not empty, has one entry per time: true marks a point
	// without a value (the line has a gap there and the legend shows "-"),
	// whatever Values holds.
	Missing []bool
}

// Chart is one chart: lines over a shared time axis. The zero value has no
// series and does not validate.
type Chart struct {
	// Title is drawn above the chart.
	Title string
	// YLabel names the vertical axis ("devices connected").
	YLabel string
	// Unit follows every value of the vertical axis and the legend
	// ("/s" gives "1.2 k/s"); empty for plain counts. Ignored by Percent.
	Unit string
	// Format is how values are written (SI, the default, or Percent).
	Format Format
	// Axis is what Times are (Seconds, the default, or Clock).
	Axis TimeAxis
	// TimeLabel names the time axis; empty gives "event time" (Seconds)
	// or "time" (Clock).
	TimeLabel string
	// Times are the points' times, strictly increasing, NaN refused. An
	// empty chart (no times) is valid: a live page fills it.
	Times []float64
	// Series are the lines, each with len(Times) values.
	Series []Series
	// View, when View[1] > View[0], is the time range shown first; the
	// reader zooms by dragging and sees every point on a double click.
	View [2]float64
	// Height is the plot's height in CSS pixels; 0 gives 280. The width
	// follows the page.
	Height int
}

// Validate reports the first problem of c's data: no series, a series
// without a name or with a different number of values (or of Missing
// marks) than times, a NaN or infinite value not marked missing, times
// that do not increase.
func (c *Chart) Validate() error {
	name := c.Title
	if name == "" {
		name = "untitled"
	}
	if len(c.Series) == 0 {
		return fmt.Errorf("chart: chart %q has no series", name)
	}
	if c.Height < 0 {
		return fmt.Errorf("chart: chart %q: height %d is negative", name, c.Height)
	}
	if c.Format != SI && c.Format != Percent {
		return fmt.Errorf("chart: chart %q: unknown value format %d", name, c.Format)
	}
	if c.Axis != Seconds && c.Axis != Clock {
		return fmt.Errorf("chart: chart %q: unknown time axis %d", name, c.Axis)
	}
	for i, t := range c.Times {
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Errorf("chart: chart %q: time %d is %v", name, i, t)
		}
		if i > 0 && t <= c.Times[i-1] {
			return fmt.Errorf("chart: chart %q: times must increase, time %d (%v) follows %v", name, i, t, c.Times[i-1])
		}
	}
	if c.View[1] < c.View[0] || math.IsNaN(c.View[0]) || math.IsNaN(c.View[1]) {
		return fmt.Errorf("chart: chart %q: view %v to %v is not a time range", name, c.View[0], c.View[1])
	}
	for i, s := range c.Series {
		if s.Name == "" {
			return fmt.Errorf("chart: chart %q: series %d has no name", name, i+1)
		}
		if len(s.Values) != len(c.Times) {
			return fmt.Errorf("chart: chart %q: series %q has %d values for %d times", name, s.Name, len(s.Values), len(c.Times))
		}
		if len(s.Missing) != 0 && len(s.Missing) != len(c.Times) {
			return fmt.Errorf("chart: chart %q: series %q marks %d points missing for %d times", name, s.Name, len(s.Missing), len(c.Times))
		}
		for j, v := range s.Values {
			if len(s.Missing) > 0 && s.Missing[j] {
				continue
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("chart: chart %q: series %q: value %d (at time %v) is %v", name, s.Name, j, c.Times[j], v)
			}
		}
	}
	return nil
}

// spec is the chart's description for chart.js.
type spec struct {
	Title     string     `json:"title,omitempty"`
	YLabel    string     `json:"yLabel,omitempty"`
	Unit      string     `json:"unit,omitempty"`
	Format    string     `json:"format"`
	Time      string     `json:"time"`
	TimeLabel string     `json:"timeLabel,omitempty"`
	Series    []string   `json:"series"`
	View      *[2]number `json:"view,omitempty"`
	Height    int        `json:"height,omitempty"`
}

// number is a time, written exactly.
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(n), 'f', -1, 64), nil
}

// Encode returns c as the JSON document chart.js draws (values with 6
// significant digits, the legend showing 3, so a report of thousands of
// points per line stays small; times exactly):
// {"spec": {...}, "data": [[times...], [values of series 1...], ...]}.
// Live pages fetch it for a chart's first state, then append points.
func Encode(c Chart) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	sp := spec{Title: c.Title, YLabel: c.YLabel, Unit: c.Unit, Format: "si", Time: "seconds", TimeLabel: c.TimeLabel, Height: c.Height}
	if c.Format == Percent {
		sp.Format, sp.Unit = "percent", ""
	}
	if c.Axis == Clock {
		sp.Time = "clock"
	}
	if c.View[1] > c.View[0] {
		sp.View = &[2]number{number(c.View[0]), number(c.View[1])}
	}
	for _, s := range c.Series {
		sp.Series = append(sp.Series, s.Name)
	}
	var b bytes.Buffer
	b.WriteString(`{"spec":`)
	js, err := json.Marshal(sp)
	if err != nil { // cannot happen: every field is a string or a finite number
		return nil, errors.New("chart: " + err.Error())
	}
	b.Write(js)
	b.WriteString(`,"data":[`)
	column := func(vs []float64, missing []bool, format byte, digits int) {
		b.WriteByte('[')
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(',')
			}
			if len(missing) > 0 && missing[i] {
				b.WriteString("null")
				continue
			}
			b.Write(strconv.AppendFloat(nil, v, format, digits, 64))
		}
		b.WriteByte(']')
	}
	column(c.Times, nil, 'f', -1) // exact: Unix times need every digit
	for _, s := range c.Series {
		b.WriteByte(',')
		column(s.Values, s.Missing, 'g', 6)
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}
