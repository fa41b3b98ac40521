package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/keyhash"
)

// ErrFenced reports an owner that a shard does not serve now (its fence there says moved
// or importing), or a mover whose fencing token is older than one the store has seen. The
// error is a *FenceError that says which.
var ErrFenced = errors.New("owner not served by this shard")

// FenceState is what a shard says of one owner: whether it serves the owner now. It is
// kept on the shard itself and read in the same transaction as the owner's rows, which is
// what makes it hold across processes (see the package doc).
type FenceState uint8

const (
	// Serving: the shard serves the owner (a shard has no fence row for it).
	Serving FenceState = iota
	// Importing: the shard is the owner's new shard and its copy is not complete and
	// verified yet; nobody reads or writes the owner there.
	Importing
	// Moved: the shard was the owner's old shard and the owner left it, or is leaving it;
	// nobody reads or writes the owner there any more.
	Moved
)

// String returns "serving", "importing", "moved", or "fence(n)" for a value out of range.
func (f FenceState) String() string {
	switch f {
	case Serving:
		return "serving"
	case Importing:
		return "importing"
	case Moved:
		return "moved"
	}
	return fmt.Sprintf("fence(%d)", uint8(f))
}

// Fence is what a shard says of one owner: its state, and the migration that set it (empty
// for Serving).
type Fence struct {
	State     FenceState
	Migration string
}

// FenceError is the error of an access refused by a shard's fence, or of a mover refused
// for a stale fencing token. errors.Is(err, ErrFenced) is true of it.
type FenceError struct {
	Owner string
	// Shard is the shard that refused, or -1 for the control database (the marks).
	Shard int
	// State is Moved or Importing for a refused access; Serving for a stale token.
	State FenceState
	// Migration, Token and Newest are set for a stale token: the store has seen Newest >
	// Token for that migration.
	Migration     string
	Token, Newest uint64
}

// Error says which shard refused which owner, or which token is stale.
func (e *FenceError) Error() string {
	where := fmt.Sprintf("shard %d", e.Shard)
	if e.Shard < 0 {
		where = "the control database"
	}
	if e.Newest > e.Token {
		return fmt.Sprintf("rebalance: migration %q: %s refuses stale mover epoch %d < %d: another mover took over", e.Migration, where, e.Token, e.Newest)
	}
	switch e.State {
	case Importing:
		return fmt.Sprintf("rebalance: owner %q: %s does not serve it yet (importing)", e.Owner, where)
	case Moved:
		return fmt.Sprintf("rebalance: owner %q: %s no longer serves it (moved)", e.Owner, where)
	}
	return fmt.Sprintf("rebalance: owner %q: %s refuses it (%v)", e.Owner, where, e.State)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FenceError) Is(target error) bool { return target == ErrFenced }

// Cursor is a position in the order of one owner's rows on a shard (a SharedStore's key
// column), opaque to the Migration. The empty Cursor is before the first row.
type Cursor string

