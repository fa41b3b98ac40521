package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// workload is the application during a resize: writers add messages to random users and
// readers count a random user's messages, all through Migration.Do. A reader that sees
// fewer messages than were acknowledged before it started has caught a lost write.
type workload struct {
	cancel                   context.CancelFunc
	wg                       sync.WaitGroup
	writes, reads, anomalies atomic.Int64
	mu                       sync.Mutex
	err                      error
}

// startWorkload starts the goroutines; ctx is for the database calls, which a stop never
// interrupts: a message inserted but not recorded in the ledger would look like a duplicate.
func startWorkload(ctx context.Context, c config, d *dbs, l *ledger, m *rebalance.Migration, crash *crasher) *workload {
	running, cancel := context.WithCancel(context.Background())
	w := &workload{cancel: cancel}
	loop := func(seed int, op func(*rand.Rand, int64) error) {
		w.wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(time.Now().UnixNano())))
			for running.Err() == nil {
				if err := op(r, 1+r.Int64N(int64(c.users))); err != nil {
					w.fail(err)
					return
				}
				time.Sleep(time.Millisecond) // an application, not a benchmark
			}
		})
	}
	for i := range c.writers {
		loop(i, func(r *rand.Rand, user int64) error { return w.write(ctx, d, l, m, crash, r, user) })
	}
	for i := range c.readers {
		loop(1000+i, func(_ *rand.Rand, user int64) error { return w.read(ctx, d, l, m, user) })
	}
	return w
}

func (w *workload) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		w.cancel()
	}
}

// failed returns the first error of a goroutine, if any.
func (w *workload) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// stop stops the goroutines and returns the first error of one.
func (w *workload) stop() error {
	w.cancel()
	w.wg.Wait()
	return w.failed()
}

func (w *workload) write(ctx context.Context, d *dbs, l *ledger, m *rebalance.Migration, crash *crasher, r *rand.Rand, user int64) error {
	a := l.users[user]
	a.mu.Lock()
	defer a.mu.Unlock()
	msg := message{
		ID:      messageID(user, a.count+1),
		UserID:  user,
		Time:    time.Now().UnixNano(),
		Message: fmt.Sprintf("message %d of user %d, written during a resize", a.count+1, user),
		Sender:  1 + r.Int64N(int64(len(l.users))),
	}
	err := m.Do(ctx, strconv.FormatInt(user, 10), func(s int) error {
		if err := insertMessages(ctx, d.shards[s], []message{msg}); err != nil {
			return d.shard(s, fmt.Errorf("write user %d: %w", user, err))
		}
		crash.at(pointWritten, fmt.Sprintf("message %d of user %d", a.count+1, user))
		return l.record(ctx, d.control, user, a, msg)
	})
	if err == nil {
		w.writes.Add(1)
	}
	return err
}

func (w *workload) read(ctx context.Context, d *dbs, l *ledger, m *rebalance.Migration, user int64) error {
	acked := l.acknowledged(user)
	return m.Do(ctx, strconv.FormatInt(user, 10), func(s int) error {
		var n int64
		err := d.shards[s].QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", user).Scan(&n)
		if err != nil {
			return d.shard(s, fmt.Errorf("read user %d: %w", user, err))
		}
		w.reads.Add(1)
		if n < acked {
			w.anomalies.Add(1)
		}
		return nil
	})
}

var errAnomaly = errors.New("a reader saw fewer messages than were acknowledged")
