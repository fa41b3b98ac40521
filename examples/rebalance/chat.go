package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/shardkit/shard/sqlstore"
)

// The -procs mode's schema: a chat. Each user has a row in users (a balance the application
// changes), their messages, and the reactions to their messages; all three are owned by the
// user (users.id, messages.user_id, reactions.user_id: the message's user) and move together
// under one fence, in one sqlstore.Store. Foreign keys link them, enforced on both engines
// (SQLite's with _pragma=foreign_keys(1) in the DSN), and deleting a message deletes its
// reactions (ON DELETE CASCADE). The one-process mode keeps its messages table alone.
const chatSchema = `
CREATE TABLE IF NOT EXISTS users (
	id      BIGINT PRIMARY KEY,
	name    TEXT NOT NULL,
	balance BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
	id      BIGINT PRIMARY KEY,
	user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	time    BIGINT NOT NULL,
	message TEXT NOT NULL,
	sender  BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id);
CREATE TABLE IF NOT EXISTS reactions (
	id         BIGINT PRIMARY KEY,
	user_id    BIGINT NOT NULL,
	message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
	sender     BIGINT NOT NULL,
	emoji      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reactions_user_id_id ON reactions (user_id, id);
CREATE INDEX IF NOT EXISTS reactions_message_id ON reactions (message_id);
CREATE TABLE IF NOT EXISTS example_shard (n INTEGER NOT NULL)`

// chatTables are the -procs mode's tables as package sqlstore moves them, parents first.
var chatTables = []sqlstore.TableSpec{
	{Table: "users", Owner: "id", Key: "id", IntOwner: true, Columns: []string{"id", "name", "balance"}},
	{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "time", "message", "sender"}},
	{Table: "reactions", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "message_id", "sender", "emoji"}},
}

// chatTableNames are the chat tables, children first: the order to drop them in.
var chatTableNames = []string{"reactions", "messages", "users"}

// chatUser is one row of users.
type chatUser struct {
	ID      int64
	Name    string
	Balance int64
}

// reaction is one row of reactions: a reaction by Sender to message MessageID of user UserID.
type reaction struct {
	ID, UserID, MessageID, Sender int64
	Emoji                         string
}

func reactionSum(r reaction) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|%d|%d|%q", r.ID, r.UserID, r.MessageID, r.Sender, r.Emoji)
	return h.Sum64()
}

// loadBalance is every user's balance when loaded; the application only adds to it.
const loadBalance = 1000

// loadedUser is user id's row as load writes it.
func loadedUser(id int64) chatUser {
	return chatUser{ID: id, Name: fmt.Sprintf("user %d", id), Balance: loadBalance}
}

// reactionEvery: load writes a reaction to every reactionEvery-th message of each user,
// with the message's ID.
const reactionEvery = 4

// loadedReaction is the reaction to message n of user as load writes it, and whether there
// is one.
func loadedReaction(user, n int64, users int) (reaction, bool) {
	id := messageID(user, n)
	return reaction{ID: id, UserID: user, MessageID: id, Sender: 1 + (user*3+n)%int64(users), Emoji: "+1"}, n%reactionEvery == 0
}

// insertRows inserts rows into table's columns cols, in statements of up to 500 parameters.
func insertRows(ctx context.Context, db execer, table string, cols []string, rows [][]any) error {
	per := 500 / len(cols)
	for len(rows) > 0 {
		batch := rows[:min(len(rows), per)]
		rows = rows[len(batch):]
		var q strings.Builder
		fmt.Fprintf(&q, "INSERT INTO %s (%s) VALUES ", table, strings.Join(cols, ", "))
		args := make([]any, 0, len(cols)*len(batch))
		for i, r := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(")
			for j := range cols {
				if j > 0 {
					q.WriteString(", ")
				}
				fmt.Fprintf(&q, "$%d", len(cols)*i+j+1)
			}
			q.WriteString(")")
			args = append(args, r...)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

func userRow(u chatUser) []any     { return []any{u.ID, u.Name, u.Balance} }
func reactionRow(r reaction) []any { return []any{r.ID, r.UserID, r.MessageID, r.Sender, r.Emoji} }
func messageRow(m message) []any   { return []any{m.ID, m.UserID, m.Time, m.Message, m.Sender} }
