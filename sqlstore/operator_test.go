package sqlstore_test

// Operator mistakes: a migration run with sharders, IDs, owner lists or options that differ
// between processes, or in an order the docs do not intend. Each test here fails when an
// acknowledged write is lost or stranded, or the application can no longer read an owner,
// while every Run and Finish returned nil.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

const operatorNotesSchema = `CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)`

var operatorNotes = sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}

// TestOperatorPrefixWrappedSharderSamePlacement: the mover's process is configured with its
// sharders wrapped in shard.ByPrefix (a config typo: the keys of another service are prefix
// IDs), the application's with the bare sharders, both for migration "grow", Jump(2) ->
// Jump(3). The owners are named "<prefix>-<n>", so the two configurations put them on
// different shards. Fingerprint probed keys without a '-', so both carried one Placement:
// the mover moved o2 by its prefix and the application, routing by Jump, lost o1's rows
// and o2 for good, while Run and Finish returned nil. The placements differ now: once the
// mover has claimed, the application's accesses are refused (ErrPlacement), not misrouted.
func TestOperatorPrefixWrappedSharderSamePlacement(t *testing.T) {
	forSchema(t, 3, operatorNotesSchema, []sqlstore.TableSpec{operatorNotes}, func(t *testing.T, e *engine) {
		ctx := context.Background()
		two, _ := shard.NewJump(2)
		three, _ := shard.NewJump(3)
		wtwo, _ := shard.NewJump(2)
		wthree, _ := shard.NewJump(3)
		wbefore, wafter := shard.ByPrefix(wtwo), shard.ByPrefix(wthree)

		// o1: its prefix stays (ByPrefix does not move it), Jump moves it from the prefix's shard.
		// o2: its prefix moves to 2, Jump keeps it on the prefix's old shard.
		var o1, o2 string
		for p := 0; o1 == "" || o2 == ""; p++ {
			prefix := fmt.Sprintf("tenant%d", p)
			for n := 0; n < 200; n++ {
				o := fmt.Sprintf("%s-%d", prefix, n)
				switch {
				case o1 == "" && two.Locate(prefix) == three.Locate(prefix) && two.Locate(o) == two.Locate(prefix) && three.Locate(o) != two.Locate(o):
					o1 = o
				case o2 == "" && two.Locate(prefix) != three.Locate(prefix) && two.Locate(o) == two.Locate(prefix) && three.Locate(o) == two.Locate(o):
					o2 = o
				}
			}
		}
		t.Logf("o1 %s: Jump %d -> %d, ByPrefix %d -> %d; o2 %s: Jump %d -> %d, ByPrefix %d -> %d",
			o1, two.Locate(o1), three.Locate(o1), wbefore.Locate(o1), wafter.Locate(o1),
			o2, two.Locate(o2), three.Locate(o2), wbefore.Locate(o2), wafter.Locate(o2))

		app, err := rebalance.NewShared("grow", two, three, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mover, err := rebalance.NewShared("grow", wbefore, wafter, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if app.Placement() == mover.Placement() {
			t.Fatalf("ByPrefix(Jump) and Jump share a placement: %+v", app.Placement())
		}
		write := func(o string, k int64, body string) {
			t.Helper()
			if err := app.Do(ctx, o, func(tx *sql.Tx, s int) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO notes VALUES ($1, $2, $3)", k, o, body)
				return err
			}); err != nil {
				t.Fatalf("write %s: %v", o, err)
			}
		}
		write(o1, 1, "o1 one")
		write(o1, 2, "o1 two")
		write(o2, 3, "o2 one")

		owners := []string{o1, o2}
		if err := mover.Run(ctx, slices.Values(owners)); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// The shards serve the mover's placement now: the application is refused, and o1's
		// rows stay where they were written.
		err = app.Do(ctx, o1, func(tx *sql.Tx, s int) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO notes VALUES (4, $1, 'not acknowledged')", o1)
			return err
		})
		if !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("the application's write after the mover's claim: %v, want ErrPlacement", err)
		}
		admin := e.open(t, 1)
		if n, err := admin.store.Count(ctx, o1, wbefore.Locate(o1)); err != nil || n != 2 {
			t.Fatalf("o1's shard holds %d rows (%v), want its 2", n, err)
		}
	})
}

