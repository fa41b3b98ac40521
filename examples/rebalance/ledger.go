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
type ledger struct {
	control *sql.DB
	// pause is held shared by every write, from the insert to the ledger update, and
	// exclusively by a simulated crash, which so never falls between the two.
	pause sync.RWMutex
	users map[int64]*account // fixed after load: read without a lock
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

// messageID gives the n-th message of user an ID no other message has.
func messageID(user, n int64) int64 { return user*1_000_000 + n }
