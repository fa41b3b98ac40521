package main

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/shardkit/shard"
)

// procsVerification is what the -procs verifier found: every row of the chat tables on every
// shard database compared with the loaded rows (which it regenerates) and the application
// processes' ledgers.
type procsVerification struct {
	rows                       int64 // rows on the shard databases, of the three tables
	users, messages, reactions int64 // of them, in each table
	loaded                     int64 // rows loaded before the processes started
	acked                      int64 // inserts the ledgers acknowledged
	updates                    int64 // updates the ledgers acknowledged (balances included)
	credits                    int64 // of them, additions to a balance
	deletes                    int64 // deletes the ledgers acknowledged
	unacked                    int64 // writes a kill or an error left unacknowledged that committed: allowed
	unackedIns                 int64 // of them, inserts: the row found once
	unackedUpd                 int64 // updates: the row found with the content in flight (a balance: with some additions in flight)
	unackedDel                 int64 // deletes: the row not found (a reaction: nor its message)
	lost                       int64 // loaded or acknowledged rows not found, or loaded ones found with other content
	lostUpdates                int64 // rows found with content other than their last acknowledged one (or the one in flight)
	resurrected                int64 // rows found whose delete (or their message's) was acknowledged
	duplicate                  int64 // rows found a second (third...) time, on one shard or another
	misplaced                  int64 // rows on a shard the final placement does not give their user
	orphans                    int64 // messages without their user on their shard, reactions without their message
	unknown                    int64 // rows nobody wrote: neither loaded nor in any ledger's intents
}

func (v *procsVerification) ok() bool {
	return v.lost == 0 && v.lostUpdates == 0 && v.resurrected == 0 && v.duplicate == 0 && v.misplaced == 0 && v.orphans == 0 && v.unknown == 0
}

// loadedMessage is message n of user as load writes it: the verifier regenerates the loaded
// rows instead of keeping a ledger line for each.
func loadedMessage(user, n int64, users int) message {
	return message{ID: messageID(user, n), UserID: user, Time: loadBase + n*60_000_000_000,
		Message: fmt.Sprintf("message %d of user %d", n, user), Sender: 1 + (user*7+n)%int64(users)}
}

// loadBase is the time of the loaded messages, 2024-11-21 UTC in Unix nanoseconds.
const loadBase = 1732147200_000_000_000

