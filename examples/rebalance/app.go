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
// users and readers count a random user's messages, all through the router. A reader that
// sees fewer messages than this process had acknowledged for the user (plus those loaded)
// before it started has caught a lost write.
type appWorkload struct {
	proc     int
	users    int
	pause    time.Duration // between two accesses of one writer or reader
	messages int           // loaded per user
	route    router
	log      *ackLog

	mu    sync.Mutex
	mine  map[int64]int64 // messages of each user this process acknowledged
	lat   latencies
	fails atomic.Int64 // writes and reads that failed with an error other than ErrFenced

	writes, reads, anomalies, retries atomic.Int64
}

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
		clock := &idClock{slot: int64(a.proc*16 + w)}
		r := rand.New(rand.NewPCG(uint64(a.proc), uint64(time.Now().UnixNano())+uint64(w)))
		wg.Go(func() {
			for ctx.Err() == nil {
				a.write(clock, r, 1+r.Int64N(int64(a.users)))
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

func (a *appWorkload) write(clock *idClock, r *rand.Rand, user int64) {
	msg := message{ID: clock.next(), UserID: user, Time: time.Now().UnixNano(),
		Message: fmt.Sprintf("message from process %d to user %d", a.proc, user), Sender: 1 + r.Int64N(int64(a.users))}
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
	a.mu.Lock()
	a.mine[user]++
	a.mu.Unlock()
	a.writes.Add(1)
}

func (a *appWorkload) read(user int64) {
	a.mu.Lock()
	want := int64(a.messages) + a.mine[user]
	a.mu.Unlock()
	var n int64
	err := a.access(strconv.FormatInt(user, 10), &a.lat.reads, func(tx *sql.Tx, _ int) error {
		return tx.QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", user).Scan(&n)
	})
	if err != nil {
		a.fail(fmt.Errorf("read user %d: %w", user, err))
		return
	}
	a.reads.Add(1)
	if n < want {
		a.anomalies.Add(1)
		fmt.Fprintf(os.Stderr, "ANOMALY: user %d has %d messages, this process acknowledged %d (with those loaded)\n", user, n, want)
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
	s := fmt.Sprintf("STATS role=app writes=%d reads=%d anomalies=%d errors=%d retries=%d hwm=%d",
		a.writes.Load(), a.reads.Load(), a.anomalies.Load(), a.fails.Load(), a.retries.Load(), vmHWM(os.Getpid()))
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
