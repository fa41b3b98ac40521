package sqlstore_test

// FuzzInProcessOperations is FuzzSharedOperations for the in-process rebalance.Migration, in
// Async or Lazy mode: the application's writes through Do (some of whose functions fail
// after their write committed), movers that crash at their kth write to the store, run to
// the end or run the migration before after the next one was published, and Finish
// anywhere, each a new Migration value of the process; every nil Run and Finish is checked
// at once, and every acknowledged row at the end.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// inprocStopAt is stopAt for the in-process Store's writes.
type inprocStopAt struct{ *stopAt }

func (s inprocStopAt) Copy(ctx context.Context, owner string, from, to int) error {
	return s.do(ctx, "copy", func(ctx context.Context) error { return s.Store.Copy(ctx, owner, from, to) })
}

func (s inprocStopAt) Delete(ctx context.Context, owner string, shard int) error {
	return s.do(ctx, "delete", func(ctx context.Context) error { return s.Store.Delete(ctx, owner, shard) })
}

func (s inprocStopAt) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	return s.do(ctx, "delete", func(ctx context.Context) error { return s.Store.DeleteChecked(ctx, migration, owner, shard) })
}

func (s inprocStopAt) KeepOldSum(ctx context.Context, migration, owner string, shard int, sum rebalance.Sum) error {
	return s.do(ctx, "keep sum", func(ctx context.Context) error { return s.Store.KeepOldSum(ctx, migration, owner, shard, sum) })
}

func (s inprocStopAt) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	return s.do(ctx, "mark "+m.String(), func(ctx context.Context) error { return s.Store.SetMark(ctx, migration, owner, m) })
}

// opsLease is the in-process movers' lease: short, since each is a new value and none can
// take over another's claim before it runs out.
const opsLease = 300 * time.Millisecond

type inprocWorld struct {
	*opsWorld
	mode            rebalance.Mode
	p               *proc // the one process
	failAfterCommit bool  // the next access's function fails after its commit
}

func newInprocWorld(t *testing.T, e *engine, mode rebalance.Mode) *inprocWorld {
	w := &inprocWorld{opsWorld: newOpsWorld(t, e), mode: mode, p: e.open(t, 4)}
	var views [2]*rebalance.Migration
	for i := range views {
		views[i] = w.migration(i, nil)
	}
	w.access = func(ctx context.Context, view int, user string, fn func(*sql.Tx) error) error {
		return views[view].Do(ctx, user, func(s int) error {
			tx, err := w.p.dbs[s].BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := fn(tx); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil || !w.failAfterCommit {
				return err
			}
			return errors.New("the application failed after its commit")
		})
	}
	return w
}

