package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// TestKeysRepeatedAcrossShards: each shard numbers its rows by a sequence of its own, so a
// moving user's message 1 and a staying user's message 1 on the new shard share a key. No
// way of writing the moving user's rows there may replace the staying user's: the chunks
// (by the fast paths and through Go), the replay of a row written during the move, and
// Store.Copy all stop with ErrKeyTaken, the old shard serving the moving user, every row of
// both users kept.
func TestKeysRepeatedAcrossShards(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plain bool // rows through Go, not the fast paths
		late  bool // the shared key is written during the move, and replayed
		copy  bool // Store.Copy, not a migration
	}{
		{name: "chunks"},
		{name: "chunks through Go", plain: true},
		{name: "replay", late: true},
		{name: "Copy", copy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, 3, func(t *testing.T, e *engine) {
				if tc.plain {
					t.Setenv("SQLSTORE_PLAIN_COPIES", "1")
				}
				ctx := context.Background()
				admin := e.open(t, 2)
				w := newWorld(t, e, 3, 2) // the users of shard 2 move to shards 0 and 1
				var a, b int
				for u := 1; b == 0; u++ {
					s := strconv.Itoa(u)
					switch {
					case a == 0 && w.before.Locate(s) == 2:
						a = u
					case a != 0 && w.before.Locate(s) == w.after.Locate(strconv.Itoa(a)) && w.after.Locate(s) == w.before.Locate(s):
						b = u
					}
				}
				ua, ub := strconv.Itoa(a), strconv.Itoa(b)
				from, to := w.before.Locate(ua), w.after.Locate(ua)
				w.users = []string{ua, ub}
				insert := func(shard, user, id int) {
					t.Helper()
					if _, err := admin.dbs[shard].Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)",
						id, user, id, "from user "+strconv.Itoa(user), 7); err != nil {
						t.Fatal(err)
					}
				}
				first := 1 // of b's keys: a's are 1 to 20
				if tc.late {
					first = 101
				}
				for i := range 20 {
					insert(from, a, 1+i)
					insert(to, b, first+i)
				}
				var err error
				switch {
				case tc.copy:
					err = admin.store.Copy(ctx, ua, from, to)
				case tc.late:
					err = moveWithLateWrite(t, e, w, ua, "INSERT INTO messages (id, user_id, time, message, sender) VALUES (21, CAST(CAST($1 AS TEXT) AS BIGINT), 21, 'from user ' || CAST($1 AS TEXT), 7)", func() {
						insert(to, b, 21)
					})
				default:
					err = w.shared(t, e.open(t, 2), "shrink", rebalance.SharedOptions{}).Run(ctx, slices.Values(w.users))
				}
				if !errors.Is(err, sqlstore.ErrKeyTaken) {
					t.Fatalf("got %v, want ErrKeyTaken", err)
				}
				if f, _ := admin.store.Fences(ctx, []string{ua}, from); f[0].State == rebalance.Moved {
					t.Errorf("old shard says %v, want serving", f[0])
				}
				want := map[bool]int{false: 20, true: 21}[tc.late]
				for _, c := range []struct{ shard, user int }{{to, b}, {from, a}} {
					var n int
					if err := admin.dbs[c.shard].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1 AND message = $2",
						c.user, "from user "+strconv.Itoa(c.user)).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n != want {
						t.Errorf("user %d has %d of %d rows on shard %d", c.user, n, want, c.shard)
					}
				}
			})
		})
	}
}

// TestRowGivenToAnotherMovingUser: during the copy the application gives one of user A's
// rows to user C, both moving to the same new shard. The replay writes the row as C's over
// its copy as A's there, which the guard of TestKeysRepeatedAcrossShards allows because A is
// not served there yet: the move succeeds with the row once, C's, on the new shard.
func TestRowGivenToAnotherMovingUser(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		users := w.moving(1, 2)
		w.load(t, admin, users, 20)
		ua, uc := w.users[0], w.users[1]
		var given int64
		if err := admin.dbs[0].QueryRow("SELECT MIN(id) FROM messages WHERE user_id = $1", users[0]).Scan(&given); err != nil {
			t.Fatal(err)
		}
		give := "UPDATE messages SET user_id = " + uc + " WHERE id = " + strconv.FormatInt(given, 10) + " AND user_id = CAST(CAST($1 AS TEXT) AS BIGINT)"
		if err := moveWithLateWrite(t, e, w, ua, give, nil); err != nil {
			t.Fatal(err)
		}
		for s, db := range admin.dbs {
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM messages WHERE id = $1 AND user_id = $2", given, users[1]).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1}[s == 1]; n != want {
				t.Errorf("shard %d holds %d copies of the row given to user %s, want %d", s, n, uc, want)
			}
		}
	})
}
