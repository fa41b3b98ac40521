package rebalance_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// mapStore is the smallest Store: one map per shard from owner to its rows, and the marks.
type mapStore struct {
	mu     sync.Mutex
	shards []map[string][]string
	marks  map[[2]string]rebalance.Mark // by {migration, owner}
}

func (s *mapStore) Copy(_ context.Context, owner string, from, to int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shards[to][owner] = slices.Clone(s.shards[from][owner])
	return nil
}

func (s *mapStore) Count(_ context.Context, owner string, shard int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.shards[shard][owner])), nil
}

func (s *mapStore) Delete(_ context.Context, owner string, shard int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shards[shard], owner)
	return nil
}

func (s *mapStore) Mark(_ context.Context, migration, owner string) (rebalance.Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[[2]string{migration, owner}], nil // Unmoved if absent
}

func (s *mapStore) SetMark(_ context.Context, migration, owner string, m rebalance.Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[[2]string{migration, owner}] = m
	return nil
}

func (s *mapStore) add(shard int, owner, row string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shards[shard][owner] = append(s.shards[shard][owner], row)
}

func ExampleMigration() {
	ctx := context.Background()
	before, _ := shard.NewJump(2)
	after, _ := shard.NewJump(3)
	store := &mapStore{marks: map[[2]string]rebalance.Mark{}}
	for range 3 {
		store.shards = append(store.shards, map[string][]string{})
	}
	owners := []string{"alice", "bob", "frank", "grace", "oscar", "peggy"}

	m, err := rebalance.New("grow-2-to-3", before, after, store, rebalance.Options{})
	if err != nil {
		panic(err)
	}
	// The application reads and writes through Do, which names the shard that serves the
	// owner now: the old one until the owner has moved.
	for _, o := range owners {
		err := m.Do(ctx, o, func(shard int) error {
			store.add(shard, o, o+"'s first row")
			return nil
		})
		if err != nil {
			panic(err)
		}
	}
	// The mover copies every owner whose shard changes, marks it, deletes the old copy.
	if err := m.Run(ctx, slices.Values(owners)); err != nil {
		panic(err)
	}
	// Finish checks every mark; from now on Do routes by after alone.
	if err := m.Finish(ctx, slices.Values(owners)); err != nil {
		panic(err)
	}
	fmt.Println("moved by Run:", m.Stats().ByRun)
	for _, o := range owners {
		_ = m.Do(ctx, o, func(shard int) error {
			fmt.Println(o, before.Locate(o), "->", shard, store.shards[shard][o])
			return nil
		})
	}
	fmt.Println("old copy of bob:", store.shards[1]["bob"])
	// Output:
	// moved by Run: 2
	// alice 1 -> 1 [alice's first row]
	// bob 1 -> 2 [bob's first row]
	// frank 0 -> 2 [frank's first row]
	// grace 1 -> 1 [grace's first row]
	// oscar 0 -> 0 [oscar's first row]
	// peggy 0 -> 0 [peggy's first row]
	// old copy of bob: []
}