// TestOperatorTwoControlDatabases: a mover configured with another control database DSN than
// the other processes. Each control database issues its own tokens, from 1, and holds its
// own leases: two movers of one migration both held token 1, which every shard took from
// both, and the second, resuming from fences it read before the first committed, copied the
// old copy over an update acknowledged on the new shard, while both Runs and Finish
// returned nil. The shards record the control database they were first listed with, and
// Init refuses another; the first is still accepted.
func TestOperatorTwoControlDatabases(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		e.open(t, 1)
		if p, err := secondControl(t, e).openErr(1); !errors.Is(err, sqlstore.ErrOtherControl) {
			if p != nil {
				p.close()
			}
			t.Fatalf("a Store with another control database: %v, want ErrOtherControl", err)
		}
		e.open(t, 1)
	})
}

// secondControl returns e with another control database, new and empty.
func secondControl(t *testing.T, e *engine) *engine {
	t.Helper()
	e2 := *e
	if e.dialect == sqlstore.PostgreSQL {
		dsns, err := pg.createDBs(1)
		if err != nil {
			t.Fatal(err)
		}
		e2.control = dsns[0]
	} else {
		if !strings.Contains(e.shards[0], "shard0.db") {
			t.Fatalf("unexpected DSN %s", e.shards[0])
		}
		e2.control = strings.Replace(e.shards[0], "shard0.db", "control2.db", 1)
	}
	return &e2
}

// TestOperatorBeforeHasTooFewShards: the data is placed by Jump(4) on the store's 4 shards
// (no migration has run: the shards record no placement), and the operator shrinks it with
// Shared migration "shrink" from Jump(3) to Jump(2): a typo, 3 for 4. Jump places every
// owner not on shard 3 alike with 3 and 4 shards, so the move finds what it expects on
// shards 0 to 2. Finish looks for owners left behind (OwnerLister) and fenced part way
// (FenceLister) on the first max(before, after) shards only, 3 of them: shard 3 is never
// listed.
//
// Sequence: owner O (Jump(4): shard 3) and owner P (shard 2, moving to shard 0 or 1) each
// hold a row. Run(O, P) moves P (and "moves" O from the empty shard Jump(3) gives it) and
// returns nil; Finish(O, P) returns nil. O's row is on shard 3, where neither sharder looks:
// the application reads no row of O.
func TestOperatorBeforeHasTooFewShards(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		four, _ := shard.NewJump(4)
		three, _ := shard.NewJump(3)
		two, _ := shard.NewJump(2)
		var uo, up string
		for u := 1; uo == "" || up == ""; u++ {
			s := strconv.Itoa(u)
			switch {
			case uo == "" && four.Locate(s) == 3:
				uo = s
			case up == "" && four.Locate(s) == 2 && three.Locate(s) == 2:
				up = s
			}
		}
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[3], "INSERT INTO messages VALUES (1, "+uo+", 1, 'o1', 0)")
		mustExec(t, admin.dbs[2], "INSERT INTO messages VALUES (2, "+up+", 1, 'p1', 0)")

		m, err := rebalance.NewShared("shrink", three, two, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owners := []string{uo, up}
		if err := m.Run(ctx, slices.Values(owners)); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Finish lists every shard the store has, and names O's row on shard 3.
		err = m.Finish(ctx, slices.Values(owners))
		if !errors.Is(err, rebalance.ErrUnfinished) || !strings.Contains(err.Error(), fmt.Sprintf("%q", uo+" (shard 3)")) {
			t.Fatalf("Finish: %v, want ErrUnfinished naming owner %s on shard 3", err, uo)
		}
		if n, err := admin.store.Count(ctx, uo, 3); err != nil || n != 1 {
			t.Fatalf("shard 3 holds %d rows of owner %s (%v), want its row, kept", n, uo, err)
		}
	})
}