// verifyProcs reads every row of the chat tables on every shard database once, streaming, and
// checks it against the loaded rows (bitmaps say which were seen) and the ledgers of ackDir,
// then counts the broken foreign keys of each shard. layout is the placement in force at the
// end.
func verifyProcs(ctx context.Context, d *dbs, layout shard.Sharder, users, messages int, ackDir string) (*procsVerification, error) {
	l, err := readAckLogs(ackDir)
	if err != nil {
		return nil, err
	}
	reactionsPerUser := messages / reactionEvery
	v := &procsVerification{loaded: int64(users) * int64(1+messages+reactionsPerUser)}
	place := func(i int, user int64) {
		v.rows++
		if layout.Locate(strconv.FormatInt(user, 10)) != i {
			v.misplaced++
		}
	}
	// A row of the ledgers: each copy must show the last acknowledged content, or the write
	// in flight when its writer stopped.
	logged := func(k rowKey, user int64, sum uint64) {
		w := l.rows[k]
		if w == nil || w.user != user {
			v.unknown++
			return
		}
		if w.seen++; w.seen > 1 {
			v.duplicate++
		}
		switch {
		case w.present && sum == w.sum:
		case (w.pending == 'I' || w.pending == 'U') && sum == w.pendSum:
			w.inFlight++
		default:
			w.mismatch++
		}
	}
	balances := map[int64][]int64{}                    // of each user, every copy found
	var seenUsers, seenMessages, seenReactions big.Int // bit user-1, or (user-1)*messages + n-1, of each loaded row found
	loaded := func(seen *big.Int, bit int) {
		if seen.Bit(bit) == 1 {
			v.duplicate++
		}
		seen.SetBit(seen, bit, 1)
	}
	err = d.eachChatRow(ctx, func(i int, u *chatUser, m *message, r *reaction) {
		switch {
		case u != nil:
			v.users++
			place(i, u.ID)
			if u.ID < 1 || u.ID > int64(users) || u.Name != loadedUser(u.ID).Name {
				v.unknown++
				return
			}
			loaded(&seenUsers, int(u.ID-1))
			balances[u.ID] = append(balances[u.ID], u.Balance)
		case m != nil:
			v.messages++
			place(i, m.UserID)
			if m.ID >= messageID(1_000_001, 0) {
				logged(rowKey{'m', m.ID}, m.UserID, checksum(*m))
				return
			}
			user, n := m.ID/1_000_000, m.ID%1_000_000
			if user < 1 || user > int64(users) || n < 1 || n > int64(messages) ||
				checksum(*m) != checksum(loadedMessage(user, n, users)) {
				v.unknown++ // in the loaded range but not what load wrote
				return
			}
			loaded(&seenMessages, int((user-1)*int64(messages)+n-1))
		default:
			v.reactions++
			place(i, r.UserID)
			if r.ID >= messageID(1_000_001, 0) {
				logged(rowKey{'r', r.ID}, r.UserID, reactionSum(*r))
				return
			}
			user, n := r.ID/1_000_000, r.ID%1_000_000
			want, ok := loadedReaction(user, n, users)
			if user < 1 || user > int64(users) || n < 1 || n > int64(messages) || !ok || reactionSum(*r) != reactionSum(want) {
				v.unknown++
				return
			}
			loaded(&seenReactions, int((user-1)*int64(messages)+n-1))
		}
	})
	if err != nil {
		return nil, err
	}
	for user := int64(1); user <= int64(users); user++ {
		if seenUsers.Bit(int(user-1)) == 0 {
			v.lost++
		}
		c := l.balances[user]
		if c == nil {
			c = &credits{}
		}
		for _, b := range balances[user] {
			switch extra := b - loadBalance - c.acked; {
			case extra == 0:
			case someSum(c.pending, extra):
				v.unackedUpd++
			default:
				v.lostUpdates++
			}
		}
	}
	for _, c := range l.balances {
		v.updates += c.n
		v.credits += c.n
	}
	for user := int64(1); user <= int64(users); user++ {
		for n := int64(1); n <= int64(messages); n++ {
			bit := int((user-1)*int64(messages) + n - 1)
			if seenMessages.Bit(bit) == 0 {
				v.lost++
			}
			if _, ok := loadedReaction(user, n, users); ok && seenReactions.Bit(bit) == 0 {
				v.lost++
			}
		}
	}
	for k, w := range l.rows {
		if w.acked {
			v.acked++
		}
		v.updates += int64(w.updates)
		if w.deleted {
			v.deletes++
		}
		// A reaction goes with its message: once that delete was acknowledged, it must be
		// gone; while it was in flight, it may be.
		if k.t == 'r' {
			if m := l.rows[rowKey{'m', w.message}]; m != nil && m.deleted {
				if w.seen > 0 {
					v.resurrected++
				}
				continue
			} else if m != nil && m.pending == 'D' && w.seen == 0 && w.present {
				v.unackedDel++
				continue
			}
		}
		switch {
		case w.seen == 0 && w.present && w.pending == 'D':
			v.unackedDel++ // its delete committed, the ack did not come
		case w.seen == 0 && w.present:
			v.lost++
		case w.mismatch > 0 && w.deleted:
			v.resurrected++
		case w.mismatch > 0 && !w.acked:
			v.unknown++ // never acknowledged, and not what its insert wrote
		case w.mismatch > 0 && w.updates == 0 && w.pending != 'U':
			v.unknown++ // never updated, and not what its insert wrote: that row is lost
			v.lost++
		case w.mismatch > 0:
			v.lostUpdates++
		case w.inFlight > 0 && w.pending == 'I':
			v.unackedIns++
		case w.inFlight > 0:
			v.unackedUpd++
		}
	}
	v.unacked = v.unackedIns + v.unackedUpd + v.unackedDel
	for i, db := range d.shards {
		var n int64
		err := db.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = m.user_id)) +
			(SELECT COUNT(*) FROM reactions r WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = r.message_id AND m.user_id = r.user_id))`).Scan(&n)
		if err != nil {
			return nil, d.shard(i, fmt.Errorf("count the orphans: %w", err))
		}
		v.orphans += n
	}
	return v, nil
}

// someSum reports whether some of amounts (the additions in flight) add up to want. They
// are few: one per writer of each incarnation killed or failed in the middle of one.
func someSum(amounts []int64, want int64) bool {
	if len(amounts) > 20 { // too many to try each subset: accept any total within reach
		var all int64
		for _, a := range amounts {
			all += a
		}
		return want > 0 && want <= all
	}
	for set := 1; set < 1<<len(amounts); set++ {
		var sum int64
		for i, a := range amounts {
			if set&(1<<i) != 0 {
				sum += a
			}
		}
		if sum == want {
			return true
		}
	}
	return false
}

// eachChatRow calls fn with every row of the chat tables of every shard database and the
// shard it is on (one of u, m and r not nil), streaming; errors name the shard.
func (d *dbs) eachChatRow(ctx context.Context, fn func(shard int, u *chatUser, m *message, r *reaction)) error {
	for i, db := range d.shards {
		for _, t := range chatTables {
			rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s", strings.Join(t.Columns, ", "), t.Table))
			if err != nil {
				return d.shard(i, err)
			}
			for rows.Next() {
				var (
					u  chatUser
					m  message
					r  reaction
					ok error
				)
				switch t.Table {
				case "users":
					ok = rows.Scan(&u.ID, &u.Name, &u.Balance)
				case "messages":
					ok = rows.Scan(&m.ID, &m.UserID, &m.Time, &m.Message, &m.Sender)
				default:
					ok = rows.Scan(&r.ID, &r.UserID, &r.MessageID, &r.Sender, &r.Emoji)
				}
				if ok != nil {
					rows.Close()
					return d.shard(i, ok)
				}
				switch t.Table {
				case "users":
					fn(i, &u, nil, nil)
				case "messages":
					fn(i, nil, &m, nil)
				default:
					fn(i, nil, nil, &r)
				}
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return d.shard(i, err)
			}
		}
	}
	return nil
}
