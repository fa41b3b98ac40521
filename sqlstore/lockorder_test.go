package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// waitForLockWaiter polls pg_locks until some session waits for an advisory lock.
func waitForLockWaiter(t *testing.T, db *sql.DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("nobody waits for an advisory lock after 10 s")
}

// TestReadsAfterTheLock (PostgreSQL): what an access or a fence change reads after waiting
// for its lock includes what the holder committed meanwhile, whatever the statements that
// read it are (a read on a snapshot from before the wait would let a write land on a fenced
// shard, or a stale mover change a fence).
func TestReadsAfterTheLock(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	e := newPostgres(t, 1)
	p := e.open(t, 4)
	ctx := context.Background()
	ns, key, epoch, mkey := p.store.AdvisoryKeys("7", "m")

	t.Run("access sees a fence committed while it waited", func(t *testing.T) {
		holder, err := p.dbs[0].BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.Exec("SELECT pg_advisory_xact_lock($1, $2)", ns, key); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec("INSERT INTO rebalance_fence (owner, state, migration, token) VALUES ('7', $1, 'm', 1)", int(rebalance.Moved)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- p.store.Access(ctx, rebalance.Placement{}, "7", 0, func(tx *sql.Tx) error {
				_, err := tx.Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES (1, 7, 1, 'x', 0)")
				return err
			})
		}()
		waitForLockWaiter(t, p.dbs[0])
		if err := holder.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, rebalance.ErrFenced) {
			t.Fatalf("access after a fence committed while it waited: %v, want ErrFenced", err)
		}
		var n int
		if err := p.dbs[0].QueryRow("SELECT COUNT(*) FROM messages").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d rows written on the fenced shard (%v)", n, err)
		}
	})

	t.Run("fence change sees a token claimed while it waited", func(t *testing.T) {
		holder, err := p.dbs[0].BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.Exec("SELECT pg_advisory_xact_lock($1, $2)", epoch, mkey); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec("INSERT INTO rebalance_epoch (migration, token) VALUES ('m', 5) ON CONFLICT (migration) DO UPDATE SET token = 5"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.store.SetFence(ctx, "m", []string{"8"}, 0, rebalance.Importing, 3) }()
		waitForLockWaiter(t, p.dbs[0])
		if err := holder.Commit(); err != nil {
			t.Fatal(err)
		}
		var fe *rebalance.FenceError
		if err := <-done; !errors.As(err, &fe) || fe.Newest != 5 {
			t.Fatalf("fence change by token 3 after token 5 was claimed while it waited: %v, want a stale-token FenceError", err)
		}
		f, err := p.store.Fences(ctx, []string{"8"}, 0)
		if err != nil || f[0].State != rebalance.Serving {
			t.Fatalf("fence of 8: %v (%v), want unchanged", f, err)
		}
	})
}

// TestFenceChangesDoNotDeadlock (PostgreSQL): fence changes of the same owners, listed in
// opposite orders, from two processes at once, all pass: each takes the owners' locks in
// one order, whatever the order it was given.
func TestFenceChangesDoNotDeadlock(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	ctx := context.Background()
	e := newPostgres(t, 1)
	var owners []string
	for i := range 40 {
		owners = append(owners, strconv.Itoa(i))
	}
	backwards := slices.Clone(owners)
	slices.Reverse(backwards)
	p := e.open(t, 4)
	tok, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Mover: "test", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	start := make(chan struct{})
	for i, list := range [][]string{owners, backwards, owners, backwards} {
		store := e.open(t, 2).store
		if err := store.SetFence(ctx, "m", list, 0, rebalance.Serving, tok); err != nil { // connected
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			for n := range 200 {
				state := []rebalance.FenceState{rebalance.Importing, rebalance.Serving}[(n+i)%2]
				if err := store.SetFence(ctx, "m", list, 0, state, tok); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
