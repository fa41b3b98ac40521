package sqlstore_test

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// phaseStore is a SharedStore that adds up the time spent in each of the mover's kinds of
// call, for BenchmarkMove's breakdown of where a move's time goes.
type phaseStore struct {
	rebalance.SharedStore[*sql.Tx]
	mu   sync.Mutex
	took map[string]time.Duration
}

// The phases: copy (CopyChunk), delete (DeleteChunk), verify (the counts and content sums
// on both shards) and the rest (fences, capture, replay, marks).
const (
	phaseCopy   = "copy"
	phaseDelete = "delete"
	phaseVerify = "verify"
	phaseRest   = "rest"
)

func newPhaseStore(s rebalance.SharedStore[*sql.Tx]) *phaseStore {
	return &phaseStore{SharedStore: s, took: map[string]time.Duration{}}
}

func (s *phaseStore) add(phase string, began time.Time) {
	s.mu.Lock()
	s.took[phase] += time.Since(began)
	s.mu.Unlock()
}

// shares returns each phase's part of the time spent in the store, in percent.
func (s *phaseStore) shares() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all time.Duration
	for _, d := range s.took {
		all += d
	}
	out := map[string]float64{}
	for _, p := range []string{phaseCopy, phaseDelete, phaseVerify, phaseRest} {
		if all > 0 {
			out[p] = 100 * s.took[p].Seconds() / all.Seconds()
		}
	}
	return out
}

func (s *phaseStore) CopyChunk(ctx context.Context, m string, tok uint64, o []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	defer s.add(phaseCopy, time.Now())
	return s.SharedStore.CopyChunk(ctx, m, tok, o, from, to, after, limit)
}

// KeepSums and KeptSums pass on the store's kept sums (rebalance.SumKeeper);
// keeping the window's is part of it, keeping the rows left of a deletion part of that.
func (s *phaseStore) KeepSums(ctx context.Context, m string, tok uint64, o []string, shard int, sums []rebalance.Sum) error {
	phase := phaseVerify
	if len(sums) == 1 && sums[0].Digest == "" { // the rows left before a chunk of a deletion
		phase = phaseDelete
	}
	defer s.add(phase, time.Now())
	return s.SharedStore.(rebalance.SumKeeper).KeepSums(ctx, m, tok, o, shard, sums)
}

func (s *phaseStore) KeptSums(ctx context.Context, m string, o []string, shard int) ([]rebalance.Sum, []bool, error) {
	defer s.add(phaseRest, time.Now())
	return s.SharedStore.(rebalance.SumKeeper).KeptSums(ctx, m, o, shard)
}

// DeleteRows passes on what the store says of its deletions (rebalance.DeleteSizer), which
// the wrapper would otherwise hide from NewShared.
func (s *phaseStore) DeleteRows(chunkRows int) int {
	if ds, ok := s.SharedStore.(rebalance.DeleteSizer); ok {
		return ds.DeleteRows(chunkRows)
	}
	return chunkRows
}

// Accessing passes on what the store says of the accesses (rebalance.AccessMeter), which
// the wrapper would otherwise hide from Run.
func (s *phaseStore) Accessing(ctx context.Context, shard int) (bool, error) {
	if am, ok := s.SharedStore.(rebalance.AccessMeter); ok {
		return am.Accessing(ctx, shard)
	}
	return true, nil
}

// DeleteOwners passes on the store's whole deletions (rebalance.OwnersDeleter), which the
// wrapper would otherwise hide from Run.
func (s *phaseStore) DeleteOwners(ctx context.Context, m string, tok uint64, o []string, shard, most int) (int, bool, error) {
	defer s.add(phaseDelete, time.Now())
	if od, ok := s.SharedStore.(rebalance.OwnersDeleter); ok {
		return od.DeleteOwners(ctx, m, tok, o, shard, most)
	}
	return 0, false, nil
}

func (s *phaseStore) DeleteChunk(ctx context.Context, m string, tok uint64, o []string, shard, limit int) (int, error) {
	defer s.add(phaseDelete, time.Now())
	return s.SharedStore.DeleteChunk(ctx, m, tok, o, shard, limit)
}

func (s *phaseStore) Sums(ctx context.Context, o []string, shard int) ([]rebalance.Sum, error) {
	defer s.add(phaseVerify, time.Now())
	return s.SharedStore.Sums(ctx, o, shard)
}

func (s *phaseStore) Counts(ctx context.Context, o []string, shard int) ([]int64, error) {
	defer s.add(phaseVerify, time.Now())
	return s.SharedStore.Counts(ctx, o, shard)
}

func (s *phaseStore) Replay(ctx context.Context, m string, tok uint64, o []string, from, to, limit int) (int, error) {
	defer s.add(phaseRest, time.Now())
	return s.SharedStore.Replay(ctx, m, tok, o, from, to, limit)
}

func (s *phaseStore) SetFence(ctx context.Context, m string, o []string, shard int, st rebalance.FenceState, tok uint64) error {
	defer s.add(phaseRest, time.Now())
	return s.SharedStore.SetFence(ctx, m, o, shard, st, tok)
}

func (s *phaseStore) Fences(ctx context.Context, o []string, shard int) ([]rebalance.Fence, error) {
	defer s.add(phaseRest, time.Now())
	return s.SharedStore.Fences(ctx, o, shard)
}

func (s *phaseStore) ClearChanges(ctx context.Context, m string, tok uint64, o []string, shard int) error {
	defer s.add(phaseRest, time.Now())
	return s.SharedStore.ClearChanges(ctx, m, tok, o, shard)
}
