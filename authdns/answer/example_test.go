package answer_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/health"
)

// checker returns a health Checker with a TCP check for each name (never
// probed here: the example moves the checks with Force).
func checker(names ...string) *health.Checker {
	var cfg health.Config
	for _, n := range names {
		cfg.Checks = append(cfg.Checks, health.CheckConfig{Name: n, Kind: health.KindTCP, Address: "127.0.0.1:1", Interval: time.Hour})
	}
	c, err := health.New(cfg, health.Options{})
	if err != nil {
		panic(err)
	}
	return c
}

// probe resolves a check of c once, when the set is built.
func probe(c *health.Checker, name string) answer.Probe {
	ref, _ := c.Ref(name)
	return ref
}

// Weighted answers one record; a zero-weight record is answered only once
// every record of non-zero weight is unhealthy. The records' probes are
// health Refs, resolved when the set is built: the answer follows the
// checks without looking a name up.
func ExampleSet_Select_weighted() {
	c := checker("lb-1", "lb-2", "standby")
	set, err := answer.NewSet(answer.Config{
		Policy: answer.Weighted,
		Records: []answer.Record{
			{Health: probe(c, "lb-1"), Weight: 10},
			{Health: probe(c, "lb-2"), Weight: 30},
			{Health: probe(c, "standby"), Weight: 0},
		},
	})
	if err != nil {
		panic(err)
	}
	r := rand.NewPCG(1, 2)
	dst := make([]int, 0, set.Len())
	out, _ := set.Select(dst, answer.Query{}, r)
	fmt.Println("healthy:", len(out), "record, never the standby:", out[0] != 2)
	_ = c.Force("lb-1", false)
	_ = c.Force("lb-2", false)
	out, res := set.Select(dst, answer.Query{}, r)
	fmt.Println("both down:", out, "fail open:", res.FailOpen)
	// Output:
	// healthy: 1 record, never the standby: true
	// both down: [2] fail open: false
}

// Multivalue answers up to 8 healthy records of 10.
func ExampleSet_Select_multivalue() {
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprint("lb-", i)
	}
	c := checker(names...)
	recs := make([]answer.Record, len(names))
	for i, n := range names {
		recs[i].Health = probe(c, n)
	}
	set, err := answer.NewSet(answer.Config{Policy: answer.Multivalue, Records: recs})
	if err != nil {
		panic(err)
	}
	_ = c.Force("lb-3", false)
	out, _ := set.Select(make([]int, 0, set.Len()), answer.Query{}, rand.NewPCG(3, 4))
	down := false
	for _, i := range out {
		down = down || i == 3
	}
	fmt.Println(len(out), "records, the unhealthy one among them:", down)
	// Output: 8 records, the unhealthy one among them: false
}

// A resolver that sends more than BigShare of the queries is big, and a
// big resolver gets every healthy record of a multivalue set (BigN 0),
// a small one the set's N; a weighted set with BigSubset answers it a
// weighted subset instead of one record.
func ExampleClassConfig_Of() {
	classes := answer.ClassConfig{BigShare: 0.05}.WithDefaults()
	big := classes.Of(300, 1000)  // 30 % of the queries
	small := classes.Of(20, 1000) // 2 %
	multi, err := answer.NewSet(answer.Config{Policy: answer.Multivalue, N: 2, Records: make([]answer.Record, 6)})
	if err != nil {
		panic(err)
	}
	weighted, err := answer.NewSet(answer.Config{Policy: answer.Weighted, BigSubset: true, BigN: 2,
		Records: []answer.Record{{Weight: 1}, {Weight: 2}, {Weight: 3}}})
	if err != nil {
		panic(err)
	}
	r := rand.NewPCG(5, 6)
	for _, c := range []answer.Class{small, big} {
		m, _ := multi.Select(nil, answer.Query{Class: c}, r)
		w, _ := weighted.Select(nil, answer.Query{Class: c}, r)
		fmt.Printf("%s: multivalue %d records, weighted %d\n", c, len(m), len(w))
	}
	// Output:
	// small: multivalue 2 records, weighted 1
	// big: multivalue 6 records, weighted 2
}