// migration is a new value of migration i in the process, over its store wrapped by stop
// if not nil.
func (w *inprocWorld) migration(i int, stop *stopAt) *rebalance.Migration {
	var store rebalance.Store = w.p.store
	if stop != nil {
		stop.Store = w.p.store
		store = inprocStopAt{stop}
	}
	m, err := rebalance.New(w.ids[i], w.layout[i], w.layout[1-i], store, rebalance.Options{Mode: w.mode, Lease: opsLease})
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// run runs migration i over the listed users with a new value and, if Run returns nil,
// checks that they moved.
func (w *inprocWorld) run(ctx context.Context, i int, stop *stopAt) error {
	listed := slices.Clone(w.listed)
	err := w.migration(i, stop).Run(ctx, slices.Values(listed))
	w.logf("%s's Run: %v", w.ids[i], err)
	if err == nil {
		w.check(w.layout[1-i], listed, fmt.Sprintf("after %s's Run returned nil", w.ids[i]))
	}
	return err
}

func (w *inprocWorld) finish(ctx context.Context, i int, stop *stopAt) error {
	err := w.migration(i, stop).Finish(ctx, slices.Values(slices.Clone(w.listed)))
	w.logf("%s's Finish: %v", w.ids[i], err)
	if err == nil {
		w.finished[i] = true
		w.check(w.layout[1-i], nil, fmt.Sprintf("after %s's Finish returned nil", w.ids[i]))
	}
	return err
}

func (w *inprocWorld) step(kind, arg byte) {
	// One process, which routes by the migration in force: a Migration value keeps no
	// fence in the databases, so a write through grow's after back moved the data would
	// go where nobody reads (use Shared where processes may lag).
	view := w.cur
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crash := func() *stopAt {
		return &stopAt{n: int(arg&0x1f) + 1, after: arg&0x80 != 0, cancel: cancel}
	}
	var err error
	switch kind % 11 {
	case 0, 1, 2, 3:
		err = w.appWrite(kind%11, arg, view)
	case 4: // a mover that crashes at its nth write, before it or right after
		_ = w.run(ctx, w.cur, crash())
	case 5:
		_ = w.run(ctx, w.cur, nil)
	case 6:
		_ = w.finish(ctx, w.cur, nil)
	case 7: // a Finish that crashes at its nth write
		_ = w.finish(ctx, w.cur, crash())
	case 8: // the operator publishes the migration back, also before the grow finished
		// Not before the grow claimed the shards: on a store that serves no placement yet,
		// nothing tells a plan whose before sharder is not where the data is (its writes
		// land where nobody reads; its mover's copies stop at ErrStrayRows).
		if w.finished[0] || errors.Is(w.p.store.CheckPlacement(ctx, rebalance.PlacementOf(w.ids[1], w.layout[1], w.layout[0])), rebalance.ErrPlacement) {
			w.cur = 1
		}
	case 10: // an update whose function fails after its commit: not acknowledged
		w.failAfterCommit = true
		err = w.update(view, w.order[int(arg&0x3f)%len(w.order)])
		w.failAfterCommit = false
	case 9: // a mover of the migration before, once back is published and it finished
		if w.cur == 1 && w.finished[0] {
			if err := w.run(ctx, 0, nil); err != nil && !errors.Is(err, rebalance.ErrFinished) {
				w.t.Fatalf("grow's Run after grow finished: %v, want ErrFinished", err)
			}
		}
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

// settle runs and finishes grow, then back if it was published, and checks every row.
func (w *inprocWorld) settle() {
	w.listed = slices.Clone(w.users)
	ctx := context.Background()
	for i := range w.cur + 1 {
		if w.finished[i] {
			continue
		}
		err := w.run(ctx, i, nil)
		if errors.Is(err, rebalance.ErrMoverRunning) {
			// A mover stopped right after its claim: the claim holds until its lease ends.
			time.Sleep(opsLease)
			err = w.run(ctx, i, nil)
		}
		if err != nil {
			w.t.Fatalf("settling: %s's Run: %v", w.ids[i], err)
		}
		if err := w.finish(ctx, i, nil); err != nil {
			w.t.Fatalf("settling: %s's Finish: %v", w.ids[i], err)
		}
	}
	w.check(w.layout[1-w.cur], nil, "at the end")
}

// inprocOpsSeeds are FuzzInProcessOperations' seeds. The first byte picks the mode (odd:
// lazy); then an operation is two bytes: its kind (mod 11) and its argument.
var inprocOpsSeeds = []string{
	"\x00\x05\x00\x06\x00",                         // async: grow, finish
	"\x01\x05\x00\x06\x00",                         // lazy
	"\x00\x00\x01\x04\x02\x02\x01\x05\x00\x06\x00", // insert, crash at write 3, update, resume, finish
	"\x01\x04\x01\x00\x01\x02\x00\x03\x03\x06\x00", // lazy: crash, writes that move owners, finish
	"\x00\x01\x81\x05\x00\x06\x00",                 // a new user nobody listed
	"\x00\x04\x83\x07\x02\x06\x00\x02\x05",         // crash after write 4; Finish crashes; Finish
	// A write, grow, finish (through another value), a new user's first write: it went to
	// the old shard through the application's value, which had read the migration unfinished.
	"\x00\x00\x00\x05\x00\x06\x00\x00\x80",
	"\x00\x00\x00\x05\x00\x07\x1f\x00\x80",         // the same, Finish through a wrapped store
	"\x01\x0a\x00\x0a\x05\x05\x00\x0a\x01\x06\x00", // lazy: functions that fail after their commit
	// Grow, finish, back published; a grow mover; writes.
	"\x00\x05\x00\x06\x00\x08\x00\x09\x00\x00\x42\x02\x41\x04\x05\x06\x00",
	// Grow crashes after its claim, back published before it finished: writes, back's
	// mover and Finish are refused; then grow and back run to the end.
	"\x00\x04\x82\x08\x00\x00\x01\x02\x03\x05\x00\x06\x00",
}

func FuzzInProcessOperations(f *testing.F) {
	for _, seed := range inprocOpsSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		playInproc(newEngine(t, sqlstore.SQLite, 3, opsSchema, opsTables), t, ops)
	})
}

// TestInProcessOperationsOnPostgres plays FuzzInProcessOperations' seeds on PostgreSQL.
func TestInProcessOperationsOnPostgres(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	for i, seed := range inprocOpsSeeds {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			playInproc(newEngine(t, sqlstore.PostgreSQL, 3, opsSchema, opsTables), t, []byte(seed))
		})
	}
}

func playInproc(e *engine, t *testing.T, ops []byte) {
	if len(ops) == 0 {
		return
	}
	mode := rebalance.Async
	if ops[0]%2 == 1 {
		mode = rebalance.Lazy
	}
	ops = ops[1:min(len(ops), 33)]
	w := newInprocWorld(t, e, mode)
	for i := 0; i+1 < len(ops); i += 2 {
		w.step(ops[i], ops[i+1])
	}
	w.settle()
}
