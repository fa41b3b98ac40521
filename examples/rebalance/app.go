package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
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

// appWorkload is one application process of -procs mode: writers add messages to random
// users, and update, delete and read back messages they added themselves; readers count a
// random user's messages; all through the router. A reader that sees fewer messages than
// those loaded, plus the inserts this process had acknowledged for the user before the read,
// minus the deletes it had begun by the read's end, has caught a lost write; a writer that
// reads back one of its messages with other content than it acknowledged, or finds it gone,
// a lost update or a lost row.
type appWorkload struct {
	proc     int
	users    int
	pause    time.Duration // between two accesses of one writer or reader
	messages int           // loaded per user
	route    router
	log      *ackLog

	mu    sync.Mutex
	mine  map[int64]int64 // inserts of each user's messages this process acknowledged
	gone  map[int64]int64 // deletes of each user's messages this process began
	lat   latencies
	fails atomic.Int64 // writes and reads that failed with an error other than ErrFenced

	writes, updates, deletes, reads, anomalies, retries atomic.Int64
}

// writer is one writer goroutine of an application process, with the messages it inserted
// in this incarnation and has not deleted: only it updates or deletes them, one write at a
// time, so its ledger lines give each one's final content. A message whose write went
// unacknowledged (an error) is dropped: it is never written again.
type writer struct {
	clock *idClock
	r     *rand.Rand
	ids   []int64          // its messages, in no order
	own   map[int64]*owned // their acknowledged content
}

type owned struct {
	m       message
	version int // updates acknowledged
	at      int // index in ids
}

// The writers' mix, in percent: inserts, updates, deletes, and the rest read back one of
// the writer's messages. A writer with no message inserts.
const (
	insertPct = 50
	updatePct = 30
	deletePct = 10
)

func (w *writer) add(m message) {
	w.own[m.ID] = &owned{m: m, at: len(w.ids)}
	w.ids = append(w.ids, m.ID)
}

func (w *writer) drop(id int64) {
	o := w.own[id]
	last := w.ids[len(w.ids)-1]
	w.ids[o.at] = last
	w.own[last].at = o.at
	w.ids = w.ids[:len(w.ids)-1]
	delete(w.own, id)
}

// pick returns one of the writer's messages at random.
func (w *writer) pick() *owned { return w.own[w.ids[w.r.IntN(len(w.ids))]] }

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
			r: rand.New(rand.NewPCG(uint64(a.proc), uint64(time.Now().UnixNano())+uint64(w))), own: map[int64]*owned{}}
		wg.Go(func() {
			for ctx.Err() == nil {
				switch p := wr.r.IntN(100); {
				case len(wr.ids) == 0 || p < insertPct:
					a.write(wr, 1+wr.r.Int64N(int64(a.users)))
				case p < insertPct+updatePct:
					a.update(wr, wr.pick())
				case p < insertPct+updatePct+deletePct:
					a.delete(wr, wr.pick())
				default:
					a.readBack(wr, wr.pick())
				}
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
	if err := a.log.ack(msg.ID); err != nil {
		a.fail(err)
		return
	}
	w.add(msg)
	a.mu.Lock()
	a.mine[user]++
	a.mu.Unlock()
	a.writes.Add(1)
}

// update sets a new text on message o and increments its sender column in SQL: a lost
// earlier update leaves the counter behind even when a later one lands.
func (a *appWorkload) update(w *writer, o *owned) {
	next := o.m
	next.Message = fmt.Sprintf("message from process %d to user %d, version %d", a.proc, o.m.UserID, o.version+1)
	next.Sender++
	if err := a.log.intendUpdate(next); err != nil {
		a.fail(err)
		w.drop(o.m.ID)
		return
	}
	err := a.access(strconv.FormatInt(o.m.UserID, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("UPDATE messages SET message = $1, sender = sender + 1 WHERE id = $2 AND user_id = $3",
			next.Message, next.ID, next.UserID)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("update", o.m, err)
		w.drop(o.m.ID)
		return
	}
	if err := a.log.ack(o.m.ID); err != nil {
		a.fail(err)
		w.drop(o.m.ID)
		return
	}
	o.m, o.version = next, o.version+1
	a.writes.Add(1)
	a.updates.Add(1)
}

// delete deletes message o. It counts in gone before: a reader's lower bound must not
// count a message that may be gone.
func (a *appWorkload) delete(w *writer, o *owned) {
	id, user := o.m.ID, o.m.UserID
	w.drop(id)
	a.mu.Lock()
	a.gone[user]++
	a.mu.Unlock()
	if err := a.log.intendDelete(id); err != nil {
		a.fail(err)
		return
	}
	err := a.access(strconv.FormatInt(user, 10), &a.lat.writes, func(tx *sql.Tx, _ int) error {
		res, err := tx.Exec("DELETE FROM messages WHERE id = $1 AND user_id = $2", id, user)
		return affectedOne(res, err)
	})
	if err != nil {
		a.failWrite("delete", o.m, err)
		return
	}
	if err := a.log.ack(id); err != nil {
		a.fail(err)
		return
	}
	a.writes.Add(1)
	a.deletes.Add(1)
}

// readBack reads message o on its user's shard: it must hold the content this writer
// acknowledged last.
func (a *appWorkload) readBack(w *writer, o *owned) {
	got := message{ID: o.m.ID, UserID: o.m.UserID, Time: o.m.Time}
	found := true
	err := a.access(strconv.FormatInt(o.m.UserID, 10), &a.lat.reads, func(tx *sql.Tx, _ int) error {
		err := tx.QueryRow("SELECT message, sender FROM messages WHERE id = $1 AND user_id = $2", o.m.ID, o.m.UserID).Scan(&got.Message, &got.Sender)
		if errors.Is(err, sql.ErrNoRows) {
			found, err = false, nil
		}
		return err
	})
	if err != nil {
		a.fail(fmt.Errorf("read back message %d of user %d: %w", o.m.ID, o.m.UserID, err))
		return
	}
	a.reads.Add(1)
	if !found || got != o.m {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: message %d of user %d read back as %+v (found %v), this process acknowledged %+v\n", o.m.ID, o.m.UserID, got, found, o.m)
		w.drop(o.m.ID) // reported once
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
// without an ack allows either), or, when it found no row, the acknowledged message lost.
func (a *appWorkload) failWrite(what string, m message, err error) {
	if errors.Is(err, errNoRow) {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: %s of message %d of user %d, which this process acknowledged: %v\n", what, m.ID, m.UserID, err)
		return
	}
	a.fail(fmt.Errorf("%s message %d of user %d: %w", what, m.ID, m.UserID, err))
}

func (a *appWorkload) read(user int64) {
	a.mu.Lock()
	inserted := a.mine[user]
	a.mu.Unlock()
	var n int64
	err := a.access(strconv.FormatInt(user, 10), &a.lat.reads, func(tx *sql.Tx, _ int) error {
		return tx.QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", user).Scan(&n)
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
