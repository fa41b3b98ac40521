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
	"github.com/shardkit/shard/sqlstore"
)

// Teams are each shard's own (not moved, no owner column); a user belongs to one of its
// shard's teams; messages reference users (a foreign key among the moved tables).
const teamsSchema = `
CREATE TABLE IF NOT EXISTS teams (
	id   BIGINT PRIMARY KEY,
	name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
	id      INTEGER PRIMARY KEY,
	team_id BIGINT NOT NULL REFERENCES teams (id),
	name    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
	id      BIGINT PRIMARY KEY,
	user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	body    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id)`

var teamsTables = []sqlstore.TableSpec{
	{Table: "users", Owner: "id", Key: "id", IntOwner: true, Columns: []string{"id", "team_id", "name"}},
	{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "body"}},
}

// TestReferenceToATableNotMoved: the mover's writes on the shard that imports the
// owners skip the foreign key checks where the moved tables reference one another (SQLite:
// foreign_keys off; PostgreSQL: session_replication_role = replica), on the grounds that the
// rows equal the old shard's, which met the constraints. That holds for references among
// the moved tables, not for a moved table's reference to a table that is not moved
// (users.team_id REFERENCES teams, teams each shard's own): user A of team 7 on shard 0
// moves to shard 1, which has no team 7; the copy is written there dangling, the sums
// agreed, Run and Finish returned nil, and shard 1 served a user row that broke its declared
// foreign key (a later team 7 created there becomes A's team). The window now looks for
// such rows on both shards and stops (ErrSchema, naming the row): shard 0 serves A again;
// once team 7 is on shard 1 too, the move ends.
func TestReferenceToATableNotMoved(t *testing.T) {
	forSchema(t, 2, teamsSchema, teamsTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		a := 1
		for after.Locate(strconv.Itoa(a)) != 1 {
			a++
		}
		ua := strconv.Itoa(a)
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO teams VALUES (7, 'seven')")
		mustExec(t, admin.dbs[1], "INSERT INTO teams VALUES (8, 'eight')")
		mustExec(t, admin.dbs[0], "INSERT INTO users VALUES ("+ua+", 7, 'a')")
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (1, "+ua+", 'hello')")
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 4).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		users := []string{ua}
		err = m.Run(ctx, slices.Values(users))
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "references a row of table teams") {
			t.Fatalf("Run with team 7 on shard 0 only: %v, want ErrSchema naming the reference", err)
		}
		mustExec(t, admin.dbs[1], "INSERT INTO teams VALUES (7, 'seven')")
		if err := m.Run(ctx, slices.Values(users)); err != nil {
			t.Fatalf("Run with team 7 on both shards: %v", err)
		}
		if err := m.Finish(ctx, slices.Values(users)); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		var dangling int
		if err := m.Do(ctx, ua, func(tx *sql.Tx, s int) error {
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM users u WHERE u.id = "+ua+" AND NOT EXISTS (SELECT 1 FROM teams WHERE teams.id = u.team_id)").Scan(&dangling)
		}); err != nil {
			t.Fatal(err)
		}
		if dangling != 0 {
			t.Fatalf("user %s's row on its new shard references team 7, which that shard does not hold: its declared foreign key is broken", ua)
		}
	})
}
