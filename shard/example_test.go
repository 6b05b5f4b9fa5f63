package shard_test

import (
	"fmt"

	"github.com/corralhq/corral/shard"
)

func ExampleDealer() {
	secret, _ := shard.ParseSecret("000102030405060708090a0b0c0d0e0f")
	d, err := shard.NewDealer(shard.DealerConfig{Secret: secret, Workers: 2048, HandSize: 4})
	if err != nil {
		panic(err)
	}
	var buf [4]int
	fmt.Println(d.Hand(buf[:0], "example.com"))
	fmt.Println(d.Hand(buf[:0], "example.org"))
	// Output:
	// [781 1855 1530 66]
	// [578 1462 485 57]
}

func ExampleDealer_Pick() {
	secret, _ := shard.ParseSecret("000102030405060708090a0b0c0d0e0f")
	d, _ := shard.NewDealer(shard.DealerConfig{Secret: secret, Workers: 16, HandSize: 4, Spill: 2, MinHealthy: 2})
	hand := d.Hand(nil, "tenant-a")
	fmt.Println("hand", hand, "spill", d.Spill(nil, "tenant-a"))

	// Three of the four hand members are down: the pick keeps the healthy
	// one and spills to one extra worker to reach MinHealthy.
	down := map[int]bool{hand[0]: true, hand[1]: true, hand[2]: true}
	c := d.Pick(nil, "tenant-a", shard.HealthFunc(func(w int) bool { return !down[w] }))
	fmt.Println(c.Workers, c.Status, c.Spilled)
	// Output:
	// hand [1 11 8 6] spill [0 3]
	// [6 0] spilled 1
}

func ExampleOverlap() {
	p, _ := shard.Overlap(8, 2)
	for o, r := range p {
		f, _ := r.Float64()
		fmt.Printf("P(overlap=%d) = %s = %.1f %%\n", o, r, 100*f)
	}
	fmt.Println("hands:", shard.Hands(2048, 4))
	c, _ := shard.Capacity(2048, 4, 2)
	fmt.Println("capacity at t=2:", c)
	// Output:
	// P(overlap=0) = 15/28 = 53.6 %
	// P(overlap=1) = 3/7 = 42.9 %
	// P(overlap=2) = 1/28 = 3.6 %
	// hands: 730862190080
	// capacity at t=2: 357389824
}

func ExampleStable() {
	secret, _ := shard.ParseSecret("000102030405060708090a0b0c0d0e0f")
	workers := []shard.Worker{
		{ID: "edge-a1", Zone: "a"}, {ID: "edge-a2", Zone: "a"}, {ID: "edge-a3", Zone: "a"},
		{ID: "edge-b1", Zone: "b"}, {ID: "edge-b2", Zone: "b"}, {ID: "edge-b3", Zone: "b"},
	}
	s, _ := shard.NewStable(shard.StableConfig{Secret: secret, Workers: workers, HandSize: 2, Zones: true})
	for _, i := range s.Hand(nil, "tenant-a") {
		fmt.Print(workers[i].ID, " ")
	}
	fmt.Println()
	// Output:
	// edge-b3 edge-a2
}

func ExampleAssigner() {
	a, _ := shard.NewAssigner(shard.AssignerConfig{Workers: 2048, HandSize: 4, MaxOverlap: 2, Seed: 1})
	h, _ := a.Assign("example.com")
	fmt.Println(len(h), a.Len(), a.Capacity())
	// Output:
	// 4 1 357389824
}
