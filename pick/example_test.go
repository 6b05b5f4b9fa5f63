package pick_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/corralhq/corral/pick"
)

func ExampleTwoChoiceShares() {
	shares := make([]float64, 4)
	pick.TwoChoiceShares(shares, []int{10, 10, 40, 5})
	fmt.Printf("%.3f\n", shares)
	// Output: [0.250 0.250 0.000 0.500]
}

func ExampleTwoChoices() {
	loads := []int64{7, 3, 9}
	r := rand.New(rand.NewPCG(1, 2))
	got := map[int]int{}
	for range 3000 {
		got[pick.TwoChoices(len(loads), func(i int) int64 { return loads[i] }, r.IntN)]++
	}
	fmt.Println("the most loaded is never picked:", got[2] == 0)
	// Output: the most loaded is never picked: true
}
