package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// TestArrivingAccessOnlyWhereFinished: an access labelled Arriving (routed by the after
// sharder alone, the process holding the migration finished) runs only on a shard that
// serves that very placement, finished: not where nothing is served yet, not while the
// migration is unfinished, and not for a migration no mover claimed after the finished one
// (a record that says done of a migration never run), which the shards accept unlabelled
// only, as routed by its before sharder. A refused access runs nothing and says why.
func TestArrivingAccessOnlyWhereFinished(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, span(1, 20), 2)
		store := e.open(t, 2).store
		m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		three, _ := shard.NewJump(3)
		two, _ := shard.NewJump(2)
		grow, shrink := m.Placement(), rebalance.PlacementOf("shrink", three, two)
		grow.Arriving = true
		access := func(p rebalance.Placement, s int) (ran bool, err error) {
			err = store.Access(ctx, p, "1000", s, func(tx *sql.Tx) error {
				ran = true
				var n int
				return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = 1000").Scan(&n)
			})
			return ran, err
		}
		refused := func(what string, p rebalance.Placement, s int) {
			t.Helper()
			ran, err := access(p, s)
			var pe *rebalance.PlacementError
			if !errors.As(err, &pe) || ran || pe.Shard != s || !pe.Wanted.Arriving {
				t.Fatalf("%s: shard %d: ran %v, %v; want a PlacementError of an Arriving access, fn not run", what, s, ran, err)
			}
		}
		accepted := func(what string, p rebalance.Placement, s int) {
			t.Helper()
			if ran, err := access(p, s); err != nil || !ran {
				t.Fatalf("%s: shard %d: ran %v, %v; want accepted", what, s, ran, err)
			}
		}
		refused("no placement recorded", grow, 0)
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		for s := range 3 {
			refused("the migration unfinished", grow, s)
		}
		if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		accepted("the migration finished", grow, w.after.Locate("1000"))
		for s := range 3 {
			arriving := shrink
			arriving.Arriving = true
			refused("a migration no mover claimed", arriving, s)
			accepted("the next migration by its before sharder", shrink, s)
		}
	})
}
