package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// router runs fn in one transaction on the shard that serves owner now, as the placement
// record says (placement.go), and reports the class of the access for the latency figures.
// An error wrapping rebalance.ErrFenced means fn did not commit: the shard does not serve the
// owner (any more, or yet) and the caller may retry.
type router interface {
	do(ctx context.Context, owner string, fn func(tx *sql.Tx, shard int) error) (class int, err error)
}

// appWorkload is one application process of -procs mode, over the chat tables: writers add
// messages to random users, add amounts to random users' balances, react to messages they
// added themselves, and update, delete and read back the messages and reactions they added
// themselves; readers count a random user's messages and read their balance; all through the
// router. A reader that sees fewer messages than those loaded, plus the inserts this process
// had acknowledged for the user before the read, minus the deletes it had begun by the read's
// end, or a balance below the loaded one plus the additions this process had acknowledged,
// has caught a lost write; a writer that reads back one of its rows with other content than
// it acknowledged, or finds it gone, a lost update or a lost row.
type appWorkload struct {
	proc     int
	users    int
	pause    time.Duration // between two accesses of one writer or reader
	messages int           // loaded per user
	route    router
	log      *ackLog

	mu       sync.Mutex
	mine     map[int64]int64 // inserts of each user's messages this process acknowledged
	gone     map[int64]int64 // deletes of each user's messages this process began
	credited map[int64]int64 // the additions to each user's balance this process acknowledged
	lat      latencies
	fails    atomic.Int64 // writes and reads that failed with an error other than ErrFenced

	writes, updates, deletes, reads, anomalies, retries atomic.Int64
}

func newAppWorkload(proc, users, messages int, pause time.Duration, route router, log *ackLog) *appWorkload {
	return &appWorkload{proc: proc, users: users, pause: pause, messages: messages, route: route, log: log,
		mine: map[int64]int64{}, gone: map[int64]int64{}, credited: map[int64]int64{}}
}

// writer is one writer goroutine of an application process, with the messages and reactions
// it inserted in this incarnation and has not deleted: only it updates or deletes them, one
// write at a time, so its ledger lines give each one's final content. A row whose write went
// unacknowledged (an error) is dropped: it is never written again.
type writer struct {
	clock     *idClock
	r         *rand.Rand
	messages  pool[message]
	reactions pool[reaction]
}

// pool is a writer's rows of one table, by ID, with their acknowledged content.
type pool[T any] struct {
	ids []int64 // in no order
	own map[int64]*owned[T]
}

type owned[T any] struct {
	row     T
	version int // updates acknowledged
	at      int // index in ids
}

func (p *pool[T]) add(id int64, row T) {
	if p.own == nil {
		p.own = map[int64]*owned[T]{}
	}
	p.own[id] = &owned[T]{row: row, at: len(p.ids)}
	p.ids = append(p.ids, id)
}

func (p *pool[T]) drop(id int64) {
	o := p.own[id]
	if o == nil {
		return
	}
	last := p.ids[len(p.ids)-1]
	p.ids[o.at] = last
	p.own[last].at = o.at
	p.ids = p.ids[:len(p.ids)-1]
	delete(p.own, id)
}

// pick returns one of the rows at random.
func (p *pool[T]) pick(r *rand.Rand) (int64, *owned[T]) {
	id := p.ids[r.IntN(len(p.ids))]
	return id, p.own[id]
}

// The writers' mix, in percent: message inserts, reactions, balance additions, message
// updates, reaction updates, message deletes (their reactions go with them), reaction
// deletes, and the rest read back one of the writer's rows. A writer with no message
// inserts one; one with no reaction reacts instead of touching a reaction.
const (
	insertPct         = 35
	reactPct          = 10
	creditPct         = 15
	updatePct         = 15
	reactionUpdatePct = 5
	deletePct         = 7
	reactionDeletePct = 5
)

// errNoRow ends a transaction whose update or delete found no row: nothing changed, and
// the message this writer had acknowledged is gone.
var errNoRow = errors.New("no such row")

