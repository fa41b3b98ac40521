package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/shardkit/shard"
)

// verification is what the verifier found on every shard database.
type verification struct {
	perShard   []int // messages on each shard database
	users      int   // users whose count and checksum match the ledger
	wrong      []string
	twoShards  int // users with messages on more than one shard
	misplaced  int // messages on a shard that does not own their user
	unexpected int // messages of users the ledger does not know
}

func (v *verification) ok() bool {
	return len(v.wrong) == 0 && v.twoShards == 0 && v.misplaced == 0 && v.unexpected == 0
}

// verify reads every message of every shard database, including those the layout does not
// use (a message left there is misplaced), and compares each user with the ledger. It draws
// its progress, in messages read of those the ledger holds, on bar.
func verify(ctx context.Context, d *dbs, layout shard.Sharder, l *ledger, bar *progress) (*verification, error) {
	type seen struct {
		count  int64
		sum    uint64
		shards []int
	}
	found := map[int64]*seen{}
	v := &verification{perShard: make([]int, len(d.shards))}
	read, written := 0, 0
	for _, a := range l.users {
		written += int(a.count)
	}
	err := d.eachMessage(ctx, func(i int, m message) {
		read++
		bar.show(read, written)
		v.perShard[i]++
		s := found[m.UserID]
		if s == nil {
			s = &seen{}
			found[m.UserID] = s
		}
		s.count++
		s.sum += checksum(m)
		if !slices.Contains(s.shards, i) {
			s.shards = append(s.shards, i)
		}
		if layout.Locate(fmt.Sprint(m.UserID)) != i {
			v.misplaced++
		}
	})
	if err != nil {
		return nil, err
	}
	bar.end(read, written)
	for user, s := range found {
		if len(s.shards) > 1 {
			v.twoShards++
		}
		if l.users[user] == nil {
			v.unexpected += int(s.count)
		}
	}
	for user, a := range l.users {
		s := found[user]
		if s == nil {
			s = &seen{}
		}
		if s.count == a.count && s.sum == a.sum {
			v.users++
		} else if len(v.wrong) < 10 {
			v.wrong = append(v.wrong, fmt.Sprintf("user %d: %d messages with checksum %016x, wrote %d with checksum %016x",
				user, s.count, s.sum, a.count, a.sum))
		}
	}
	return v, nil
}

func (v *verification) print(w io.Writer, users int) {
	total := 0
	for _, n := range v.perShard {
		total += n
	}
	fmt.Fprintf(w, "verify: %d messages, per shard database %v\n", total, v.perShard)
	fmt.Fprintf(w, "  users whose message count and checksum equal what was written: %d of %d\n", v.users, users)
	for _, s := range v.wrong {
		fmt.Fprintf(w, "  WRONG %s\n", s)
	}
	fmt.Fprintf(w, "  users with messages on two shards: %d\n", v.twoShards)
	fmt.Fprintf(w, "  messages on a shard that does not own their user: %d\n", v.misplaced)
	fmt.Fprintf(w, "  messages of unknown users: %d\n", v.unexpected)
	if v.ok() {
		fmt.Fprintln(w, "  OK")
	} else {
		fmt.Fprintln(w, "  FAILED")
	}
}

// eachMessage calls fn with every message of every shard database and the shard it is on,
// streaming; errors name the shard.
func (d *dbs) eachMessage(ctx context.Context, fn func(shard int, m message)) error {
	for i, db := range d.shards {
		rows, err := db.QueryContext(ctx, "SELECT id, user_id, time, message, sender FROM messages")
		if err != nil {
			return d.shard(i, err)
		}
		for rows.Next() {
			var m message
			if err := rows.Scan(&m.ID, &m.UserID, &m.Time, &m.Message, &m.Sender); err != nil {
				rows.Close()
				return d.shard(i, err)
			}
			fn(i, m)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return d.shard(i, err)
		}
	}
	return nil
}
