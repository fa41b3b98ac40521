package measure_test

import (
	"fmt"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/measure"
)

// How evenly jump hash spreads 100000 keys over 10 shards, next to what a perfect random
// hash would show.
func ExampleBalanceOf() {
	s, _ := shard.NewJump(10)
	keys := measure.Keys(1, 100000, 16)
	b := measure.BalanceOf(measure.Loads(measure.Placement(s, keys), 10))
	fmt.Printf("stddev %.2f%% (random hash: %.2f%%), max/mean %.3f\n",
		b.StddevPct, measure.HashStddevPct(10, len(keys)), b.MaxMean)
	// Output:
	// stddev 1.31% (random hash: 0.95%), max/mean 1.018
}

// The consistent-hash homework's [002] experiment, small: more points per shard, a more even
// ring.
func ExampleVnodesCurve() {
	points, err := measure.VnodesCurve(10, []int{10, 100, 1000}, 100000, 2)
	if err != nil {
		panic(err)
	}
	for _, p := range points {
		fmt.Printf("%4d vnodes: stddev %4.1f%% of the mean\n", p.Vnodes, p.StddevPct)
	}
	// Output:
	//   10 vnodes: stddev 29.9% of the mean
	//  100 vnodes: stddev  8.9% of the mean
	// 1000 vnodes: stddev  3.6% of the mean
}
