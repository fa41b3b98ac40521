package rebalance_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// userShards places a decimal user ID by user_id % n, as the rebalancing post [004] does.
type userShards struct{ *shard.Modulo }

func (u userShards) Locate(owner string) int {
	id, _ := strconv.ParseUint(owner, 10, 64)
	return u.LocateID(id)
}

// The rebalancing post [004]: messages sharded by user_id % 5, the servers 75% full. Grow to
// keep the total under 50% and last past a month's lead time for new hardware; what does
// each strategy move?
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

func ExamplePlanOwners() {
	before, _ := shard.NewJump(3)
	after, _ := shard.NewJump(4)
	owners := func(yield func(string, int64) bool) { // users 1..12 and their rows
		for id := 1; id <= 12; id++ {
			if !yield("user:"+strconv.Itoa(id), int64(10*id)) {
				return
			}
		}
	}
	plan, err := rebalance.PlanOwners(before, after, owners)
	if err != nil {
		panic(err)
	}
	for _, f := range plan.Flows { // rows from each shard to each shard
		fmt.Printf("%d -> %d: %d rows\n", f.From, f.To, f.Count)
	}
	fmt.Printf("%d of %d rows move\n", plan.Moved(), plan.Total)
	// Output:
	// 0 -> 0: 190 rows
	// 0 -> 3: 100 rows
	// 1 -> 1: 100 rows
	// 2 -> 2: 350 rows
	// 2 -> 3: 40 rows
	// 140 of 780 rows move
}

func ExampleOwnerLayout() {
	jump := func(n int) (shard.Sharder, error) { return shard.NewJump(n) }
	before, _ := jump(4)
	owners := func(yield func(string, int64) bool) { // 400 users of 1 to 9 rows
		for i := range 400 {
			if !yield("user:"+strconv.Itoa(i), int64(1+i%9)) {
				return
			}
		}
	}
	layout, err := rebalance.OwnerLayout(before, jump, owners)
	if err != nil {
		panic(err)
	}
	fmt.Println("rows per shard:", layout.Usage())
	plan, _ := layout.Resize(5)
	fmt.Printf("to 5 shards: %d of %d rows move, all to shard 4: %v\n", plan.Moved(), plan.Total,
		plan.Count(0, 4)+plan.Count(1, 4)+plan.Count(2, 4)+plan.Count(3, 4) == plan.Moved())
	// Output:
	// rows per shard: [478 475 493 544]
	// to 5 shards: 482 of 1990 rows move, all to shard 4: true
}

func ExampleSampleLayout() {
	ring := func(n int) (shard.Sharder, error) { return shard.NewRing(n, shard.RingOptions{}) }
	before, _ := ring(3)
	usage := []int64{700_000, 690_000, 710_000} // bytes per shard: all that is known
	sample := func(yield func(string) bool) {   // keys shaped like the real ones
		for i := range 30_000 {
			if !yield("session:" + strconv.Itoa(i)) {
				return
			}
		}
	}
	layout, err := rebalance.SampleLayout(usage, before, ring, sample)
	if err != nil {
		panic(err)
	}
	plan, err := layout.Resize(4)
	if err != nil {
		panic(err)
	}
	for _, f := range plan.Flows {
		if f.From != f.To {
			fmt.Printf("about %d bytes %d -> %d\n", f.Count, f.From, f.To)
		}
	}
	fmt.Printf("about %.0f%% of the bytes move\n", 100*plan.Fraction())
	// Output:
	// about 127252 bytes 0 -> 3
	// about 198035 bytes 1 -> 3
	// about 225178 bytes 2 -> 3
	// about 26% of the bytes move
}

func ExamplePartitionLayout() {
	p, _ := shard.NewPartitions(3, 12)
	// What each of the 12 partitions holds, in bytes (a store can sum its rows per partition).
	usage := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120}
	layout, err := rebalance.PartitionLayout(p, usage)
	if err != nil {
		panic(err)
	}
	fmt.Println("bytes per shard:", layout.Usage())
	plan, _ := layout.Resize(4) // exactly the partitions p.PlanResize(4) moves
	moves, _ := p.PlanResize(4)
	fmt.Println("partitions moved:", moves)
	fmt.Printf("%d of %d bytes move\n", plan.Moved(), plan.Total)
	// Output:
	// bytes per shard: [100 260 420]
	// partitions moved: [{3 0 3} {7 1 3} {11 2 3}]
	// 240 of 780 bytes move
}
