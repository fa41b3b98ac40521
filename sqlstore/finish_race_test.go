package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"iter"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// raceStore is a Store whose CopyChunk fails while failCopy is set (the mover killed, or its
// connection cut, right after it fenced), that runs beforeFinishing once when Finish begins
// recording that it is being finished (what another process does just before), and runs
// afterList once it listed a shard. Every other method, and the optional interfaces, are
// the Store's own.
type raceStore struct {
	*sqlstore.Store
	failCopy        atomic.Bool
	beforeFinishing func()
	afterList       func(shard int)
}

func (s *raceStore) CopyChunk(ctx context.Context, m string, tok uint64, o []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	if s.failCopy.Load() {
		return nil, 0, false, errors.New("connection reset by peer (the mover killed after its fences)")
	}
	return s.Store.CopyChunk(ctx, m, tok, o, from, to, after, limit)
}

func (s *raceStore) Finishing(ctx context.Context, p rebalance.Placement, finisher uint64, on bool) error {
	if on && s.beforeFinishing != nil {
		f := s.beforeFinishing
		s.beforeFinishing = nil
		f()
	}
	return s.Store.Finishing(ctx, p, finisher, on)
}

func (s *raceStore) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	inner := s.Store.Owners(ctx, shard)
	return func(yield func(string, error) bool) {
		for o, err := range inner {
			if !yield(o, err) {
				return
			}
		}
		if s.afterList != nil {
			s.afterList(shard)
		}
	}
}

// TestFinishRacesAMoverFencing: Shared.Finish checks the owners fenced part way
// (FenceLister.Unsettled) once, before it records on the shards that it is being finished
// (Finishing), and takes no claim: a Run of the same migration by a newer mover may fence an
// owner between the two. Such an owner's accesses to its old shard do not wait for Finish
// (it has a fence there), so a write lands there after Finish listed the shard.
//
// Sequence (users A and B move from shard 0 to 1; B has no rows yet):
//  1. mover 1 (election epoch 1) runs Run([A]): nil. Its list was made before B existed.
//  2. mover 1 loses its election (etcd lease) but its Finish([A]) is in flight; it has
//     read the marks and Unsettled (nothing fenced part way) and is about to record Finishing.
//  3. mover 2 (epoch 2) runs Run([A, B]): claims, fences B importing on shard 1 and exporting
//     on shard 0, and is killed right after (its copy never happens).
//  4. mover 1's Finish records Finishing and lists shard 0 (B has no rows: nothing left behind).
//  5. an application process (routing by the migration, not finished yet) writes B's first
//     message through Shared.Do: shard 0 serves B (exporting) and takes it. Acknowledged.
//  6. mover 1's Finish records the migration finished on every shard and returns nil.
//
// From then on every router sent B to shard 1 (fenced importing there, so refused), B's
// acknowledged message was on shard 0, and no mover could move it: a new mover's Run was
// refused with ErrFinished. Now Finish looks for owners fenced part way after it recorded
// Finishing, and the shards refuse a mover's fence from then on (and once finished): it
// refuses, and a Run with B listed moves B's message.
func TestFinishRacesAMoverFencing(t *testing.T) { finishRacesAMover(t, false) }

// TestFinishRacesAMoverFencingAfterTheListing is the same with mover 2's fences after
// Finish recorded Finishing and listed shard 0: the shards refuse mover 2's fences, and B's
// first write waits for the Finish (it has no fence).
func TestFinishRacesAMoverFencingAfterTheListing(t *testing.T) { finishRacesAMover(t, true) }

func finishRacesAMover(t *testing.T, fenceAfterList bool) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		var movers []int
		for u := 1; len(movers) < 2; u++ {
			if after.Locate(strconv.Itoa(u)) == 1 {
				movers = append(movers, u)
			}
		}
		ua, ub := strconv.Itoa(movers[0]), strconv.Itoa(movers[1])
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (1, "+ua+", 1, 'a1', 0)")

		s1 := &raceStore{Store: e.open(t, 4).store}
		m1, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](s1), rebalance.SharedOptions{Token: 1})
		if err != nil {
			t.Fatal(err)
		}
		s2 := &raceStore{Store: e.open(t, 4).store}
		m2, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](s2), rebalance.SharedOptions{Token: 2})
		if err != nil {
			t.Fatal(err)
		}
		app, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{FenceWait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}

		// 1. mover 1 moves A.
		if err := m1.Run(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatalf("mover 1 Run: %v", err)
		}
		// 3. mover 2's Run, between mover 1's Unsettled and its Finishing.
		s2.failCopy.Store(true)
		mover2 := func() {
			err := m2.Run(ctx, slices.Values([]string{ua, ub}))
			t.Logf("mover 2 Run (killed after its fences): %v", err)
		}
		if !fenceAfterList {
			s1.beforeFinishing = mover2
		}
		// 5. the application's write of B's first message, after shard 0 was listed.
		var writeErr error
		wrote := -1
		s1.afterList = func(s int) {
			if s != 0 || wrote != -1 {
				return
			}
			if fenceAfterList {
				mover2()
			}
			writeErr = app.Do(ctx, ub, func(tx *sql.Tx, s int) error {
				wrote = s
				_, err := tx.ExecContext(ctx, "INSERT INTO messages VALUES (3, "+ub+", 2, 'b acknowledged', 0)")
				return err
			})
		}
		// 2, 4, 6. mover 1's Finish with its list.
		ferr := m1.Finish(ctx, slices.Values([]string{ua}))
		t.Logf("mover 1 Finish([A]): %v; B's write on shard %d: %v", ferr, wrote, writeErr)
		if ferr != nil {
			// Refused: a new mover with every owner moves what B has, and finishes.
			m3, _ := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{Token: 3})
			if err := m3.Run(ctx, slices.Values([]string{ua, ub})); err != nil {
				t.Fatalf("after the refused Finish, Run with A and B: %v", err)
			}
			if err := m3.Finish(ctx, slices.Values([]string{ua, ub})); err != nil {
				t.Fatalf("after the refused Finish, Finish with A and B: %v", err)
			}
			acked := 0
			if writeErr == nil && wrote >= 0 {
				acked = 1
			}
			var n int
			if err := m3.Do(ctx, ub, func(tx *sql.Tx, s int) error {
				return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = "+ub).Scan(&n)
			}); err != nil || n != acked {
				t.Fatalf("B's messages read after the finish: %d (err %v), want %d", n, err, acked)
			}
			return
		}
		if writeErr != nil {
			return // not acknowledged
		}
		// A new mover: refused, the migration is finished.
		m3, _ := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{Token: 3})
		rerr := m3.Run(ctx, slices.Values([]string{ua, ub}))
		t.Logf("mover 3 Run([A, B]): %v", rerr)
		// A router reads B's messages.
		var n int
		derr := app.Do(ctx, ub, func(tx *sql.Tx, s int) error {
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = "+ub).Scan(&n)
		})
		var onOld int
		if err := admin.dbs[0].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = " + ub).Scan(&onOld); err != nil {
			t.Fatal(err)
		}
		if onOld > 0 && after.Locate(ub) != 0 {
			t.Fatalf("Finish returned nil; B's acknowledged message (written on shard %d) is on shard 0, which the after sharder never reads for B (it places B on shard %d); a router reads %d of B's messages (err %v); a new mover's Run: %v",
				wrote, after.Locate(ub), n, derr, rerr)
		}
	})
}
