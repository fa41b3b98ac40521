package sqlstore

import (
	"context"
	"time"
)

// The handoff of a SQLite file's write lock from the Store's own writes to the accesses that
// wait for it. SQLite has one write lock a database file, and a connection that finds it
// taken polls: an access every 200 µs or sooner (Access), SQLite's busy handler after 1, 2,
// then 5 ms. The mover's transactions on one file follow each other within microseconds, so
// an access that came during one of them found the lock taken again at each try and waited
// for the mover's whole run of transactions there: a p99 of 12 to 13 ms at the defaults
// (BenchmarkLatency), where one takes 3 to 4. So an access that finds the lock taken says so
// to every process on the machine, by holding a shared flock(2) of the file named by the
// database's file and waitingSuffix until it ends; and the Store, before each of its write
// transactions on the file, waits while one is held, for at most yieldMost. An access then
// waits for the transaction under way only. Only for database files in WAL mode (see
// fileOf), on systems with flock(2); elsewhere, or where the file cannot be opened, nothing
// waits. The locks say nothing of the data: SQLite's own locks keep it consistent whatever
// these do.

// waitingSuffix names, after a database file's name, the empty file whose shared locks are
// accesses waiting to write that database.
const waitingSuffix = "-rebalance-waiting"

// yieldMost is how long the Store's write transaction waits at most for accesses waiting to
// write: a stream of them cannot hold the mover off for longer at a time.
const yieldMost = 5 * time.Millisecond

// waitToWrite marks that an access waits to write SQLite shard i, until the returned func is
// called.
func (s *Store) waitToWrite(ctx context.Context, i int) (done func()) {
	file, err := s.fileOf(ctx, i)
	if err != nil || file == "" {
		return func() {}
	}
	return lockWaiting(file + waitingSuffix)
}

// yieldToWaiting waits, before a write transaction of the Store on SQLite shard i, while an
// access waits to write there, for at most yieldMost.
func (s *Store) yieldToWaiting(ctx context.Context, i int) {
	file, err := s.fileOf(ctx, i)
	if err != nil || file == "" {
		return
	}
	end := time.Now().Add(yieldMost)
	for waiting(file+waitingSuffix) && time.Now().Before(end) {
		t := time.NewTimer(50 * time.Microsecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
