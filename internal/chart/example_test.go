package chart_test

import (
	"fmt"
	"math"

	"github.com/corralhq/corral/internal/chart"
)

func ExampleEncode() {
	c := chart.Chart{
		Title:  "Connection attempts",
		YLabel: "attempts",
		Unit:   "/s",
		Times:  []float64{0, 1, 2},
		Series: []chart.Series{{Name: "attempts/s", Values: []float64{1200, 6e6, 2.5e5}}},
	}
	doc, err := chart.Encode(c)
	fmt.Println(string(doc), err)
	c.Series[0].Values[1] = math.NaN()
	_, err = chart.Encode(c)
	fmt.Println(err)
	// Output:
	// {"spec":{"title":"Connection attempts","yLabel":"attempts","unit":"/s","format":"si","time":"seconds","series":["attempts/s"]},"data":[[0,1,2],[1200,6e+06,250000]]} <nil>
	// chart: chart "Connection attempts": series "attempts/s": value 1 (at time 1) is NaN
}