// SharedStore is a Store that keeps each owner's fence on each shard, so that a Shared
// migration is safe when many processes read, write and move the same data. Tx is the
// store's transaction type (*sql.Tx for the sqlstore module).
//
// Its methods must be safe for concurrent use, also by other processes on other store
// values over the same databases, and idempotent. Like a Store, it must not create a shard
// that is missing, and its errors name the shard.
type SharedStore[Tx any] interface {
	Store
	// Claim records token as the newest token of migration on every shard and in the
	// control database, or refuses (a *FenceError) if one of them has seen a newer one. Run
	// claims before it reads any fence, so that a mover that lost its election can no longer
	// change a fence or a mark the new one has read.
	Claim(ctx context.Context, migration string, token uint64) error
	// Access runs fn in one transaction on shard, if shard serves owner, and commits it.
	// In that transaction it first holds owner shared against a change of owner's fence on
	// shard (a change waits for the accesses under way; accesses of one owner do not wait for
	// each other), then reads the fence: if it is not Serving, Access returns a *FenceError
	// without calling fn. If fn returns an error, the transaction is rolled back and Access
	// returns that error.
	Access(ctx context.Context, owner string, shard int, fn func(tx Tx) error) error
	// Fences returns the fence of each of owners on shard, in the order of owners.
	Fences(ctx context.Context, owners []string, shard int) ([]Fence, error)
	// SetFence sets the fence of owners on shard to state, set by migration (Serving
	// removes the fence), in one transaction that holds each
	// owner exclusive against Access on that shard, so that no access that read the old
	// fence is still running when the new one is visible. It records token as the newest
	// token of migration on shard, and refuses (a *FenceError) a token older than the newest
	// it has seen, changing nothing.
	SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error
	// CopyChunk copies up to limit of owner's rows after the cursor, in the key order, from
	// shard from to shard to in one short transaction on to; a row of the same key on to is
	// replaced. It returns the cursor of the last row copied, how many rows it copied, and
	// done when no row is left after it. It leaves from unchanged.
	CopyChunk(ctx context.Context, owner string, from, to int, after Cursor, limit int) (next Cursor, rows int, done bool, err error)
	// DeleteChunk deletes up to limit of owner's rows on shard in one short transaction and
	// returns how many it deleted: 0 when none is left.
	DeleteChunk(ctx context.Context, owner string, shard int, limit int) (int, error)
	// Marks returns the mark of each of owners in migration, in the order of owners.
	Marks(ctx context.Context, migration string, owners []string) ([]Mark, error)
	// SetMarks durably records mark for owners in migration, in one transaction; it never
	// lowers a mark. Like SetFence it refuses a token older than the newest it has seen for
	// migration.
	SetMarks(ctx context.Context, migration string, owners []string, mark Mark, token uint64) error
}

// Upper bounds of SharedOptions, beyond which NewShared returns an error wrapping ErrConfig.
const (
	MaxChunkRows = 100_000
	MaxBatch     = 10_000
	MaxFenceWait = time.Hour
)

// SharedOptions tune a Shared migration. The zero value is valid: one mover of token 0,
// chunks of 1000 rows, marks in batches of 256 owners, a 10 s wait for an owner being moved.
type SharedOptions struct {
	// Token is the mover's fencing token: its epoch from an election, which grows with each
	// new mover. A store refuses a Run whose token is older than one it has seen. Processes
	// that only call Do need none.
	Token uint64
	// Concurrency is how many owners Run moves at once, in [0, MaxConcurrency]. Zero means 1.
	Concurrency int
	// ChunkRows is how many rows one copy or delete transaction handles, in [0,
	// MaxChunkRows]. Zero means 1000.
	ChunkRows int
	// Batch is how many owners' marks one statement reads or writes, in [0, MaxBatch]. Zero
	// means 256.
	Batch int
	// FenceWait bounds how long Do waits for an owner that is between its fence on the old
	// shard and its commit on the new one (a few ms, unless the mover stopped there), in [0,
	// MaxFenceWait]. Zero means 10 s.
	FenceWait time.Duration
	// Progress, if not nil, is called by Run after each owner that changes shard, one call
	// at a time. It should return quickly: the movers wait for it.
	Progress func(Progress)
}

// SharedStats is what this Shared value's Runs did.
type SharedStats struct {
	// Moved counts the owners moved (committed on their new shard), Rows the rows copied.
	Moved, Rows int64
	// MaxExclusive is the longest time one owner was served by no shard: from the call that
	// fences its old shard to the return of the one that commits its new shard.
	MaxExclusive time.Duration
}

// Shared routes each owner to the shard that serves it while a resize moves the data, for
// many processes at once: routing reads the owner's fence on the shard in the transaction
// that reads or writes it, never a mark, so a process needs no lock in common with the mover
// nor an up-to-date view of its progress. All its methods are safe for concurrent use.
//
// before and after must not be resized while the Shared migration is in use.
type Shared[Tx any] struct {
	id            string
	before, after shard.Sharder
	store         SharedStore[Tx]
	opts          SharedOptions
	finished      atomic.Bool
	locks         []sync.Mutex // the mover's, by owner hash; Do takes none

	moved, rows  atomic.Int64
	maxExclusive atomic.Int64 // nanoseconds
}

