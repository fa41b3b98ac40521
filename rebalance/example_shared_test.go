package rebalance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// A migration shared by processes: each application process makes a Shared with the same ID
// and sharders and reads and writes through Do; the mover runs it with its fencing token. The
// store here is MemShared, this package's in-memory SharedStore for tests; the sqlstore
// module has the one for SQLite and PostgreSQL, where Tx is *sql.Tx.
func ExampleNewShared() {
	ctx := context.Background()
	before, _ := shard.NewModulo(2)
	after, _ := shard.NewModulo(3)
	store := rebalance.NewMemShared(3)
	owners := []string{"alice", "bob", "carol", "dave"}

	app, err := rebalance.NewShared("grow-2-3", before, after, store, rebalance.SharedOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	write := func(owner, row string) error {
		return app.Do(ctx, owner, func(tx *rebalance.MemTx, _ int) error {
			tx.Put(len(tx.Rows()), row)
			return nil
		})
	}
	for _, o := range owners {
		_ = write(o, "hello "+o)
	}

	mover, _ := rebalance.NewShared("grow-2-3", before, after, store, rebalance.SharedOptions{Token: 1, Concurrency: 2})
	if err := mover.Run(ctx, slices.Values(owners)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("moved:", mover.Stats().Moved, "finish:", mover.Finish(ctx, slices.Values(owners)))

	for _, o := range owners {
		_ = write(o, "again "+o)
		_ = app.Do(ctx, o, func(tx *rebalance.MemTx, s int) error {
			fmt.Printf("%s on shard %d: %d rows\n", o, s, len(tx.Rows()))
			return nil
		})
		// A process that still routes by the old sharder is refused by the old shard.
		if old := before.Locate(o); old != after.Locate(o) {
			err := store.Access(ctx, mover.Placement(), o, old, func(*rebalance.MemTx) error { return nil })
			fmt.Println(" ", errors.Is(err, rebalance.ErrFenced), err)
		}
	}
	// A mover with an older token is refused.
	stale, _ := rebalance.NewShared("grow-2-3", before, after, store, rebalance.SharedOptions{Token: 0})
	fmt.Println(stale.Run(ctx, slices.Values(owners)))
	// Output:
	// moved: 3 finish: <nil>
	// alice on shard 0: 2 rows
	//   true rebalance: owner "alice": shard 1 no longer serves it (moved)
	// bob on shard 1: 2 rows
	// carol on shard 1: 2 rows
	//   true rebalance: owner "carol": shard 0 no longer serves it (moved)
	// dave on shard 2: 2 rows
	//   true rebalance: owner "dave": shard 0 no longer serves it (moved)
	// rebalance: migration "grow-2-3": the control database refuses stale mover epoch 0 < 1: another mover took over
}
