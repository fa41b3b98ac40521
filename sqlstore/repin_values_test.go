package sqlstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// onCopied runs hook once, before the first SetMark of Copied through it once armed: after the
// batch counted an owner's rows on both shards, before it deletes the old copy.
type onCopied struct {
	*sqlstore.Store
	armed atomic.Bool
	hook  func()
}

func (o *onCopied) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	if m == rebalance.Copied && o.armed.CompareAndSwap(true, false) {
		o.hook()
	}
	return o.Store.SetMark(ctx, migration, owner, m)
}

// TestTwoRepinValuesOfOneID: one process makes two Repins of one ID over its Store and the
// saved directory, the application's (requests go through its Do) and an admin handler's (which
// pins a hot user with Move). The application's value checked the placement a moment ago.
// Between the batch's count of user u's rows and its deletion of the old copy, a request
// writes a message of u through the application's value: it routed by its own directory,
// outside the batch and its locks, and wrote on u's old shard; the deletion then took the
// acknowledged message. That was the code before: values of one ID in a process share the
// batch under way, so the request waits for u's move and writes on the new shard, and the
// application's value, whose directory lacks the pin, is refused afterwards (ErrPlacement)
// instead of writing where no router reads.
func TestTwoRepinValuesOfOneID(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := w.users[0]
		to := (w.before.Locate(u) + 1) % 3
		p := e.open(t, 2)
		hooked := &onCopied{Store: p.store}
		app, _ := newRepin(t, "pin", hooked, 3, nil)
		op, d := newRepin(t, "pin", hooked, 3, nil)
		if err := app.Do(ctx, w.users[1], func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		wrote := make(chan error, 1)
		hooked.hook = func() {
			go func() {
				wrote <- app.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, p, w, u, s) })
			}()
			select { // the fixed code holds the request until u has moved
			case err := <-wrote:
				wrote <- err
			case <-time.After(300 * time.Millisecond):
			}
		}
		hooked.armed.Store(true)
		if err := op.Move(ctx, map[string]int{u: to}); err != nil {
			t.Fatal("the admin's Move:", err)
		}
		if err := <-wrote; err != nil {
			t.Fatal("the request during the batch:", err)
		}
		if err := app.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, p, w, u, s) }); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("a request through the application's value after the batch, its directory without the pin: %v, want ErrPlacement", err)
		}
		if v := w.verify(t, admin, d); v.lost+v.misplaced != 0 {
			t.Errorf("against the directory pinned (served): %v", v)
		}
	})
}
