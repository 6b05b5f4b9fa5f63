package answer_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/corralhq/corral/authdns/answer"
	"github.com/corralhq/corral/health"
)

// Weighted answers one record; a zero-weight record is answered only once
// every record of non-zero weight is unhealthy.
func ExampleSet_Select_weighted() {
	set, err := answer.NewSet(answer.Config{
		Policy: answer.Weighted,
		Records: []answer.Record{
			{Check: "lb-1", Weight: 10},
			{Check: "lb-2", Weight: 30},
			{Check: "standby", Weight: 0},
		},
	})
	if err != nil {
		panic(err)
	}
	r := rand.NewPCG(1, 2)
	dst := make([]int, 0, set.Len())
	out, _ := set.Select(dst, answer.Query{}, health.Static{"lb-1": true, "lb-2": true, "standby": true}, r)
	fmt.Println("healthy:", len(out), "record, never the standby:", out[0] != 2)
	out, res := set.Select(dst, answer.Query{}, health.Static{"standby": true}, r)
	fmt.Println("both down:", out, "fail open:", res.FailOpen)
	// Output:
	// healthy: 1 record, never the standby: true
	// both down: [2] fail open: false
}

// Multivalue answers up to 8 healthy records of 10.
func ExampleSet_Select_multivalue() {
	recs := make([]answer.Record, 10)
	up := health.Static{}
	for i := range recs {
		recs[i].Check = fmt.Sprint("lb-", i)
		up[recs[i].Check] = i != 3 // lb-3 is down
	}
	set, err := answer.NewSet(answer.Config{Policy: answer.Multivalue, Records: recs})
	if err != nil {
		panic(err)
	}
	out, _ := set.Select(make([]int, 0, set.Len()), answer.Query{}, up, rand.NewPCG(3, 4))
	down := false
	for _, i := range out {
		down = down || i == 3
	}
	fmt.Println(len(out), "records, the unhealthy one among them:", down)
	// Output: 8 records, the unhealthy one among them: false
}
