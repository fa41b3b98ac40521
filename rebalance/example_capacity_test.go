package rebalance_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// userShards places a decimal user ID by user_id % n, as document 004 does.
type userShards struct{ *shard.Modulo }

func (u userShards) Locate(owner string) int {
	id, _ := strconv.ParseUint(owner, 10, 64)
	return u.LocateID(id)
}

// Document 004: messages sharded by user_id % 5, the servers 75% full. Grow to keep the
// total under 50% and last past a month's lead time for new hardware; what does each
// strategy move?
func ExamplePlanCapacity() {
	messages := func(yield func(string, int64) bool) { // users 1..1000 and their messages
		for id := 1; id <= 1000; id++ {
			if !yield(strconv.Itoa(id), int64(1+((id-1)/5*7)%29)) {
				return
			}
		}
	}
	modulo := func(n int) (shard.Sharder, error) {
		m, err := shard.NewModulo(n)
		return userShards{m}, err
	}
	jump := func(n int) (shard.Sharder, error) { return shard.NewJump(n) }
	ring := func(n int) (shard.Sharder, error) { return shard.NewRing(n, shard.RingOptions{}) }
	partitions := func(n int) (shard.Sharder, error) { // Resize moves from the 5-shard table
		p, _ := shard.NewPartitions(5, 1024)
		return p, p.Resize(n)
	}

	question := rebalance.Capacity{
		PerShard:     3996,                // rows a shard holds: each holds 2997 now, 75%
		GrowthPerDay: 100,                 // rows a day
		LeadTime:     30 * 24 * time.Hour, // new hardware takes a month
		CopyRate:     500,                 // rows a second, measured
	}
	for _, s := range []struct {
		name      string
		resized   func(int) (shard.Sharder, error)
		multiples bool
	}{{"modulo n+1", modulo, false}, {"modulo doubling", modulo, true}, {"jump", jump, false}, {"ring", ring, false},
		{"partitions", partitions, false}} {
		before, _ := s.resized(5)
		layout, err := rebalance.OwnerLayout(before, s.resized, messages)
		if err != nil {
			panic(err)
		}
		q := question
		q.Multiples = s.multiples
		p, err := rebalance.PlanCapacity(q, layout)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-15s fullest %.0f%%, resize in %v: %d shards, %.0f%% used, %5d of %d rows move (%2.0f%%) in %v, lasts %.0f days\n",
			s.name, 100*p.FullestUse, p.ResizeIn, p.Target, 100*p.UseAfter, p.Moves.Moved(), p.Moves.Total,
			100*p.Moves.Fraction(), p.CopyTime.Round(time.Second), p.Lasts.Hours()/24)
	}
	// Output:
	// modulo n+1      fullest 75%, resize in 0s: 8 shards, 47% used, 13010 of 14985 rows move (87%) in 26s, lasts 84 days
	// modulo doubling fullest 75%, resize in 0s: 10 shards, 38% used,  7368 of 14985 rows move (49%) in 15s, lasts 142 days
	// jump            fullest 84%, resize in 0s: 8 shards, 47% used,  5412 of 14985 rows move (36%) in 11s, lasts 40 days
	// ring            fullest 84%, resize in 0s: 8 shards, 47% used,  5432 of 14985 rows move (36%) in 11s, lasts 39 days
	// partitions      fullest 82%, resize in 0s: 8 shards, 47% used,  5116 of 14985 rows move (34%) in 10s, lasts 44 days
}
