package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// refRaceStore runs during (before, while) the first deletion of old copies on shard 0.
type refRaceStore struct {
	*sqlstore.Store
	once   sync.Once
	during func(delete func())
}

func (s *refRaceStore) DeleteOwners(ctx context.Context, m string, tok uint64, o []string, shard, most int) (n int, ok bool, err error) {
	run := func() { n, ok, err = s.Store.DeleteOwners(ctx, m, tok, o, shard, most) }
	if shard != 0 {
		run()
		return
	}
	ran := false
	s.once.Do(func() { ran = true; s.during(run) })
	if !ran {
		run()
	}
	return
}

// TestReferenceAcrossOwnersRace: TestReferenceAcrossOwners's check (a row of
// another owner that references rows of the old copy stops the deletion with ErrSchema) is
// a SELECT in the deletion's transaction before its DELETE, under READ COMMITTED, with no
// lock that keeps such a row from appearing in between. User R (staying on shard 0) reacts
// to user A's message 10 (A moving to shard 1) in a transaction that is still open when
// the deletion of A's old copy looks for references: the look does not see the
// uncommitted reaction, the DELETE of message 10 waits for R's key-share lock, R commits
// (acknowledged), and the DELETE's ON DELETE CASCADE took R's reaction. Run and Finish
// returned nil; R's acknowledged reaction was on no shard. The deletion now locks the rows
// it deletes before it looks: it waits for R, sees the reaction, and stops (ErrSchema).
func TestReferenceAcrossOwnersRace(t *testing.T) {
	forSchema(t, 2, chatSchema, chatTables, func(t *testing.T, e *engine) {
		if e.dialect != sqlstore.PostgreSQL {
			t.Skip("SQLite runs one write transaction at a time: the deletion's look sees the committed reaction")
		}
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		ua, ur := movingAndStaying(after)
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO users VALUES ("+ua+", 'a', 0), ("+ur+", 'r', 0)")
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (10, "+ua+", 'hello', 0)")

		app, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var reactErr error
		st := &refRaceStore{Store: e.open(t, 4).store}
		st.during = func(deleteOld func()) {
			inserted, release, reacted := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() {
				defer close(reacted)
				// R's access: a reaction to A's message, its request slow to finish.
				reactErr = app.Do(ctx, ur, func(tx *sql.Tx, s int) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO reactions VALUES (20, "+ur+", 10, 'thumbs up')"); err != nil {
						return err
					}
					close(inserted)
					<-release
					return nil
				})
			}()
			select {
			case <-inserted:
			case <-reacted:
				t.Logf("R's reaction failed before the deletion: %v", reactErr)
				deleteOld()
				return
			}
			deleted := make(chan struct{})
			go func() { defer close(deleted); deleteOld() }()
			time.Sleep(500 * time.Millisecond) // the deletion looks for references, then waits on R's lock
			close(release)
			<-reacted
			<-deleted
		}
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		users := []string{ua, ur}
		runErr := m.Run(ctx, slices.Values(users))
		switch {
		case errors.Is(runErr, sqlstore.ErrSchema):
			t.Logf("the deletion saw the reaction: %v", runErr) // A is served by shard 1, its old copy kept
		case runErr != nil:
			t.Fatalf("Run: %v", runErr)
		default:
			if err := m.Finish(ctx, slices.Values(users)); err != nil {
				t.Fatalf("Finish: %v", err)
			}
		}
		want := 0 // R's reaction, if acknowledged
		if reactErr == nil {
			want = 1
		}
		total := 0
		for _, db := range admin.dbs {
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM reactions WHERE id = 20").Scan(&n); err != nil {
				t.Fatal(err)
			}
			total += n
		}
		if total != want {
			t.Fatalf("R's reaction 20 (acknowledged: %v) is on %d shards (Run: %v): the deletion of A's old copy cascaded into it after its look for references", reactErr == nil, total, runErr)
		}
	})
}