// TestOperatorFinishesSharedWithMigrationAPI: the operator finishes Shared migration "grow"
// with the in-process API, rebalance.New("grow", ...).Finish, over the same Store (the
// finishing tool of an earlier migration, say). That Finish checked the marks and the owners
// left behind, but not the owners a Run left fenced part way (their new shard then refused
// them for good), and it held new owners off their old shards only in its own process (a new
// owner's first row, written there by an application process while it listed the shards,
// was stranded); then it recorded the Shared placement finished. Its claim is refused now
// (ErrPlacement: the shards serve the migration through the Shared API; and a shard that
// holds fences of the migration refuses to record it finished that way, ErrConfig),
// changing nothing, and Shared.Finish finishes it.
func TestOperatorFinishesSharedWithMigrationAPI(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		var movers []string
		for u := 1; len(movers) < 2; u++ {
			if after.Locate(strconv.Itoa(u)) == 1 {
				movers = append(movers, strconv.Itoa(u))
			}
		}
		ua, uc := movers[0], movers[1]
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (1, "+ua+", 1, 'a1', 0)")
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		app, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatalf("Run: %v", err)
		}
		fin, err := rebalance.New("grow", before, after, e.open(t, 4).store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := fin.Finish(ctx, slices.Values([]string{ua})); !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("Finish of a Shared migration through rebalance.New: %v, want ErrPlacement", err)
		}
		if done, err := admin.store.IsFinished(ctx, "grow"); err != nil || done {
			t.Fatalf("recorded finished: %v (%v)", done, err)
		}
		// The application goes on; a new owner's first row lands on its old shard, and
		// Shared.Finish names it until a Run moves it.
		if err := app.Do(ctx, uc, func(tx *sql.Tx, s int) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO messages VALUES (2, "+uc+", 1, 'c1', 0)")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values([]string{ua})); !errors.Is(err, rebalance.ErrUnfinished) {
			t.Fatalf("Shared.Finish with a new owner on its old shard: %v, want ErrUnfinished", err)
		}
		owners := slices.Values([]string{ua, uc})
		if err := m.Run(ctx, owners); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, owners); err != nil {
			t.Fatal(err)
		}
		for _, o := range []string{ua, uc} {
			var n int
			if err := app.Do(ctx, o, func(tx *sql.Tx, s int) error {
				return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = "+o).Scan(&n)
			}); err != nil || n != 1 {
				t.Fatalf("owner %s: %d rows (%v), want 1", o, n, err)
			}
		}
	})
}

// TestOperatorFinishWithAnotherAfterSharder: a Shared value of migration "grow" made with
// another after sharder than its mover's (Jump(3) for Jump(2): a configuration that
// differs), whose owners both sharders place alike, so that the marks and the listing agree.
// Its Finish recorded nothing (no shard serves its placement) and returned nil, and the value
// then routed by its after sharder alone. The control database serves the migration with the
// mover's sharders: Finish is refused (ErrPlacement), and the mover's Finish finishes it.
func TestOperatorFinishWithAnotherAfterSharder(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		one, _ := shard.NewJump(1)
		two, _ := shard.NewJump(2)
		three, _ := shard.NewJump(3)
		var owners []string
		for u := 1; len(owners) < 3; u++ {
			if o := strconv.Itoa(u); two.Locate(o) == 1 && three.Locate(o) == 1 {
				owners = append(owners, o)
			}
		}
		admin := e.open(t, 2)
		for i, o := range owners {
			mustExec(t, admin.dbs[0], fmt.Sprintf("INSERT INTO messages VALUES (%d, %s, 1, 'm', 0)", i+1, o))
		}
		m, err := rebalance.NewShared("grow", one, two, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(owners)); err != nil {
			t.Fatal(err)
		}
		wrong, err := rebalance.NewShared("grow", one, three, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := wrong.Finish(ctx, slices.Values(owners)); !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("Finish with another after sharder: %v, want ErrPlacement", err)
		}
		if done, err := admin.store.IsFinished(ctx, "grow"); err != nil || done {
			t.Fatalf("recorded finished: %v (%v)", done, err)
		}
		if err := m.Finish(ctx, slices.Values(owners)); err != nil {
			t.Fatal(err)
		}
		if done, err := admin.store.IsFinished(ctx, "grow"); err != nil || !done {
			t.Fatalf("recorded finished: %v (%v)", done, err)
		}
	})
}
