package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"

	_ "modernc.org/sqlite"
)

// Grow from 2 SQLite shards to 3 while the application writes, with nothing lost: the
// README's third task. Every access goes through Do, Run moves the users that change shard,
// and Finish records the end.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Three SQLite files, one per shard, each with the tables; shard 0 also keeps the marks.
	var shards []*sql.DB
	for i := range 3 {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, fmt.Sprintf("shard%d.db", i))+
			"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		db.SetMaxIdleConns(4)
		for _, stmt := range []string{
			"CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT NOT NULL)",
			"CREATE TABLE messages (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, body TEXT NOT NULL)",
			"CREATE INDEX messages_user_id_id ON messages (user_id, id)",
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				log.Fatal(err)
			}
		}
		shards = append(shards, db)
	}

	// A user's rows move together, the tables parents first: the user, then its messages.
	store, err := sqlstore.New(sqlstore.SQLite, shards, shards[0], []sqlstore.TableSpec{
		{Table: "users", Owner: "id", Key: "id", IntOwner: true, Columns: []string{"id", "name"}},
		{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "body"}},
	}, sqlstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Init(ctx); err != nil { // fences and change capture on every shard
		log.Fatal(err)
	}
	before, _ := shard.NewJump(2)
	after, _ := shard.NewJump(3)
	m, err := rebalance.NewShared("grow-2-to-3", before, after, store, rebalance.SharedOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var users []string
	for u := range 30 {
		users = append(users, strconv.Itoa(u))
	}

	// The application: every read and write of a user goes through Do, which runs it on the
	// shard that serves the user now, before, during and after the move.
	post := func(user string, id int) error {
		return m.Do(ctx, user, func(tx *sql.Tx, _ int) error {
			uid, _ := strconv.Atoi(user)
			if _, err := tx.ExecContext(ctx, "INSERT INTO users (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
				uid, "user "+user); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO messages (id, user_id, body) VALUES ($1, $2, $3)", id, uid, "hello")
			return err
		})
	}
	for i, user := range users {
		for k := range 10 {
			if err := post(user, 100*i+k); err != nil {
				log.Fatal(err)
			}
		}
	}

	// The mover: Run moves every user whose shard changes while the application keeps
	// writing (run it again after a crash), then Finish checks every user is moved.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, user := range users {
			if err := post(user, 100*i+10); err != nil {
				log.Fatal(err)
			}
		}
	})
	if err := m.Run(ctx, slices.Values(users)); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	if err := m.Finish(ctx, slices.Values(users)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("users moved:", m.Stats().Moved)

	// Every user and every message is on the user's new shard, once.
	total, people := 0, 0
	for i, db := range shards {
		var ids []int
		rows, err := db.QueryContext(ctx, "SELECT id FROM users")
		if err != nil {
			log.Fatal(err)
		}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				log.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			log.Fatal(err)
		}
		for _, id := range ids {
			if after.Locate(strconv.Itoa(id)) != i {
				fmt.Printf("user %d on shard %d\n", id, i)
			}
		}
		people += len(ids)
		rows, err = db.QueryContext(ctx, "SELECT user_id, COUNT(*) FROM messages GROUP BY user_id")
		if err != nil {
			log.Fatal(err)
		}
		for rows.Next() {
			var user, n int
			if err := rows.Scan(&user, &n); err != nil {
				log.Fatal(err)
			}
			if after.Locate(strconv.Itoa(user)) != i || n != 11 {
				fmt.Printf("user %d: %d messages on shard %d\n", user, n, i)
			}
			total += n
		}
		if err := rows.Close(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("users:", people, "messages:", total)
	// Output:
	// users moved: 11
	// users: 30 messages: 330
}
