package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// TestFinishRefusesOwnersFencedPartWay: the wait that keeps a new owner's first
// write off its old shard while Finish lists the shards (SharedStore.Finishing) applies only
// to an owner without a fence there. An owner that a stopped Run fenced exporting, and that
// the next Run's and Finish's list leave out (it had no rows left when the list was made),
// is written on its old shard after Finish listed that shard; Finish returned nil, and the
// row was on a shard that no router reads from then on.
//
// Finish now refuses while the migration has owners fenced part way (rebalance.FenceLister),
// and a Run with B listed moves B's message. Sequence: users A and B move from shard 0 to 1. Run 1 (list A, B) fences both (shard 1
// importing, shard 0 exporting) and stops on a copy error. The application deletes B's
// rows (B's access to shard 0, which serves B, exporting). Run 2 with the owners that have
// rows now (A) returns nil. Finish(A) lists shard 0; right after, another process (routing
// by the migration, not finished yet) writes B's first new message through Do: shard 0
// accepts it (B is fenced exporting, so its access does not wait). Finish returns nil.
// Now every router sends B to shard 1 (fenced importing there), and B's acknowledged
// message is on shard 0.
func TestFinishRefusesOwnersFencedPartWay(t *testing.T) {
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
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (1, "+ua+", 1, 'a1', 0), (2, "+ub+", 1, 'b1', 0)")

		mover := &raceStore{Store: e.open(t, 4).store}
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](mover), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The application's process: its own pools and Store, routing by the migration.
		app, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}

		// Run 1 stops on a copy error, both owners fenced.
		mover.failCopy.Store(true)
		if err := m.Run(ctx, slices.Values([]string{ua, ub})); err == nil {
			t.Fatal("Run 1 returned nil with its copies failing")
		} else {
			t.Logf("Run 1: %v", err)
		}
		mover.failCopy.Store(false)

		// The application deletes B's rows (B is served by shard 0, exporting).
		if err := app.Do(ctx, ub, func(tx *sql.Tx, s int) error {
			_, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE user_id = "+ub)
			return err
		}); err != nil {
			t.Fatal(err)
		}

		// Run 2 and Finish with the owners that have rows now: A.
		if err := m.Run(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatalf("Run 2: %v", err)
		}
		var wrote int
		var writeErr error
		mover.afterList = func(s int) {
			if s != 0 || wrote != 0 {
				return
			}
			// Another process writes B's new message just after Finish listed shard 0.
			writeErr = app.Do(ctx, ub, func(tx *sql.Tx, s int) error {
				wrote = s + 100
				_, err := tx.ExecContext(ctx, "INSERT INTO messages VALUES (3, "+ub+", 2, 'b2 acknowledged', 0)")
				return err
			})
		}
		err = m.Finish(ctx, slices.Values([]string{ua}))
		if !errors.Is(err, rebalance.ErrUnfinished) || !strings.Contains(err.Error(), ub) {
			t.Fatalf("Finish with B left fenced part way: %v, want ErrUnfinished naming %s", err, ub)
		}
		// Run with B listed moves what B has, the message included; Finish then finishes.
		if err := m.Run(ctx, slices.Values([]string{ua, ub})); err != nil {
			t.Fatal("Run with B listed:", err)
		}
		if err := m.Finish(ctx, slices.Values([]string{ua, ub})); err != nil {
			t.Fatal("Finish with B listed:", err)
		}
		acked := 0 // B's message 3, if the write (during either Finish) was acknowledged
		if wrote != 0 && writeErr == nil {
			acked = 1
		}
		var n int
		if err := m.Do(ctx, ub, func(tx *sql.Tx, s int) error {
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE id = 3").Scan(&n)
		}); err != nil || n != acked {
			t.Fatalf("after the finish, B's message 3 read %d times (err %v), want %d", n, err, acked)
		}
	})
}
