package main

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"sync"
)

// ledger is what the writers have written and had acknowledged, per user: how many messages
// and a checksum of their content. It is kept in memory for the readers and, in the same
// critical section as each write, in the control database, so a run that resumes after a
// crash verifies everything written before it.
//
// A write inserts the message on its shard and then records it here: two databases, two
// commits. A kill between them leaves a message written but not recorded, at most one per
// user since a user's writes follow each other; adoptUnrecorded records it on the next run.
type ledger struct {
	control *sql.DB
	users   map[int64]*account // fixed after load: read without a lock
}

type account struct {
	mu    sync.Mutex // serializes the writes of one user, so message IDs follow each other
	count int64
	sum   uint64
}

// checksum is the content checksum of one message; a user's checksum is the sum of those of
// its messages, so it does not depend on their order.
func checksum(m message) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|%d|%q|%d", m.ID, m.UserID, m.Time, m.Message, m.Sender)
	return h.Sum64()
}

func loadLedger(ctx context.Context, control *sql.DB) (*ledger, error) {
	l := &ledger{control: control, users: map[int64]*account{}}
	rows, err := control.QueryContext(ctx, "SELECT user_id, count, checksum FROM example_ledger")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, count, sum int64
		)
		if err := rows.Scan(&id, &count, &sum); err != nil {
			return nil, err
		}
		l.users[id] = &account{count: count, sum: uint64(sum)}
	}
	return l, rows.Err()
}

// record adds msgs of one user to the ledger; the caller holds the account's mu.
func (l *ledger) record(ctx context.Context, db execer, user int64, a *account, msgs ...message) error {
	count, sum := a.count, a.sum
	for _, m := range msgs {
		count++
		sum += checksum(m)
	}
	_, err := db.ExecContext(ctx,
		`INSERT INTO example_ledger (user_id, count, checksum) VALUES ($1, $2, $3)
		 ON CONFLICT (user_id) DO UPDATE SET count = excluded.count, checksum = excluded.checksum`,
		user, count, int64(sum))
	if err == nil {
		a.count, a.sum = count, sum
	}
	return err
}

// acknowledged returns how many messages of user are acknowledged.
func (l *ledger) acknowledged(user int64) int64 {
	a := l.users[user]
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// adoptUnrecorded records in the ledger the messages that a kill left written on a shard but
// not recorded: for each user, the one numbered count+1, as a client that reconnects finds
// its unacknowledged write committed and keeps it. It returns how many it recorded. Messages
// beyond count+1 are not a kill's doing: they are left for the verification to report.
func (l *ledger) adoptUnrecorded(ctx context.Context, d *dbs) (int, error) {
	adopted := 0
	for i, db := range d.shards {
		var found []message
		err := func() error {
			rows, err := db.QueryContext(ctx, "SELECT user_id, MAX(id) FROM messages GROUP BY user_id")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var user, last int64
				if err := rows.Scan(&user, &last); err != nil {
					return err
				}
				if a := l.users[user]; a != nil && last == messageID(user, a.count+1) {
					found = append(found, message{ID: last, UserID: user})
				}
			}
			return rows.Err()
		}()
		if err != nil {
			return adopted, d.shard(i, err)
		}
		for _, f := range found {
			a := l.users[f.UserID]
			if f.ID != messageID(f.UserID, a.count+1) {
				continue // adopted from another shard already (an old copy holds it too)
			}
			m := f
			err := db.QueryRowContext(ctx, "SELECT time, message, sender FROM messages WHERE id = $1", f.ID).
				Scan(&m.Time, &m.Message, &m.Sender)
			if err != nil {
				return adopted, d.shard(i, err)
			}
			if err := l.record(ctx, l.control, m.UserID, a, m); err != nil {
				return adopted, err
			}
			adopted++
		}
	}
	return adopted, nil
}

// messageID gives the n-th message of user an ID no other message has.
func messageID(user, n int64) int64 { return user*1_000_000 + n }