// NewShared returns a Shared migration with the given ID from before to after over store.
// Every process (the application's and the mover's) makes one with the same ID and sharders;
// the ID names the marks and the tokens in store. The arguments are checked as New checks
// them; bad ones are errors wrapping ErrConfig.
func NewShared[Tx any](id string, before, after shard.Sharder, store SharedStore[Tx], opts SharedOptions) (*Shared[Tx], error) {
	switch {
	case id == "":
		return nil, fmt.Errorf("rebalance: empty migration ID: %w", ErrConfig)
	case before == nil || after == nil || store == nil:
		return nil, fmt.Errorf("rebalance: migration %q: nil sharder or store: %w", id, ErrConfig)
	case shareState(before, after):
		return nil, fmt.Errorf("rebalance: migration %q: before and after are the same sharder, or wrap the same one: resizing one resizes the other, so nothing would move: make a second sharder with the new count: %w", id, ErrConfig)
	case opts.Concurrency < 0 || opts.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("rebalance: migration %q: Concurrency %d: want [0, %d]: %w", id, opts.Concurrency, MaxConcurrency, ErrConfig)
	case opts.ChunkRows < 0 || opts.ChunkRows > MaxChunkRows:
		return nil, fmt.Errorf("rebalance: migration %q: ChunkRows %d: want [0, %d]: %w", id, opts.ChunkRows, MaxChunkRows, ErrConfig)
	case opts.Batch < 0 || opts.Batch > MaxBatch:
		return nil, fmt.Errorf("rebalance: migration %q: Batch %d: want [0, %d]: %w", id, opts.Batch, MaxBatch, ErrConfig)
	case opts.FenceWait < 0 || opts.FenceWait > MaxFenceWait:
		return nil, fmt.Errorf("rebalance: migration %q: FenceWait %v: want [0, %v]: %w", id, opts.FenceWait, MaxFenceWait, ErrConfig)
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	opts.ChunkRows = cmp.Or(opts.ChunkRows, 1000)
	opts.Batch = cmp.Or(opts.Batch, 256)
	opts.FenceWait = cmp.Or(opts.FenceWait, 10*time.Second)
	return &Shared[Tx]{id: id, before: before, after: after, store: store, opts: opts, locks: make([]sync.Mutex, 1024)}, nil
}

// ID returns the migration's ID.
func (m *Shared[Tx]) ID() string { return m.id }

// Stats returns what this value's Runs have done so far.
func (m *Shared[Tx]) Stats() SharedStats {
	return SharedStats{Moved: m.moved.Load(), Rows: m.rows.Load(), MaxExclusive: time.Duration(m.maxExclusive.Load())}
}

// Do calls fn in a transaction on the shard that serves owner now, with that shard, and
// returns fn's error; fn's writes commit when it returns nil. An owner whose shard does not
// change is accessed on it, its fence read in the same transaction. An owner whose shard
// changes is tried on its old shard, then, if that one says moved, on its new shard; while
// neither serves it (the mover is between fencing the old shard and committing the new one,
// a few ms) Do backs off and tries again, up to SharedOptions.FenceWait, then returns an
// error wrapping ErrFenced that says so. fn may be called more than once if it returns an
// error wrapping ErrFenced; it must not call Do, Run or Finish.
func (m *Shared[Tx]) Do(ctx context.Context, owner string, fn func(tx Tx, shard int) error) error {
	from, to := m.before.Locate(owner), m.after.Locate(owner)
	if from == to || m.finished.Load() {
		return m.access(ctx, owner, to, fn)
	}
	deadline := time.Now().Add(m.opts.FenceWait)
	wait := 500 * time.Microsecond
	s, switched := from, false
	for {
		err := m.access(ctx, owner, s, fn)
		var fe *FenceError
		if !errors.As(err, &fe) || fe.Shard != s || fe.Newest != 0 {
			return err
		}
		next := from
		if s == from {
			next = to
		}
		if fe.State == Moved && !switched {
			s, switched = next, true // the owner left s: the other shard serves it, or soon will
			continue
		}
		// Neither shard serves the owner now: its move is between the fence on its old shard
		// and the commit on its new one (Redis Cluster's TRYAGAIN), or was rolled back.
		if time.Now().After(deadline) {
			return fmt.Errorf("rebalance: migration %q: owner %q is being moved from shard %d to %d and neither serves it after %v (is the mover stopped between its steps? run it again): %w",
				m.id, owner, from, to, m.opts.FenceWait, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rebalance: migration %q: owner %q: waiting for its move: %w", m.id, owner, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
		s, switched = next, false
	}
}

func (m *Shared[Tx]) access(ctx context.Context, owner string, s int, fn func(tx Tx, shard int) error) error {
	return m.store.Access(ctx, owner, s, func(tx Tx) error { return fn(tx, s) })
}

// Run moves every owner of owners whose shard changes and that is not Done, up to
// SharedOptions.Concurrency at once, and reports Progress. It ranges over owners twice (to
// count, then to move) and holds only a batch of them at a time. For each owner, from its
// old shard A to its new shard B:
//
//  1. fence B importing, and delete what a stopped copy left of the owner there;
//  2. copy the owner's rows A -> B in chunks, each its own short transaction, while A
//     serves the owner and the application keeps writing there;
//  3. fence A moved: the owner is served by no shard from here to step 5;
//  4. copy the tail (the rows written since their chunk was copied) and check that A and B
//     hold as many rows; if not, copy the owner whole again; if still not, fence A serving
//     again and stop with ErrCopyMismatch;
//  5. fence B serving: the commit point, B serves the owner from now on;
//  6. delete the owner's rows on A in chunks (A stays fenced moved);
//  7. mark the owner Done, in a batch with others.
//
// Run first claims the migration for SharedOptions.Token on every shard (SharedStore.Claim).
// Every step carries the token, and every step is idempotent: a Run stopped
// anywhere (an error, ctx, a crash) resumes from the fences and marks when run again, by
// this process or another. A store that has seen a newer token refuses the steps of an older
// one (ErrFenced). After a successful Finish it returns an error wrapping ErrFinished;
// owners must not be nil (ErrConfig).
func (m *Shared[Tx]) Run(ctx context.Context, owners iter.Seq[string]) error {
	if owners == nil {
		return fmt.Errorf("rebalance: migration %q: Run with nil owners: %w", m.id, ErrConfig)
	}
	if m.finished.Load() {
		return fmt.Errorf("rebalance: migration %q: Run after Finish: %w", m.id, ErrFinished)
	}
	total := 0
	for range m.changed(owners) {
		total++
	}
	if total == 0 {
		return nil
	}
	if err := m.store.Claim(ctx, m.id, m.opts.Token); err != nil {
		if fe := (*FenceError)(nil); errors.As(err, &fe) {
			return err // it says which migration and which tokens
		}
		return fmt.Errorf("rebalance: migration %q: claim with token %d: %w", m.id, m.opts.Token, err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards done, firstErr, the Progress calls and finished
		done     int
		firstErr error
		finished []string // owners moved, whose Done marks are not written yet
		work     = make(chan string)
	)
	fail := func(err error) {
		mu.Lock()
		firstErr = cmp.Or(firstErr, err)
		mu.Unlock()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	// flush writes the Done marks of the owners moved so far. A crash before it only makes
	// the next Run find those owners committed on their new shard and mark them.
	flush := func(force bool) {
		mu.Lock()
		if len(finished) == 0 || !force && len(finished) < m.opts.Batch {
			mu.Unlock()
			return
		}
		batch := finished
		finished = nil
		mu.Unlock()
		if err := m.store.SetMarks(ctx, m.id, batch, Done, m.opts.Token); err != nil {
			fail(fmt.Errorf("rebalance: migration %q: mark %d owners done: %w", m.id, len(batch), err))
		}
	}
	for range min(m.opts.Concurrency, total) {
		wg.Go(func() {
			for o := range work {
				l := &m.locks[keyhash.XXH64(o)%uint64(len(m.locks))]
				l.Lock() // an owner listed twice is moved once at a time
				err := m.move(ctx, o, m.before.Locate(o), m.after.Locate(o))
				l.Unlock()
				if err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				finished = append(finished, o)
				if done++; m.opts.Progress != nil {
					m.opts.Progress(Progress{Done: done, Total: total})
				}
				mu.Unlock()
				flush(false)
			}
		})
	}
	batch := make([]string, 0, m.opts.Batch)
	feed := func() bool {
		defer func() { batch = batch[:0] }()
		marks, err := m.store.Marks(ctx, m.id, batch)
		if err == nil && len(marks) != len(batch) {
			err = fmt.Errorf("store returned %d marks for %d owners", len(marks), len(batch))
		}
		if err != nil {
			fail(fmt.Errorf("rebalance: migration %q: read the marks of %d owners: %w", m.id, len(batch), err))
			return false
		}
		for i, o := range batch {
			switch {
			case marks[i] > Done:
				fail(fmt.Errorf("rebalance: migration %q: owner %q: store returned %v: %w", m.id, o, marks[i], ErrMark))
				return false
			case marks[i] == Done:
				mu.Lock()
				if done++; m.opts.Progress != nil {
					m.opts.Progress(Progress{Done: done, Total: total})
				}
				mu.Unlock()
				continue
			}
			if ctx.Err() != nil || failed() {
				return false
			}
			work <- o
		}
		return true
	}
	for o := range m.changed(owners) {
		if ctx.Err() != nil || failed() {
			break // moves under way finish; the next Run resumes
		}
		if batch = append(batch, o); len(batch) == cap(batch) && !feed() {
			break
		}
	}
	if len(batch) > 0 && ctx.Err() == nil && !failed() {
		feed()
	}
	close(work)
	wg.Wait()
	flush(true)
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rebalance: migration %q: stopped after %d of %d owners: %w", m.id, done, total, err)
	}
	return nil
}

// changed yields the owners whose shard differs between before and after.
func (m *Shared[Tx]) changed(owners iter.Seq[string]) iter.Seq[string] {
	return func(yield func(string) bool) {
		for o := range owners {
			if m.before.Locate(o) != m.after.Locate(o) && !yield(o) {
				return
			}
		}
	}
}

// move brings owner from shard a to shard b, from wherever a stop left it (the fences on a
// and b say where), up to the deletion of its rows on a; Run marks it Done.
func (m *Shared[Tx]) move(ctx context.Context, owner string, a, b int) error {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("rebalance: migration %q: owner %q: %s (shard %d -> %d): %w", m.id, owner, what, a, b, err)
		}
		return nil
	}
	fa, err := m.fence(ctx, owner, a)
	if err := step(fmt.Sprintf("read fence on shard %d", a), err); err != nil {
		return err
	}
	fb, err := m.fence(ctx, owner, b)
	if err := step(fmt.Sprintf("read fence on shard %d", b), err); err != nil {
		return err
	}
	one := []string{owner}
	mine := func(f Fence) bool { return f.Migration == m.id }
	switch {
	case fa.State == Moved && mine(fa) && fb.State == Serving:
		// Committed by an earlier Run: only the old copy is left to delete, once B is seen to
		// hold at least as many rows as remain of it.
		old, err := m.store.Count(ctx, owner, a)
		if err := step(fmt.Sprintf("count rows on shard %d", a), err); err != nil {
			return err
		}
		if old > 0 {
			n, err := m.store.Count(ctx, owner, b)
			if err := step(fmt.Sprintf("count rows on shard %d", b), err); err != nil {
				return err
			}
			if n < old {
				return step("verify copy", fmt.Errorf("shard %d holds %d rows of the owner, the old copy on shard %d holds %d: shard %d lost rows since the copy: the old copy is kept: %w", b, n, a, old, b, ErrCopyLost))
			}
		}
	case fa.State == Serving && (fb.State != Importing || mine(fb)), fa.State == Moved && mine(fa) && fb.State == Importing && mine(fb):
		// A Moved fence on B is an earlier migration's, which moved the owner from B: it is
		// replaced by Importing, as the fence always says the current truth.
		var cur Cursor
		if fa.State == Serving {
			if fb.State != Importing {
				if err := step("fence new shard importing", m.store.SetFence(ctx, m.id, one, b, Importing, m.opts.Token)); err != nil {
					return err
				}
			}
			if err := step(fmt.Sprintf("clear a stopped copy on shard %d", b), m.deleteAll(ctx, owner, b)); err != nil {
				return err
			}
			if cur, err = m.copyFrom(ctx, owner, a, b, ""); err != nil {
				return step("copy", err)
			}
		}
		// From the fence on A to the commit on B, no shard serves the owner: Do waits.
		start := time.Now()
		if err := step("fence old shard moved", m.store.SetFence(ctx, m.id, one, a, Moved, m.opts.Token)); err != nil {
			return err
		}
		if err := m.tail(ctx, owner, a, b, cur); err != nil {
			if errors.Is(err, ErrCopyMismatch) {
				// The old shard keeps every row: let it serve the owner again.
				if rerr := m.store.SetFence(ctx, m.id, one, a, Serving, m.opts.Token); rerr != nil {
					err = fmt.Errorf("%w (and fence old shard serving again: %w)", err, rerr)
				}
			}
			return step("copy the tail", err)
		}
		if err := step("commit on the new shard", m.store.SetFence(ctx, m.id, one, b, Serving, m.opts.Token)); err != nil {
			return err
		}
		held := time.Since(start)
		for {
			old := m.maxExclusive.Load()
			if int64(held) <= old || m.maxExclusive.CompareAndSwap(old, int64(held)) {
				break
			}
		}
		m.moved.Add(1)
	default:
		return step("read fences", fmt.Errorf("shard %d says %s and shard %d says %s: the owner is not where this migration's before sharder puts it, or another migration's move of it is unfinished; nothing changed: %w", a, fa, b, fb, ErrFenced))
	}
	return step(fmt.Sprintf("delete old copy on shard %d", a), m.deleteAll(ctx, owner, a))
}

func (m *Shared[Tx]) fence(ctx context.Context, owner string, s int) (Fence, error) {
	f, err := m.store.Fences(ctx, []string{owner}, s)
	switch {
	case err != nil:
		return Fence{}, err
	case len(f) != 1:
		return Fence{}, fmt.Errorf("store returned %d fences for 1 owner", len(f))
	case f[0].State > Moved:
		return Fence{}, fmt.Errorf("store returned %v: %w", f[0].State, ErrMark)
	}
	return f[0], nil
}

// String returns the state, and the migration that set it: "moved by \"grow-5-10\"".
func (f Fence) String() string {
	if f.Migration == "" {
		return f.State.String()
	}
	return fmt.Sprintf("%v by %q", f.State, f.Migration)
}

// copyFrom copies owner's rows after cur from a to b chunk by chunk, and returns the cursor
// of the last row.
func (m *Shared[Tx]) copyFrom(ctx context.Context, owner string, a, b int, cur Cursor) (Cursor, error) {
	for {
		next, n, done, err := m.store.CopyChunk(ctx, owner, a, b, cur, m.opts.ChunkRows)
		if err != nil {
			return cur, err
		}
		m.rows.Add(int64(n))
		if n > 0 {
			cur = next
		}
		if done {
			return cur, nil
		}
		if n == 0 {
			return cur, fmt.Errorf("store copied no row after cursor %q and said more are left", cur)
		}
	}
}

// tail copies what owner's rows on a gained since the chunks were copied (a is fenced moved,
// b importing: nothing writes either), and checks that both hold as many rows. Rows
// committed out of key order, or changed after their chunk was copied, make a second copy of
// the whole owner (each row replaced by key); rows deleted after their chunk leave b with
// more rows, and the owner is copied whole in one transaction (Store.Copy).
func (m *Shared[Tx]) tail(ctx context.Context, owner string, a, b int, cur Cursor) error {
	counts := func() (int64, int64, error) {
		na, err := m.store.Count(ctx, owner, a)
		if err != nil {
			return 0, 0, fmt.Errorf("count rows on shard %d: %w", a, err)
		}
		nb, err := m.store.Count(ctx, owner, b)
		if err != nil {
			return 0, 0, fmt.Errorf("count rows on shard %d: %w", b, err)
		}
		return na, nb, nil
	}
	if _, err := m.copyFrom(ctx, owner, a, b, cur); err != nil {
		return err
	}
	na, nb, err := counts()
	if err != nil || na == nb {
		return err
	}
	if nb < na {
		if _, err := m.copyFrom(ctx, owner, a, b, ""); err != nil {
			return err
		}
		if na, nb, err = counts(); err != nil || na == nb {
			return err
		}
	}
	if err := m.store.Copy(ctx, owner, a, b); err != nil {
		return fmt.Errorf("copy whole: %w", err)
	}
	if na, nb, err = counts(); err != nil || na == nb {
		return err
	}
	return fmt.Errorf("after the copy shard %d holds %d rows of the owner, shard %d holds %d: nothing deleted, shard %d serves the owner again: %w", b, nb, a, na, a, ErrCopyMismatch)
}

// deleteAll deletes owner's rows on shard s chunk by chunk.
func (m *Shared[Tx]) deleteAll(ctx context.Context, owner string, s int) error {
	for {
		n, err := m.store.DeleteChunk(ctx, owner, s, m.opts.ChunkRows)
		if err != nil || n == 0 {
			return err
		}
	}
}

// Finish checks the marks of every owner of owners whose shard changes, a batch at a time.
// If every one is Done, from then on Do routes by the after sharder alone (still reading
// the fence there), and Finish returns nil. Otherwise nothing changes and it returns an
// *UnfinishedError. owners must not be nil (ErrConfig).
//
// The fences stay: an old shard keeps saying moved, so that a process that still routes by
// the before sharder is refused there rather than writing where nobody reads.
func (m *Shared[Tx]) Finish(ctx context.Context, owners iter.Seq[string]) error {
	if owners == nil {
		return fmt.Errorf("rebalance: migration %q: Finish with nil owners: %w", m.id, ErrConfig)
	}
	left := &UnfinishedError{Migration: m.id}
	batch := make([]string, 0, m.opts.Batch)
	check := func() error {
		marks, err := m.store.Marks(ctx, m.id, batch)
		if err == nil && len(marks) != len(batch) {
			err = fmt.Errorf("store returned %d marks for %d owners", len(marks), len(batch))
		}
		if err != nil {
			return fmt.Errorf("rebalance: migration %q: read the marks of %d owners: %w", m.id, len(batch), err)
		}
		for i, mark := range marks {
			if mark > Done {
				return fmt.Errorf("rebalance: migration %q: owner %q: store returned %v: %w", m.id, batch[i], mark, ErrMark)
			}
			if mark != Done {
				left.Left++
				if len(left.Owners) < 10 {
					left.Owners = append(left.Owners, batch[i])
				}
			}
		}
		batch = batch[:0]
		return nil
	}
	for o := range m.changed(owners) {
		if batch = append(batch, o); len(batch) == cap(batch) {
			if err := check(); err != nil {
				return err
			}
		}
	}
	if len(batch) > 0 {
		if err := check(); err != nil {
			return err
		}
	}
	if left.Left > 0 {
		return left
	}
	m.finished.Store(true)
	return nil
}
