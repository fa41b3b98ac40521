package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// The chat tables, but reactions reference messages through an application trigger
// (a cascade kept by hand, as many SQLite schemas do) rather than a declared foreign key.
const cascadeByTriggerSchema = `
CREATE TABLE IF NOT EXISTS users (
	id      INTEGER PRIMARY KEY,
	name    TEXT NOT NULL,
	balance BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
	id      BIGINT PRIMARY KEY,
	user_id INTEGER NOT NULL,
	body    TEXT NOT NULL,
	edits   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id);
CREATE TABLE IF NOT EXISTS reactions (
	id         BIGINT PRIMARY KEY,
	user_id    INTEGER NOT NULL,
	message_id BIGINT NOT NULL,
	emoji      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reactions_user_id_id ON reactions (user_id, id);
CREATE INDEX IF NOT EXISTS reactions_message_id ON reactions (message_id)`

// TestDeleteTriggerStopsTheDeletion: TestReferenceAcrossOwners with the cascade kept by
// an application trigger (AFTER DELETE ON messages: delete the reactions to the message)
// instead of ON DELETE CASCADE. User R (staying on shard 0) reacted to a message of user A
// (moving to shard 1). The deletion of A's old copy on shard 0 is a mover's write, which
// fires the application's triggers (SQLite always, PostgreSQL without ReplicaWrites, the
// default): R's acknowledged reaction, on the shard that serves R, was deleted with it, and
// Run and Finish returned nil. The deletion now stops (ErrSchema, naming the trigger), rolled
// back with what the trigger did; once the trigger is gone the move ends.
func TestDeleteTriggerStopsTheDeletion(t *testing.T) {
	forSchema(t, 2, cascadeByTriggerSchema, chatTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		ua, ur := movingAndStaying(after)
		admin := e.open(t, 2)
		for _, db := range admin.dbs {
			if e.dialect == sqlstore.SQLite {
				mustExec(t, db, `CREATE TRIGGER messages_cascade AFTER DELETE ON messages BEGIN DELETE FROM reactions WHERE message_id = OLD.id; END`)
			} else {
				mustExec(t, db, `CREATE FUNCTION messages_cascade() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN DELETE FROM reactions WHERE message_id = OLD.id; RETURN OLD; END $f$`)
				mustExec(t, db, `CREATE TRIGGER messages_cascade AFTER DELETE ON messages FOR EACH ROW EXECUTE FUNCTION messages_cascade()`)
			}
		}
		mustExec(t, admin.dbs[0], "INSERT INTO users VALUES ("+ua+", 'a', 0), ("+ur+", 'r', 0)")
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (10, "+ua+", 'hello', 0)")
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// R's reaction, acknowledged through R's access (R stays on shard 0).
		if err := m.Do(ctx, ur, func(tx *sql.Tx, _ int) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO reactions VALUES (20, "+ur+", 10, 'thumbs up')")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		users := []string{ua, ur}
		err = m.Run(ctx, slices.Values(users))
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "messages_cascade") {
			t.Fatalf("Run with the application's delete trigger: %v, want ErrSchema naming it", err)
		}
		for _, db := range admin.dbs {
			mustExec(t, db, "DROP TRIGGER messages_cascade"+map[bool]string{true: " ON messages"}[e.dialect == sqlstore.PostgreSQL])
		}
		if err := m.Run(ctx, slices.Values(users)); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := m.Finish(ctx, slices.Values(users)); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		var n int
		if err := m.Do(ctx, ur, func(tx *sql.Tx, _ int) error {
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM reactions WHERE user_id = "+ur).Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("user %s (not moved) has %d reactions after Run and Finish returned nil, want its acknowledged 1: the deletion of user %s's old copy fired the application's trigger, which deleted it", ur, n, ua)
		}
	})
}
