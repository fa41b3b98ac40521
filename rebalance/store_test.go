package rebalance

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"sync"
	"time"
)

// memStore is an in-memory Store: shards[s][owner] holds the owner's rows on shard s, by
// row ID. It is what a database would be, without the database.
type memStore struct {
	mu     sync.Mutex
	shards []map[string]map[int]string
	marks  map[[2]string]Mark
	done   map[string]bool // the migrations finished (FinishRecorder)
}

func newMemStore(n int) *memStore {
	s := &memStore{shards: make([]map[string]map[int]string, n), marks: map[[2]string]Mark{}, done: map[string]bool{}}
	for i := range s.shards {
		s.shards[i] = map[string]map[int]string{}
	}
	return s
}

func (s *memStore) Copy(_ context.Context, owner string, from, to int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.shards[from][owner]) == 0 && len(s.shards[to][owner]) > 0 {
		return fmt.Errorf("memstore: owner %q: shard %d holds none of its rows, shard %d holds %d: %w", owner, from, to, len(s.shards[to][owner]), ErrSourceEmpty)
	}
	s.shards[to][owner] = maps.Clone(s.shards[from][owner])
	s.mu.Unlock()
	// A real copy takes time: let the other goroutines run, so that a write racing the
	// move has a window to land between the copy and the delete of the old copy.
	time.Sleep(20 * time.Microsecond)
	s.mu.Lock()
	return nil
}

func (s *memStore) Count(_ context.Context, owner string, shard int) (int64, error) {
	return int64(s.count(shard, owner)), nil
}

func (s *memStore) Delete(_ context.Context, owner string, shard int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shards[shard], owner)
	return nil
}

func (s *memStore) Mark(_ context.Context, migration, owner string) (Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[[2]string{migration, owner}], nil
}

func (s *memStore) SetMark(_ context.Context, migration, owner string, m Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks[[2]string{migration, owner}] = m
	return nil
}

func (s *memStore) RecordFinished(_ context.Context, migration string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done[migration] = true
	return nil
}

func (s *memStore) IsFinished(_ context.Context, migration string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[migration], nil
}

// put writes one row of owner on shard: what the application's writes do inside Do.
func (s *memStore) put(shard int, owner string, id int, row string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shards[shard][owner] == nil {
		s.shards[shard][owner] = map[int]string{}
	}
	s.shards[shard][owner][id] = row
}

// count returns how many rows owner has on shard: what the application's reads see.
func (s *memStore) count(shard int, owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shards[shard][owner])
}

// where returns the shards that hold rows of owner.
func (s *memStore) where(owner string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var on []int
	for i, sh := range s.shards {
		if len(sh[owner]) > 0 {
			on = append(on, i)
		}
	}
	return on
}

var errCrash = errors.New("crash")

// crashStore wraps a memStore and fails the call numbered at (counting from 1) of operation
// op ("copy", "copied", "delete", "done": the SetMark calls are named after the mark): a
// process that dies there. when says whether the call takes effect first: not at all
// ("before"), fully ("after"), or, for a copy, half of the rows ("half").
type crashStore struct {
	*memStore
	op, when string
	at       int
	mu       sync.Mutex
	n        int
}

func (c *crashStore) call(op string, do, half func()) error {
	c.mu.Lock()
	if op == c.op {
		c.n++
	}
	crash := op == c.op && c.n == c.at
	c.mu.Unlock()
	switch {
	case !crash:
		do()
		return nil
	case c.when == "after":
		do()
	case c.when == "half" && half != nil:
		half()
	}
	return fmt.Errorf("%s %s: %w", c.when, op, errCrash)
}

func (c *crashStore) Copy(ctx context.Context, owner string, from, to int) error {
	return c.call("copy", func() { c.memStore.Copy(ctx, owner, from, to) }, func() {
		c.memStore.mu.Lock()
		defer c.memStore.mu.Unlock()
		rows := c.shards[from][owner]
		half := map[int]string{}
		for id, row := range rows {
			if len(half) >= len(rows)/2 {
				break
			}
			half[id] = row
		}
		c.shards[to][owner] = half
	})
}

func (c *crashStore) Delete(ctx context.Context, owner string, shard int) error {
	return c.call("delete", func() { c.memStore.Delete(ctx, owner, shard) }, nil)
}

func (c *crashStore) SetMark(ctx context.Context, migration, owner string, m Mark) error {
	op := "copied"
	if m == Done {
		op = "done"
	}
	return c.call(op, func() { c.memStore.SetMark(ctx, migration, owner, m) }, nil)
}

// Owners yields the owners with rows on shard.
func (s *memStore) Owners(_ context.Context, shard int) iter.Seq2[string, error] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ownersWithRows(s.shards[shard])
}

// ownersWithRows yields the owners of rows that hold any, as they are now.
func ownersWithRows(rows map[string]map[int]string) iter.Seq2[string, error] {
	var owners []string
	for o, r := range rows {
		if len(r) > 0 {
			owners = append(owners, o)
		}
	}
	return func(yield func(string, error) bool) {
		for _, o := range owners {
			if !yield(o, nil) {
				return
			}
		}
	}
}
