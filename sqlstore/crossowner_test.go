package sqlstore_test

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

// TestReferenceAcrossOwners: the reactions table's owner column holds the user who reacted,
// so user R's reaction references a message of user A. A moves, R stays: the deletion of A's
// old messages would cascade into R's reaction (ON DELETE CASCADE), which nothing copied, and
// Run returned nil. Now the deletion stops with ErrSchema naming the reaction, R's reaction
// and A's old message stay, and A is served by its new shard; once the reaction is gone (the
// application's decision), Run deletes the old copy.
func TestReferenceAcrossOwners(t *testing.T) {
	for _, deleteRows := range []int{0, 1} { // whole owners (DeleteOwners), and chunks
		t.Run(fmt.Sprintf("DeleteRows=%d", deleteRows), func(t *testing.T) { referenceAcrossOwners(t, deleteRows) })
	}
}

// movingAndStaying returns the first user that after places on shard 1 (moving there from
// shard 0 under a grow from one shard) and the first it leaves on shard 0.
func movingAndStaying(after shard.Sharder) (moving, staying string) {
	for u := 1; moving == "" || staying == ""; u++ {
		switch s := strconv.Itoa(u); {
		case after.Locate(s) == 1 && moving == "":
			moving = s
		case after.Locate(s) == 0 && staying == "":
			staying = s
		}
	}
	return moving, staying
}

func referenceAcrossOwners(t *testing.T, deleteRows int) {
	forSchema(t, 2, chatSchema, chatTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		ua, ur := movingAndStaying(after)
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO users VALUES ("+ua+", 'a', 0), ("+ur+", 'r', 0)")
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (10, "+ua+", 'hello', 0)")
		mustExec(t, admin.dbs[0], "INSERT INTO reactions VALUES (20, "+ur+", 10, 'thumbs up')")
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{DeleteRows: deleteRows})
		if err != nil {
			t.Fatal(err)
		}
		users := []string{ua, ur}
		err = m.Run(ctx, slices.Values(users))
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "row 20 of table reactions, owner "+ur+"'s, references a row of table messages") {
			t.Fatalf("Run: %v, want ErrSchema naming reaction 20", err)
		}
		count := func(shard int, q string) (n int) {
			t.Helper()
			if err := admin.dbs[shard].QueryRow(q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if count(0, "SELECT COUNT(*) FROM reactions WHERE id = 20") != 1 || count(0, "SELECT COUNT(*) FROM messages WHERE id = 10") != 1 {
			t.Fatal("the reaction or the message it references is gone from the old shard")
		}
		if f, _ := admin.store.Fences(ctx, []string{ua}, 1); f[0].State != rebalance.Serving || count(1, "SELECT COUNT(*) FROM messages WHERE id = 10") != 1 {
			t.Fatalf("new shard says %v for user A, want serving, with the message", f[0])
		}
		err = m.Do(ctx, ur, func(tx *sql.Tx, _ int) error {
			_, err := tx.ExecContext(ctx, "DELETE FROM reactions WHERE id = 20")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(users)); err != nil {
			t.Fatal(err)
		}
		if n := count(0, "SELECT COUNT(*) FROM messages WHERE id = 10"); n != 0 {
			t.Fatalf("the old copy of A's message is still on the old shard (%d)", n)
		}
	})
}

// TestRepliesWithinOneOwner: messages that reply to earlier messages of the same user
// (messages.reply_to references messages, ON DELETE CASCADE) are no reference across
// owners: the user moves, deleted in chunks of a few rows, each chunk's messages referenced
// by later ones still there, and every row arrives.
func TestRepliesWithinOneOwner(t *testing.T) {
	schema := strings.Replace(chatSchema, "edits   BIGINT NOT NULL\n);", "edits   BIGINT NOT NULL,\n\treply_to BIGINT REFERENCES messages (id) ON DELETE CASCADE\n);", 1)
	withReplies := messagesTable
	withReplies.Columns = append(slices.Clone(messagesTable.Columns), "reply_to")
	forSchema(t, 2, schema, []sqlstore.TableSpec{usersTable, withReplies, reactionsTable}, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		a := 1
		for after.Locate(strconv.Itoa(a)) != 1 {
			a++
		}
		ua := strconv.Itoa(a)
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO users VALUES ("+ua+", 'a', 0)")
		for i := 1; i <= 30; i++ {
			reply := "NULL"
			if i > 1 {
				reply = strconv.Itoa(i - 1)
			}
			mustExec(t, admin.dbs[0], fmt.Sprintf("INSERT INTO messages VALUES (%d, %s, 'm', 0, %s)", i, ua, reply))
		}
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{ChunkRows: 7, DeleteRows: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatal(err)
		}
		for s, want := range []int{0, 30} {
			var n int
			if err := admin.dbs[s].QueryRow("SELECT COUNT(*) FROM messages").Scan(&n); err != nil || n != want {
				t.Fatalf("shard %d holds %d messages (%v), want %d", s, n, err, want)
			}
		}
	})
}
