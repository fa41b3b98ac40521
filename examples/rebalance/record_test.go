package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"iter"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// recordWorld is a -procs world run in the test's process: SQLite shards loaded at user_id % 5,
// an embedded etcd holding the placement record, a mover's client and an application's
// client with its placementRouter.
type recordWorld struct {
	c      config
	d      *dbs
	mover  *coord.Client
	app    *coord.Client
	router *placementRouter
}

func newRecordWorld(t *testing.T) *recordWorld {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	c := procsConfig(filepath.Join(dir, "data"))
	d, err := prepareProcs(ctx, c, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	eps, stop, err := embedded.Start(filepath.Join(dir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	open := func(id string) *coord.Client {
		cl, err := coord.Open(ctx, eps, "/record/", coord.Options{TTL: 5 * time.Second, Identity: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	w := &recordWorld{c: c, d: d, mover: open("mover"), app: open("app")}
	store, err := openStore(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	w.router = &placementRouter{c: c, client: w.app, store: store, migrations: map[string]*rebalance.Shared[*sql.Tx]{}}
	rev, err := w.mover.Update(ctx, 0, coord.Placement{Layout: userLayout(c.shards)})
	if err != nil {
		t.Fatal(err)
	}
	w.sync(t, rev)
	return w
}

// sync waits until both clients see revision rev.
func (w *recordWorld) sync(t *testing.T, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cl := range []*coord.Client{w.mover, w.app} {
		if _, err := cl.Wait(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
}

// step1 runs the first step of the scenario (5 -> 10) as runMover does: the record says
// moving, the mover runs and finishes, the record says done. It returns the record's revision.
func (w *recordWorld) step1(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	mv, err := w.mover.TryMover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Resign(ctx)
	p, rev, err := w.mover.Current()
	if err != nil {
		t.Fatal(err)
	}
	step := procsSteps(w.c)[0]
	next := p.Clone()
	next.Migration = &coord.Migration{ID: stepID(0, step), Before: userLayout(step[0]), After: userLayout(step[1]),
		Phase: coord.PhaseMoving, Epoch: mv.Epoch()}
	if rev, err = mv.Update(ctx, rev, next); err != nil {
		t.Fatal(err)
	}
	w.sync(t, rev)
	m, err := rebalance.NewShared(stepID(0, step), newUserSharder(step[0]), newUserSharder(step[1]), w.router.store,
		rebalance.SharedOptions{Token: mv.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx, owners(w.c.users)); err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, owners(w.c.users)); err != nil {
		t.Fatal(err)
	}
	done := next.Clone()
	done.Layout = userLayout(step[1])
	done.Migration.Phase = coord.PhaseDone
	if rev, err = mv.Update(ctx, rev, done); err != nil {
		t.Fatal(err)
	}
	w.sync(t, rev)
	return rev
}

// newUser writes, through the application's router, a new user (not among the users the
// migration was given: created after it) with one message, and returns the shard the router
// wrote to, or the router's error.
func (w *recordWorld) newUser(user int64) (int, error) {
	shard := -1
	_, err := w.router.do(context.Background(), strconv.FormatInt(user, 10), func(tx *sql.Tx, s int) error {
		shard = s
		if _, err := tx.Exec("INSERT INTO users (id, name, balance) VALUES ($1, $2, $3)", user, "new", 100); err != nil {
			return err
		}
		_, err := tx.Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)",
			messageID(user, 1), user, 1, "acknowledged", user)
		return err
	})
	return shard, err
}

// readUser reads, through the router, how many messages the user has.
func (w *recordWorld) readUser(user int64) (int, int, error) {
	n, shard := 0, -1
	_, err := w.router.do(context.Background(), strconv.FormatInt(user, 10), func(tx *sql.Tx, s int) error {
		shard = s
		return tx.QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", user).Scan(&n)
	})
	return n, shard, err
}

// TestDoneRecordWithStaleLayoutRefused: after step 1 (5 -> 10) is finished and the record
// says so, a stale operator (or any coordinator that edits the record by hand) writes the
// record back to the old layout, keeping the finished migration in it. coord refuses the
// record (ErrRecord: a done migration's after layout is the layout), so the application
// keeps routing by the record in force, and a new user's write lands where the placement
// the shards serve reads it. Before coord checked this, the record was accepted, the
// application routed by its layout (user_id % 5) while labelling the access with the
// finished migration's placement, and the write was acknowledged on shard 2, where the
// after sharder (user_id % 10) never looks.
func TestDoneRecordWithStaleLayoutRefused(t *testing.T) {
	ctx := context.Background()
	w := newRecordWorld(t)
	rev := w.step1(t)

	// The stale operator: "roll the layout back to 5 shards", editing the current record.
	p, _, err := w.mover.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := p.Clone()
	bad.Layout = userLayout(w.c.shards)
	badRev, err := w.mover.Update(ctx, rev, bad)
	if err == nil {
		t.Errorf("coord accepted a record whose layout (%d shards) is not its done migration's after layout (%d shards)", bad.Layout.Shards, bad.Migration.After.Shards)
		w.sync(t, badRev)
		rev = badRev
	} else if !errors.Is(err, coord.ErrRecord) {
		t.Fatalf("coord refused the edited record with %v, want an error wrapping ErrRecord", err)
	} else {
		t.Logf("coord refused the edited record: %v", err)
	}

	const user = 47 // not among the 40 users moved: a user created after the migration
	shard, err := w.newUser(user)
	if err != nil {
		t.Fatalf("writing user %d through the record in force: %v", user, err)
	}
	if want := user % w.c.grow; shard != want {
		t.Errorf("a write of user %d was acknowledged on shard %d, though the shards serve the finished migration to user_id %% %d, which puts it on shard %d", user, shard, w.c.grow, want)
	}

	// The record is right (again, if it was edited).
	goodRev, err := w.mover.Update(ctx, rev, p.Clone())
	if err != nil {
		t.Fatal(err)
	}
	w.sync(t, goodRev)
	n, at, err := w.readUser(user)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("user %d's acknowledged message is lost: reading it through the placement in force finds %d messages on shard %d (the write went to shard %d)", user, n, at, shard)
	}
}

// TestDoneRecordOfMigrationNeverRunRefused: after step 1 (5 -> 10) is finished, a wrong
// coordinator publishes a record that is consistent in itself (it passes Check, its layout
// is its migration's after layout) but says that step 2 (10 -> 5) is done, though no mover
// ever claimed it (a record restored from the wrong backup, another deployment's mover
// writing under the same prefix, an operator who "shrinks" by editing the record). The
// application routes a new user by step 2's after sharder and labels the access Arriving
// (routed by the after sharder of a migration it holds finished); the shards serve step 1,
// finished, and refuse it (ErrPlacement): an Arriving access is accepted only where the
// shard serves that very migration finished. Before the label, the shards took the access
// for the next migration's before its mover claimed (Placement.Accepts), on any shard, and
// the write was acknowledged on shard 2, where step 1's after sharder never looks.
func TestDoneRecordOfMigrationNeverRunRefused(t *testing.T) {
	ctx := context.Background()
	w := newRecordWorld(t)
	rev := w.step1(t)
	p, _, err := w.mover.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	step := procsSteps(w.c)[1]
	ghost := p.Clone()
	ghost.Layout = userLayout(step[1])
	ghost.Migration = &coord.Migration{ID: stepID(1, step), Before: userLayout(step[0]), After: userLayout(step[1]), Phase: coord.PhaseDone, Epoch: 999}
	if err := ghost.Check(); err != nil {
		t.Fatal(err)
	}
	ghostRev, err := w.mover.Update(ctx, rev, ghost)
	if err != nil {
		t.Fatal(err)
	}
	w.sync(t, ghostRev)

	const user = 47 // a user created now: 47 % 10 = 7 where the data's placement puts it
	shard, err := w.newUser(user)
	refused := err != nil
	switch {
	case err == nil:
		t.Errorf("a write routed by a migration no mover ever ran (%s) was acknowledged on shard %d, though the shards serve %s, finished, which puts user %d on shard %d",
			ghost.Migration.ID, shard, p.Migration.ID, user, user%w.c.grow)
	case !errors.Is(err, rebalance.ErrPlacement):
		t.Errorf("the write was refused with %v, want an error wrapping ErrPlacement", err)
	default:
		t.Logf("the write was refused: %v", err)
	}

	// The record is right again: the user is written, and read, where step 1 puts it.
	goodRev, err := w.mover.Update(ctx, ghostRev, p.Clone())
	if err != nil {
		t.Fatal(err)
	}
	w.sync(t, goodRev)
	if refused { // the application writes it again
		if shard, err = w.newUser(user); err != nil {
			t.Fatalf("writing user %d through the record in force: %v", user, err)
		}
	}
	n, at, err := w.readUser(user)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("user %d's acknowledged message is lost: reading it through the placement in force finds %d messages on shard %d (the write went to shard %d)", user, n, at, shard)
	}
}

// recordLister is the example's store with a hook called before Finish lists the owners of a
// shard (rebalance.OwnerLister): a place to hold one finisher while others act. An error of
// the hook is yielded as the listing's.
type recordLister struct {
	*sqlstore.Store
	hook func(ctx context.Context, shard int) error
}

func (l *recordLister) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if l.hook != nil {
			if err := l.hook(ctx, shard); err != nil {
				yield("", err)
				return
			}
		}
		for o, err := range l.Store.Owners(ctx, shard) {
			if !yield(o, err) {
				return
			}
		}
	}
}

// TestLateFinisherLeavesNewFinishersRecord (held since a Finish that gives up ends only
// its own record of being finished): mover 1 (elected in etcd) moved every
// user of step 1 and is finishing: the shards say "being finished", so a new user's write
// to its old shard waits, and Finish lists the shards for owners left out. Mover 1 loses its
// election while its listing is under way (its key is removed; runMover cancels its context,
// as the example does on Mover.Done), and mover 2 is elected and finishes too. Mover 1's
// listing then fails on the cancelled context and its Finish records, late, that the
// migration is no longer being finished (Finishing(false): no token, no check of who set
// it), while mover 2 is between two shards of its listing. A new user's write to its old
// shard is then accepted (Leaving, the shard no longer says "being finished"); mover 2 had
// listed that shard already, its Finish returns nil, and the migration is finished with the
// acknowledged write on a shard the after sharder never reads: stranded, not named.
func TestLateFinisherLeavesNewFinishersRecord(t *testing.T) {
	ctx := context.Background()
	w := newRecordWorld(t)
	store := w.router.store
	step := procsSteps(w.c)[0]
	id := stepID(0, step)
	before, after := newUserSharder(step[0]), newUserSharder(step[1])
	const user = 47 // created during the finish: old shard 47 % 5 = 2, new 47 % 10 = 7

	// Mover 1: elected, records the migration, moves every user.
	mv1, err := w.mover.TryMover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, rev, err := w.mover.Current()
	if err != nil {
		t.Fatal(err)
	}
	moving := p.Clone()
	moving.Migration = &coord.Migration{ID: id, Before: userLayout(step[0]), After: userLayout(step[1]), Phase: coord.PhaseMoving, Epoch: mv1.Epoch()}
	if rev, err = mv1.Update(ctx, rev, moving); err != nil {
		t.Fatal(err)
	}
	w.sync(t, rev)
	ctx1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	go func() { <-mv1.Done(); cancel1() }() // as runMover does
	listing1, release1 := make(chan struct{}), make(chan struct{})
	l1 := &recordLister{Store: store, hook: func(ctx context.Context, shard int) error {
		if shard == 0 {
			close(listing1)
			<-release1 // a slow statement, a paused process
			return ctx.Err()
		}
		return nil
	}}
	m1, err := rebalance.NewShared(id, before, after, l1, rebalance.SharedOptions{Token: mv1.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.Run(ctx1, owners(w.c.users)); err != nil {
		t.Fatal(err)
	}
	finish1 := make(chan error, 1)
	go func() { finish1 <- m1.Finish(ctx1, owners(w.c.users)) }()
	<-listing1

	// Mover 1 loses its election: its key is removed (an operator, a lease lost).
	if _, err := w.mover.Etcd().Delete(ctx, w.mover.Prefix()+"mover/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-mv1.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("mover 1 did not notice it lost the election")
	}
	mv2, err := w.app.TryMover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mv2.Resign(ctx)
	listing2, release2 := make(chan struct{}), make(chan struct{})
	l2 := &recordLister{Store: store, hook: func(ctx context.Context, shard int) error {
		if shard == before.Locate(strconv.Itoa(user))+1 {
			close(listing2) // shard 2 listed: user 47 has no rows there yet
			<-release2
		}
		return nil
	}}
	m2, err := rebalance.NewShared(id, before, after, l2, rebalance.SharedOptions{Token: mv2.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	finish2 := make(chan error, 1)
	go func() { finish2 <- m2.Finish(ctx, owners(w.c.users)) }()
	<-listing2

	// Mover 1's listing ends, late, on its cancelled context.
	close(release1)
	if err := <-finish1; err == nil {
		t.Fatal("mover 1's Finish succeeded")
	} else {
		t.Logf("mover 1's Finish: %v", err)
	}

	// The application creates a user; the record still says step 1 is moving.
	shard, werr := w.newUser(user)
	if werr != nil {
		t.Logf("the new user's write was refused or waited: %v", werr)
	}
	close(release2)
	ferr := <-finish2
	if werr != nil {
		return // held: the write was not acknowledged
	}
	if ferr != nil {
		t.Logf("held: mover 2's Finish named what it found: %v", ferr)
		return
	}
	var there int
	if err := w.d.shards[shard].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", user).Scan(&there); err != nil {
		t.Fatal(err)
	}
	t.Errorf("mover 2's Finish returned nil though user %d's acknowledged write (%d message) is on shard %d, where the after sharder does not put it (it puts it on shard %d)", user, there, shard, after.Locate(strconv.Itoa(user)))
	done := moving.Clone()
	done.Layout = userLayout(step[1])
	done.Migration.Phase = coord.PhaseDone
	done.Migration.Epoch = mv2.Epoch()
	_, rev, err = w.app.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev, err = mv2.Update(ctx, rev, done); err != nil {
		t.Fatal(err)
	}
	w.sync(t, rev)
	n, at, err := w.readUser(user)
	if err != nil {
		t.Logf("reading user %d after the finish: %v", user, err)
	}
	if n != 1 {
		t.Errorf("user %d's acknowledged message is lost: reading it through the placement in force finds %d messages on shard %d (the write went to shard %d)", user, n, at, shard)
	}
}