// maxFencedRetries bounds the retries of one access that keeps meeting a fence: a mover
// killed in the middle of a move leaves its owner importing until its successor, elected
// once the dead one's lease expires, resumes the move.
const maxFencedRetries = 600

// defaultAppPause is the default pause of each writer and reader between two accesses
// (-app-pause): the application processes load the databases the way a service would, not
// flat out. On a 2-core machine the default (about 1,100 accesses a second from 3
// processes) already takes most of the CPU, so the mover moves what the rest allows; a
// longer pause leaves it more.
const defaultAppPause = 2 * time.Millisecond

func (a *appWorkload) run(ctx context.Context, writers, readers int) {
	var wg sync.WaitGroup
	for w := range writers {
		wr := &writer{clock: &idClock{slot: int64(a.proc*16 + w)},
			r: rand.New(rand.NewPCG(uint64(a.proc), uint64(time.Now().UnixNano())+uint64(w)))}
		wg.Go(func() {
			for ctx.Err() == nil {
				a.step(wr)
				time.Sleep(a.pause) // an application, not a benchmark
			}
		})
	}
	for i := range readers {
		r := rand.New(rand.NewPCG(uint64(a.proc)+1000, uint64(time.Now().UnixNano())+uint64(i)))
		wg.Go(func() {
			for ctx.Err() == nil {
				a.read(1 + r.Int64N(int64(a.users)))
				time.Sleep(a.pause)
			}
		})
	}
	wg.Wait()
}

// step runs one write or read back of writer w, by the mix above.
func (a *appWorkload) step(w *writer) {
	p := w.r.IntN(100)
	if len(w.messages.ids) == 0 {
		p = 0
	}
	if len(w.reactions.ids) == 0 && p >= insertPct+reactPct+creditPct+updatePct {
		p = insertPct // react instead
	}
	switch {
	case p < insertPct:
		a.write(w, 1+w.r.Int64N(int64(a.users)))
	case p < insertPct+reactPct:
		a.react(w)
	case p < insertPct+reactPct+creditPct:
		a.credit(1+w.r.Int64N(int64(a.users)), 1+w.r.Int64N(1000))
	case p < insertPct+reactPct+creditPct+updatePct:
		a.update(w)
	case p < insertPct+reactPct+creditPct+updatePct+reactionUpdatePct:
		a.updateReaction(w)
	case p < insertPct+reactPct+creditPct+updatePct+reactionUpdatePct+deletePct:
		a.delete(w)
	case p < insertPct+reactPct+creditPct+updatePct+reactionUpdatePct+deletePct+reactionDeletePct:
		a.deleteReaction(w)
	default:
		a.readBack(w)
	}
}

// access runs fn through the router, retrying while the owner is fenced, and records the
// latency of the attempt that succeeded; it never takes a context that a stop cancels, so a
// stop cannot cut a write between its commit and its ack.
func (a *appWorkload) access(owner string, h *[classes]histogram, fn func(tx *sql.Tx, shard int) error) error {
	for try := 0; ; try++ {
		start := time.Now()
		class, err := a.route.do(context.Background(), owner, fn)
		if err == nil {
			h[class].record(time.Since(start))
			return nil
		}
		if !errors.Is(err, errRetry) || try == maxFencedRetries {
			return err
		}
		a.retries.Add(1)
		time.Sleep(10 * time.Millisecond)
	}
}

func (a *appWorkload) write(w *writer, user int64) {
	msg := message{ID: w.clock.next(), UserID: user, Time: time.Now().UnixNano(),
		Message: fmt.Sprintf("message from process %d to user %d", a.proc, user), Sender: 1 + w.r.Int64N(int64(a.users))}
	if err := a.log.intend(msg); err != nil {
		a.fail(err)
		return
	}
	err := a.access(strconv.FormatInt(user, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		_, err := tx.Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)",
			msg.ID, msg.UserID, msg.Time, msg.Message, msg.Sender)
		return err
	})
	if err != nil { // maybe committed, maybe not: the intent without an ack allows either
		a.fail(fmt.Errorf("write message %d of user %d: %w", msg.ID, user, err))
		return
	}
	if err := a.log.ack('m', msg.ID); err != nil {
		a.fail(err)
		return
	}
	w.messages.add(msg.ID, msg)
	a.mu.Lock()
	a.mine[user]++
	a.mu.Unlock()
	a.writes.Add(1)
}

