package shard_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/stretchr/testify/require"
)

// memStore is a rebalance.Store in memory: rows[shard][owner] is how many rows owner has
// there.
type memStore struct {
	mu    sync.Mutex
	rows  []map[string]int64
	marks map[string]rebalance.Mark // migration + "\x00" + owner
}

func newMemStore(shards int) *memStore {
	s := &memStore{marks: map[string]rebalance.Mark{}}
	for range shards {
		s.rows = append(s.rows, map[string]int64{})
	}
	return s
}

func (s *memStore) Copy(_ context.Context, owner string, from, to int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[to][owner] = s.rows[from][owner]
	return nil
}

func (s *memStore) Count(_ context.Context, owner string, shard int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[shard][owner], nil
}

func (s *memStore) Delete(_ context.Context, owner string, shard int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rows[shard], owner)
	return nil
}

func (s *memStore) Mark(_ context.Context, migration, owner string) (rebalance.Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[migration+"\x00"+owner], nil
}

func (s *memStore) SetMark(_ context.Context, migration, owner string, mark rebalance.Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[migration+"\x00"+owner] = mark
	return nil
}

// where returns the shards that hold rows of owner.
func (s *memStore) where(owner string) []int {
	var out []int
	for shard, rows := range s.rows {
		if rows[owner] > 0 {
			out = append(out, shard)
		}
	}
	return out
}

// The hook for the rebalance package: a change of the directory is a migration from d to a
// Clone of d over a second instance of the rule, in which the change is made first. Here a
// hot owner is pinned to a shard of its own, then shard 3 is drained a batch of owners at a
// time, after which removing it moves nothing.
func TestDirectoryChangesThroughMigrations(t *testing.T) {
	ctx := context.Background()
	rule, err := shard.NewJump(4)
	require.NoError(t, err)
	d := shard.NewDirectory(rule, nil)
	store := newMemStore(4)
	var owners []string
	for i := range 400 {
		owner := fmt.Sprint("user:", i)
		owners = append(owners, owner)
		store.rows[d.Locate(owner)][owner] = int64(1 + i%7)
	}
	// change makes the pins in a clone, moves exactly their owners' rows, then pins in d.
	change := func(id string, pins map[string]int) {
		t.Helper()
		again, err := shard.NewJump(d.Shards())
		require.NoError(t, err)
		after, err := d.Clone(again)
		require.NoError(t, err)
		for owner, to := range pins {
			require.NoError(t, after.Pin(owner, to))
		}
		m, err := rebalance.New(id, d, after, store, rebalance.Options{})
		require.NoError(t, err)
		moved := func(yield func(string) bool) {
			for owner := range pins {
				if !yield(owner) {
					return
				}
			}
		}
		require.NoError(t, m.Run(ctx, moved))
		require.NoError(t, m.Finish(ctx, moved))
		for owner, to := range pins {
			require.NoError(t, d.Pin(owner, to))
		}
		for _, owner := range owners {
			require.Equal(t, []int{d.Locate(owner)}, store.where(owner), "rows of %s", owner)
			require.Equal(t, after.Locate(owner), d.Locate(owner))
		}
	}

	hot := owners[7]
	to := (d.Locate(hot) + 1) % 4
	change("pin-hot", map[string]int{hot: to})
	require.Equal(t, []int{to}, store.where(hot))

	var onThree []string
	for _, owner := range owners {
		if d.Locate(owner) == 3 {
			onThree = append(onThree, owner)
		}
	}
	require.NotEmpty(t, onThree)
	for batch := range slices.Chunk(onThree, 25) {
		pins := map[string]int{}
		for i, owner := range batch {
			pins[owner] = i % 3
		}
		change(fmt.Sprint("drain-3-from-", batch[0]), pins)
	}
	before := make([]int, len(owners))
	for i, owner := range owners {
		before[i] = d.Locate(owner)
		require.NotEqual(t, 3, before[i])
	}
	require.NoError(t, d.Resize(3), "shard 3 holds no pin")
	for i, owner := range owners {
		require.Equal(t, before[i], d.Locate(owner), "removing the drained shard moved %s", owner)
	}
}
