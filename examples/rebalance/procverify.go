package main

import (
	"context"
	"fmt"
	"math/big"

	"github.com/shardkit/shard"
)

// procsVerification is what the -procs verifier found: every row of every shard database
// compared with the loaded messages (which it regenerates) and the application processes'
// ledgers.
type procsVerification struct {
	rows        int64 // rows on the shard databases
	loaded      int64 // messages loaded before the processes started
	acked       int64 // inserts the ledgers acknowledged
	updates     int64 // updates the ledgers acknowledged
	deletes     int64 // deletes the ledgers acknowledged
	unacked     int64 // writes a kill or an error left unacknowledged that committed: allowed
	unackedIns  int64 // of them, inserts: the message found once
	unackedUpd  int64 // updates: the message found with the content in flight
	unackedDel  int64 // deletes: the message not found
	lost        int64 // loaded or acknowledged messages not found, or loaded ones found with other content
	lostUpdates int64 // messages found with content other than their last acknowledged one (or the one in flight)
	resurrected int64 // messages found whose delete was acknowledged
	duplicate   int64 // rows found a second (third...) time, on one shard or another
	misplaced   int64 // rows on a shard the final placement does not give their user
	unknown     int64 // rows nobody wrote: neither loaded nor in any ledger's intents
}

func (v *procsVerification) ok() bool {
	return v.lost == 0 && v.lostUpdates == 0 && v.resurrected == 0 && v.duplicate == 0 && v.misplaced == 0 && v.unknown == 0
}

// loadedMessage is message n of user as load writes it: the verifier regenerates the loaded
// rows instead of keeping a ledger line for each.
func loadedMessage(user, n int64, users int) message {
	return message{ID: messageID(user, n), UserID: user, Time: loadBase + n*60_000_000_000,
		Message: fmt.Sprintf("message %d of user %d", n, user), Sender: 1 + (user*7+n)%int64(users)}
}

// loadBase is the time of the loaded messages, 2024-11-21 UTC in Unix nanoseconds.
const loadBase = 1732147200_000_000_000

// verifyProcs reads every row of every shard database once, streaming, and checks it against
// the loaded messages (a bitmap of users*messages bits says which were seen) and the ledgers
// of ackDir. layout is the placement in force at the end.
func verifyProcs(ctx context.Context, d *dbs, layout shard.Sharder, users, messages int, ackDir string) (*procsVerification, error) {
	ledgers, err := readAckLogs(ackDir)
	if err != nil {
		return nil, err
	}
	v := &procsVerification{loaded: int64(users) * int64(messages)}
	var seen big.Int // bit (user-1)*messages + n-1 of each loaded row found
	err = d.eachMessage(ctx, func(i int, m message) {
		v.rows++
		if layout.Locate(fmt.Sprint(m.UserID)) != i {
			v.misplaced++
		}
		if m.ID < messageID(1_000_001, 0) { // a loaded message's ID
			user, n := m.ID/1_000_000, m.ID%1_000_000
			if user < 1 || user > int64(users) || n < 1 || n > int64(messages) ||
				checksum(m) != checksum(loadedMessage(user, n, users)) {
				v.unknown++ // in the loaded range but not what load wrote
				return
			}
			bit := int((user-1)*int64(messages) + n - 1)
			if seen.Bit(bit) == 1 {
				v.duplicate++
			}
			seen.SetBit(&seen, bit, 1)
			return
		}
		w := ledgers[m.ID]
		if w == nil || w.user != m.UserID {
			v.unknown++
			return
		}
		if w.seen++; w.seen > 1 {
			v.duplicate++
		}
		// Each copy must show the last acknowledged content, or the write in flight when
		// its writer stopped.
		switch sum := checksum(m); {
		case w.present && sum == w.sum:
		case (w.pending == 'I' || w.pending == 'U') && sum == w.pendSum:
			w.inFlight++
		default:
			w.mismatch++
		}
	})
	if err != nil {
		return nil, err
	}
	for i := range users * messages {
		if seen.Bit(i) == 0 {
			v.lost++
		}
	}
	for _, w := range ledgers {
		if w.acked {
			v.acked++
		}
		v.updates += int64(w.updates)
		if w.deleted {
			v.deletes++
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
			v.unknown++ // never updated, and not what its insert wrote: that message is lost
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
	return v, nil
}
