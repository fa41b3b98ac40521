package rebalance_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/rebalance"
)

func ExamplePlanRing() {
	before, _ := shard.NewRing(4, shard.RingOptions{Vnodes: 8})
	after, _ := shard.NewRing(5, shard.RingOptions{Vnodes: 8})
	plan, err := rebalance.PlanRing(before, after)
	if err != nil {
		panic(err)
	}
	// Shard 4's 8 points each take the end of one arc: at most 8 ranges, all to shard 4 (two
	// of its points are neighbours here, so 7).
	fmt.Printf("%d ranges, %.1f%% of the positions\n", len(plan.Ranges), 100*plan.Fraction())
	for _, r := range plan.Ranges {
		fmt.Printf("[%#016x, %#016x] %d -> %d\n", r.First, r.Last, r.From, r.To)
	}
	// A key moves exactly when its position is in a range.
	for _, key := range []string{"user:1", "user:2", "user:3", "user:4"} {
		fmt.Printf("%s at %#016x: %d -> %d\n", key, before.Position(key), before.Locate(key), after.Locate(key))
	}
	// Output:
	// 7 ranges, 20.7% of the positions
	// [0x19ff22b551ce413d, 0x2d02eb653fbd7b1f] 0 -> 4
	// [0x3ea804d3d0091a48, 0x48da50b21f265ecd] 3 -> 4
	// [0x759107621fc08f54, 0x79cc5fc9bcdab1ae] 2 -> 4
	// [0x7f631c83d81f58e3, 0x800aec15df0ad6bb] 3 -> 4
	// [0xd5feee95cd87fe6a, 0xdb4d09efef4ed641] 2 -> 4
	// [0xe2317c183d8941fa, 0xe5a0f8b3e15dcaf7] 3 -> 4
	// [0xec23edbf7a6ee451, 0xf64ac468cec3bfbe] 1 -> 4
	// user:1 at 0xd9c7c4609e6080f3: 2 -> 4
	// user:2 at 0x337be5a0c611350a: 0 -> 0
	// user:3 at 0xa1b27cdbcb67ddb9: 2 -> 2
	// user:4 at 0x2dde4756c0af9b6d: 0 -> 0
}

// posStore is a RangeStore in memory: rows[shard] maps a row's position to its rows, as a
// table with an indexed position column would.
type posStore struct {
	mu    sync.Mutex
	rows  []map[uint64][]string
	marks map[[2]string]rebalance.Mark
}

// in returns the positions of shard's rows in [first, last].
func (s *posStore) in(first, last uint64, shard int) []uint64 {
	var out []uint64
	for p := range s.rows[shard] {
		if first <= p && p <= last {
			out = append(out, p)
		}
	}
	return out
}

func (s *posStore) CopyRange(_ context.Context, first, last uint64, from, to int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.in(first, last, to) {
		delete(s.rows[to], p)
	}
	for _, p := range s.in(first, last, from) {
		s.rows[to][p] = s.rows[from][p]
	}
	return nil
}

func (s *posStore) CountRange(_ context.Context, first, last uint64, shard int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.in(first, last, shard) {
		n += int64(len(s.rows[shard][p]))
	}
	return n, nil
}

func (s *posStore) DeleteRange(_ context.Context, first, last uint64, shard int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.rows[shard], func(p uint64, _ []string) bool { return first <= p && p <= last })
	return nil
}

// The owner methods of Store, which a RangeMigration does not call; a real store has them.
var errByOwner = errors.New("posStore moves by range only")

func (s *posStore) Copy(context.Context, string, int, int) error      { return errByOwner }
func (s *posStore) Count(context.Context, string, int) (int64, error) { return 0, errByOwner }
func (s *posStore) Delete(context.Context, string, int) error         { return errByOwner }

func (s *posStore) Mark(_ context.Context, migration, owner string) (rebalance.Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[[2]string{migration, owner}], nil
}

func (s *posStore) SetMark(_ context.Context, migration, owner string, m rebalance.Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[[2]string{migration, owner}] = m
	return nil
}

func ExampleNewRangeMigration() {
	ctx := context.Background()
	before, _ := shard.NewRing(2, shard.RingOptions{Vnodes: 4})
	after, _ := shard.NewRing(3, shard.RingOptions{Vnodes: 4})
	plan, _ := rebalance.PlanRing(before, after)

	store := &posStore{marks: map[[2]string]rebalance.Mark{}}
	for range 3 {
		store.rows = append(store.rows, map[uint64][]string{})
	}
	users := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	for _, u := range users { // each row is stored with its owner's position
		store.rows[before.Locate(u)][before.Position(u)] = []string{u + "'s row"}
	}

	m, err := rebalance.NewRangeMigration("grow-2-to-3", before, after, before.Position, plan.Ranges, store, rebalance.Options{})
	if err != nil {
		panic(err)
	}
	if err := m.Run(ctx); err != nil { // copy, count both sides, mark, delete: range by range
		panic(err)
	}
	if err := m.Finish(ctx); err != nil {
		panic(err)
	}
	fmt.Println(len(plan.Ranges), "ranges moved:", m.Stats().ByRun)
	for _, u := range users {
		_ = m.Do(ctx, u, func(shard int) error {
			fmt.Println(u, before.Locate(u), "->", shard, store.rows[shard][before.Position(u)])
			return nil
		})
	}
	// Output:
	// 3 ranges moved: 3
	// alice 0 -> 2 [alice's row]
	// bob 0 -> 2 [bob's row]
	// carol 0 -> 0 [carol's row]
	// dave 1 -> 2 [dave's row]
	// erin 0 -> 2 [erin's row]
	// frank 1 -> 1 [frank's row]
	// grace 0 -> 0 [grace's row]
	// heidi 0 -> 2 [heidi's row]
}

func ExamplePlanPoolRing() {
	before, _ := pool.NewRing([]pool.Node{{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c"}}, pool.RingOptions{Vnodes: 4})
	after, _ := pool.NewRing(append(before.Nodes(), pool.Node{Name: "cache-d"}), pool.RingOptions{Vnodes: 4})
	plan, names, err := rebalance.PlanPoolRing(before, after)
	if err != nil {
		panic(err)
	}
	// cache-d's 4 points each take the end of one arc: at most 4 ranges, fewer where its
	// points are neighbours and their ranges merge (2 here).
	fmt.Println(names)
	for _, r := range plan.Ranges {
		fmt.Printf("[%#016x, %#016x] %s -> %s\n", r.First, r.Last, names[r.From], names[r.To])
	}
	fmt.Printf("%.1f%% of the positions move\n", 100*plan.Fraction())
	// Output:
	// [cache-a cache-b cache-c cache-d]
	// [0x14e5808509a9040b, 0x42b53d776f0e0db5] cache-c -> cache-d
	// [0xd9914ed3539c30bb, 0xdaac2383c0823bc4] cache-c -> cache-d
	// 18.3% of the positions move
}