// react adds a reaction to one of w's messages: a row of the message's user.
func (a *appWorkload) react(w *writer) {
	_, o := w.messages.pick(w.r)
	m := o.row
	r := reaction{ID: w.clock.next(), UserID: m.UserID, MessageID: m.ID, Sender: 1 + w.r.Int64N(int64(a.users)), Emoji: "like"}
	if err := a.log.intendReaction(r); err != nil {
		a.fail(err)
		return
	}
	err := a.access(strconv.FormatInt(r.UserID, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		_, err := tx.Exec("INSERT INTO reactions (id, user_id, message_id, sender, emoji) VALUES ($1, $2, $3, $4, $5)",
			r.ID, r.UserID, r.MessageID, r.Sender, r.Emoji)
		return err
	})
	if err != nil {
		a.fail(fmt.Errorf("react to message %d of user %d: %w", m.ID, m.UserID, err))
		return
	}
	if err := a.log.ack('r', r.ID); err != nil {
		a.fail(err)
		return
	}
	w.reactions.add(r.ID, r)
	a.writes.Add(1)
}

// credit adds amount to user's balance, in SQL: a lost addition leaves the balance short
// whatever comes after it.
func (a *appWorkload) credit(user, amount int64) {
	if err := a.log.intendCredit(user, amount); err != nil {
		a.fail(err)
		return
	}
	err := a.access(strconv.FormatInt(user, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("UPDATE users SET balance = balance + $1 WHERE id = $2", amount, user)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("credit", fmt.Sprintf("the balance of user %d", user), err)
		return
	}
	if err := a.log.ackCredit(user, amount); err != nil {
		a.fail(err)
		return
	}
	a.mu.Lock()
	a.credited[user] += amount
	a.mu.Unlock()
	a.writes.Add(1)
	a.updates.Add(1)
}

// update sets a new text on one of w's messages and increments its sender column in SQL: a
// lost earlier update leaves the counter behind even when a later one lands.
func (a *appWorkload) update(w *writer) {
	id, o := w.messages.pick(w.r)
	next := o.row
	next.Message = fmt.Sprintf("message from process %d to user %d, version %d", a.proc, next.UserID, o.version+1)
	next.Sender++
	if err := a.log.intendUpdate(next); err != nil {
		a.fail(err)
		a.dropMessage(w, id)
		return
	}
	err := a.access(strconv.FormatInt(next.UserID, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("UPDATE messages SET message = $1, sender = sender + 1 WHERE id = $2 AND user_id = $3",
			next.Message, next.ID, next.UserID)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("update", fmt.Sprintf("message %d of user %d", id, next.UserID), err)
		a.dropMessage(w, id)
		return
	}
	if err := a.log.ack('m', id); err != nil {
		a.fail(err)
		a.dropMessage(w, id)
		return
	}
	o.row, o.version = next, o.version+1
	a.writes.Add(1)
	a.updates.Add(1)
}

// updateReaction changes one of w's reactions and increments its sender column in SQL.
func (a *appWorkload) updateReaction(w *writer) {
	id, o := w.reactions.pick(w.r)
	next := o.row
	next.Emoji = fmt.Sprintf("like, version %d", o.version+1)
	next.Sender++
	if err := a.log.intendReactionUpdate(next); err != nil {
		a.fail(err)
		w.reactions.drop(id)
		return
	}
	err := a.access(strconv.FormatInt(next.UserID, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("UPDATE reactions SET emoji = $1, sender = sender + 1 WHERE id = $2 AND user_id = $3",
			next.Emoji, next.ID, next.UserID)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("update", fmt.Sprintf("reaction %d of user %d", id, next.UserID), err)
		w.reactions.drop(id)
		return
	}
	if err := a.log.ack('r', id); err != nil {
		a.fail(err)
		w.reactions.drop(id)
		return
	}
	o.row, o.version = next, o.version+1
	a.writes.Add(1)
	a.updates.Add(1)
}

// dropMessage forgets message id and the reactions to it: w never writes them again.
func (a *appWorkload) dropMessage(w *writer, id int64) {
	w.messages.drop(id)
	for _, r := range slices.Clone(w.reactions.ids) {
		if w.reactions.own[r].row.MessageID == id {
			w.reactions.drop(r)
		}
	}
}

// delete deletes one of w's messages, and so the reactions to it (ON DELETE CASCADE). It
// counts in gone before: a reader's lower bound must not count a message that may be gone.
func (a *appWorkload) delete(w *writer) {
	id, o := w.messages.pick(w.r)
	user := o.row.UserID
	a.dropMessage(w, id)
	a.mu.Lock()
	a.gone[user]++
	a.mu.Unlock()
	if err := a.log.intendDelete('m', id); err != nil {
		a.fail(err)
		return
	}
	err := a.access(strconv.FormatInt(user, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("DELETE FROM messages WHERE id = $1 AND user_id = $2", id, user)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("delete", fmt.Sprintf("message %d of user %d", id, user), err)
		return
	}
	if err := a.log.ack('m', id); err != nil {
		a.fail(err)
		return
	}
	a.writes.Add(1)
	a.deletes.Add(1)
}

// deleteReaction deletes one of w's reactions.
func (a *appWorkload) deleteReaction(w *writer) {
	id, o := w.reactions.pick(w.r)
	user := o.row.UserID
	w.reactions.drop(id)
	if err := a.log.intendDelete('r', id); err != nil {
		a.fail(err)
		return
	}
	err := a.access(strconv.FormatInt(user, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("DELETE FROM reactions WHERE id = $1 AND user_id = $2", id, user)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("delete", fmt.Sprintf("reaction %d of user %d", id, user), err)
		return
	}
	if err := a.log.ack('r', id); err != nil {
		a.fail(err)
		return
	}
	a.writes.Add(1)
	a.deletes.Add(1)
}

// readBack reads one of w's messages or reactions on its user's shard: it must hold the
// content this writer acknowledged last.
func (a *appWorkload) readBack(w *writer) {
	if len(w.reactions.ids) > 0 && w.r.IntN(3) == 0 {
		id, o := w.reactions.pick(w.r)
		got := reaction{ID: id, UserID: o.row.UserID}
		found := true
		err := a.access(strconv.FormatInt(got.UserID, 10), &a.lat.reads, func(tx *sql.Tx, _ int) error {
			err := tx.QueryRow("SELECT message_id, sender, emoji FROM reactions WHERE id = $1 AND user_id = $2", id, got.UserID).
				Scan(&got.MessageID, &got.Sender, &got.Emoji)
			if errors.Is(err, sql.ErrNoRows) {
				found, err = false, nil
			}
			return err
		})
		if err != nil {
			a.fail(fmt.Errorf("read back reaction %d of user %d: %w", id, got.UserID, err))
			return
		}
		a.reads.Add(1)
		if !found || got != o.row {
			a.anomalies.Add(1)
			fmt.Fprintf(os.Stderr, "ANOMALY: reaction %d of user %d read back as %+v (found %v), this process acknowledged %+v\n", id, got.UserID, got, found, o.row)
			w.reactions.drop(id) // reported once
		}
		return
	}
	id, o := w.messages.pick(w.r)
	got := message{ID: id, UserID: o.row.UserID, Time: o.row.Time}
	found := true
	err := a.access(strconv.FormatInt(got.UserID, 10), &a.lat.reads, func(tx *sql.Tx, _ int) error {
		err := tx.QueryRow("SELECT message, sender FROM messages WHERE id = $1 AND user_id = $2", id, got.UserID).Scan(&got.Message, &got.Sender)
		if errors.Is(err, sql.ErrNoRows) {
			found, err = false, nil
		}
		return err
	})
	if err != nil {
		a.fail(fmt.Errorf("read back message %d of user %d: %w", id, got.UserID, err))
		return
	}
	a.reads.Add(1)
	if !found || got != o.row {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: message %d of user %d read back as %+v (found %v), this process acknowledged %+v\n", id, got.UserID, got, found, o.row)
		a.dropMessage(w, id) // reported once
	}
}

// affectedOne turns an update or delete that changed no row into errNoRow.
func affectedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		err = fmt.Errorf("%w: %d rows affected", errNoRow, n)
	}
	return err
}

// failWrite reports an update or delete that failed: maybe committed, maybe not (the intent
// without an ack allows either), or, when it found no row, the acknowledged row lost.
func (a *appWorkload) failWrite(what, row string, err error) {
	if errors.Is(err, errNoRow) {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: %s of %s, which this process acknowledged: %v\n", what, row, err)
		return
	}
	a.fail(fmt.Errorf("%s %s: %w", what, row, err))
}

func (a *appWorkload) read(user int64) {
	a.mu.Lock()
	inserted, credited := a.mine[user], a.credited[user]
	a.mu.Unlock()
	var n int64
	var balance sql.NullInt64
	err := a.access(strconv.FormatInt(user, 10), &a.lat.reads, func(tx *sql.Tx, _ int) error {
		return tx.QueryRow("SELECT (SELECT COUNT(*) FROM messages WHERE user_id = $1), (SELECT balance FROM users WHERE id = $1)", user).Scan(&n, &balance)
	})
	if err != nil {
		a.fail(fmt.Errorf("read user %d: %w", user, err))
		return
	}
	// Any delete that committed before the read's snapshot was begun before now.
	a.mu.Lock()
	deleted := a.gone[user]
	a.mu.Unlock()
	a.reads.Add(1)
	if want := int64(a.messages) + inserted - deleted; n < want {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: user %d has %d messages, fewer than the %d loaded + %d inserts this process acknowledged before the read - %d deletes it began by its end\n",
			user, n, a.messages, inserted, deleted)
	}
	if want := loadBalance + credited; !balance.Valid || balance.Int64 < want {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: user %d has balance %v (found %v), less than the %d loaded + %d this process added before the read\n",
			user, balance.Int64, balance.Valid, loadBalance, credited)
	}
}

// fail reports an error and goes on: the run fails at the end if any happened, and the
// others' writes keep the chaos going meanwhile.
func (a *appWorkload) fail(err error) {
	if a.fails.Add(1) <= 20 {
		fmt.Fprintln(os.Stderr, "ERROR:", err)
	}
}

// stats is this process's STATS line, which it keeps in its figures file (writeStats) and the
// parent parses (readStats).
func (a *appWorkload) stats() string {
	s := fmt.Sprintf("STATS role=app writes=%d updates=%d deletes=%d reads=%d anomalies=%d errors=%d retries=%d hwm=%d",
		a.writes.Load(), a.updates.Load(), a.deletes.Load(), a.reads.Load(), a.anomalies.Load(), a.fails.Load(), a.retries.Load(), vmHWM(os.Getpid()))
	for c := range classes {
		s += fmt.Sprintf(" r%d=%s w%d=%s", c, orDash(a.lat.reads[c].encode()), c, orDash(a.lat.writes[c].encode()))
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// untilClosed returns a context that is cancelled when r (the parent's pipe on stdin)
// reaches its end: the parent asked this process to stop, or died.
func untilClosed(r io.Reader) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, r)
		cancel()
	}()
	return ctx
}

// errRetry marks the router's errors after which an access may be retried: fn did not
// commit (the shard does not serve the owner now, or the placement changed under it).
var errRetry = errors.New("retry")
