package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/shardkit/shard"
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
	// Exporting: the shard is the owner's old shard and serves it, and records every
	// change of the owner's rows (its change capture) while the mover copies them, to
	// replay on the new shard: an UPDATE or DELETE of a row already copied is not lost.
	Exporting
)

// String returns "serving", "importing", "moved", "exporting", or "fence(n)" for a value
// out of range.
func (f FenceState) String() string {
	switch f {
	case Serving:
		return "serving"
	case Importing:
		return "importing"
	case Moved:
		return "moved"
	case Exporting:
		return "exporting"
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
//
// Every write a mover makes carries the migration and the token its claim returned
// (MoverLock), and the shard written refuses it (a *FenceError, changing nothing) if it has
// seen a newer token of that migration: a mover that was replaced changes nothing once its
// replacement has claimed. The check and the write are one transaction, which a claim on that
// shard waits for or precedes. Writes of rows also check the fences they need on the shard
// written: a copy writes only where every owner is fenced Importing by the migration, a
// deletion only where every owner is fenced (Importing or Moved) by it.
//
// Its safety rests on parts that an in-process Store may go without: Finish refuses while
// any shard the store has (Shards) holds rows of an owner left out of the list
// (OwnerLister) or an owner a Run left fenced part way (FenceLister), and a deletion resumed
// by a later Run first checks the old copy against the window's sums (SumKeeper). Without
// them a Finish would strand such owners and a resumed deletion would take a write that
// went around the fence, so they are required, not optional.
type SharedStore[Tx any] interface {
	Store
	MoverLock
	OwnerLister
	FenceLister
	SumKeeper
	// Shards returns how many shards the store has: Finish lists every one, not only
	// those the sharders name (a sharder of too few shards, by a typo, would leave the
	// rows of the others where neither sharder looks).
	Shards() int
	// Access runs fn in one transaction on shard, if shard serves owner routed by p, and
	// commits it. It reads the placement the shard serves and owner's fence in that
	// transaction, and no change of that fence may commit between the read and the end of
	// fn's writes: it holds owner shared against a change (a change waits for the accesses
	// under way; accesses of one owner do not wait for each other), or reads on a snapshot
	// and writes only if nothing committed since (then an access that only reads takes
	// effect at its snapshot). If the shard's placement does not accept p
	// (Placement.Accepts), Access returns a *PlacementError; if the fence is not Serving, a
	// *FenceError; in both cases without calling fn. If fn returns an error, the
	// transaction is rolled back and Access returns that error, or, if the store can tell
	// that fn's write failed only for a change since its snapshot, runs the access again.
	Access(ctx context.Context, p Placement, owner string, shard int, fn func(tx Tx) error) error
	// Fences returns the fence of each of owners on shard, in the order of owners.
	Fences(ctx context.Context, owners []string, shard int) ([]Fence, error)
	// SetFence sets the fence of owners on shard to state, set by migration (Serving
	// removes the fence), in one transaction that holds each owner exclusive against Access
	// on that shard, so that no access that read the old fence is still running when the
	// new one is visible. It refuses a stale token, and any state but Serving while the
	// shard records a Finish of migration listing its owners (Finishing) or the migration
	// finished (see FenceLister). A store that waits after its commit for writes under way
	// around its accesses (sqlstore on PostgreSQL) may return an error with the fence
	// changed.
	SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error
	// CopyChunk copies rows of owners from shard from to shard to in one short transaction
	// on to; a row of the same key on to is replaced. It takes each owner's rows after its
	// cursor in after (one per owner), in the key order, owner after owner in the order of
	// owners, up to limit rows in all, so that owners of few rows share one chunk. It returns
	// each owner's cursor after its last row copied (its cursor in after if none), how many
	// rows it copied, and done when no owner has a row left after its cursor. It leaves from
	// unchanged. It refuses a stale token, and owners not all fenced Importing by migration
	// on to.
	CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) (next []Cursor, rows int, done bool, err error)
	// Counts returns how many rows each of owners has on shard, in the order of owners.
	Counts(ctx context.Context, owners []string, shard int) ([]int64, error)
	// ClearChanges deletes the changes recorded of owners on shard (what a stopped copy, or
	// a finished one, left), in one transaction that refuses a stale token and owners not
	// fenced Exporting or Moved by migration there. Where none are recorded it may do
	// nothing: keeping a change is never a loss (a replay applies one again harmlessly).
	ClearChanges(ctx context.Context, migration string, token uint64, owners []string, shard int) error
	// Replay applies on shard to the oldest changes of owners recorded on shard from, up to
	// limit of them, in one transaction on to with CopyChunk's checks (a changed row that
	// exists on from is written on to, one that does not is deleted there), then deletes
	// exactly those changes on from, in a transaction that refuses a stale token and owners
	// not fenced Exporting or Moved by migration there. It returns how many it applied:
	// fewer than limit when no committed change was left. Changes are taken, not read past a
	// position, because one recorded first may commit last (PostgreSQL's sequences).
	Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (n int, err error)
	// Sums returns, for each of owners in order, how many rows it has on shard and a digest
	// of their content: every copied column of every row, in no particular order, so that
	// two shards holding the same rows have equal sums.
	Sums(ctx context.Context, owners []string, shard int) ([]Sum, error)
	// FirstDiff returns the first key, in the key order, at which owner's rows on shards a
	// and b differ (a row on one only, or different content), or "" if none does.
	FirstDiff(ctx context.Context, owner string, a, b int) (key string, err error)
	// DeleteChunk deletes up to limit rows of owners on shard in one short transaction and
	// returns how many it deleted: 0 when none is left. It refuses a stale token, and
	// owners not all fenced (Importing or Moved) by migration on shard.
	DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error)
	// Marks returns the mark of each of owners in migration, in the order of owners.
	Marks(ctx context.Context, migration string, owners []string) ([]Mark, error)
	// SetMarks durably records mark for owners in migration, in one transaction; it never
	// lowers a mark. It refuses a stale token (checked in the control database).
	SetMarks(ctx context.Context, migration string, owners []string, mark Mark, token uint64) error
	// Finished records on every shard that serves p that p's migration is finished: the
	// next migration's mover may claim them, accesses routed by the next migration's before
	// sharder are accepted before its mover has claimed, and accesses of p labelled Arriving
	// are accepted from then on (Placement.Accepts). The store remembers every
	// migration it recorded finished: it refuses a claim of one (ErrFinished), and an
	// access routed by one that is not the migration it serves.
	//
	// finisher is the number Finish passed to Finishing, or 0 if it recorded none. A shard
	// not finished yet whose record of being finished is not finisher's (another Finish
	// replaced it, or ended it) refuses, with an error wrapping ErrMoverRunning: owners may
	// have landed on it since this Finish listed it.
	Finished(ctx context.Context, p Placement, finisher uint64) error
	// Finishing records on every shard that serves p, unfinished, that the Finish named
	// finisher (a number of its own, never 0) is looking for owners left out (on),
	// replacing another Finish's record, or that it no longer is (off), where the record
	// is still finisher's. While a shard records one, it refuses a Leaving access of an
	// owner it holds no fence for, with a *PlacementError whose Finishing is true, and the
	// change to on waits for the accesses under way: no new owner's rows land on its old
	// shard behind Finish's back, and a Finish that gives up cannot end another's record.
	Finishing(ctx context.Context, p Placement, finisher uint64, on bool) error
}

// DeleteSizer is a SharedStore that knows how many rows one deletion of old copies should
// handle on its engine when SharedOptions.DeleteRows is zero: more than ChunkRows where no
// access waits for the rows of owners a shard no longer serves.
type DeleteSizer interface {
	// DeleteRows returns the rows of one deletion, given the ChunkRows in effect; NewShared
	// keeps it within [1, MaxChunkRows].
	DeleteRows(chunkRows int) int
}

// AccessMeter is a SharedStore that can tell whether the application is using a shard, so
// that Run copies in chunks of IdleChunkRows while it is not (see SharedOptions).
type AccessMeter interface {
	// Accessing reports whether an access (Do) is under way on shard now, in any process.
	// A store that cannot tell returns true.
	Accessing(ctx context.Context, shard int) (bool, error)
}

// OwnersDeleter is a SharedStore that can delete owners' rows whole, cheaper than in
// DeleteChunk's chunks cut at a limit (which find each row twice: in the key order, then by
// its address), where Run knows that they are few: after the window, whose sums counted the
// owners' rows on their old shard, which adds none since it no longer serves them.
type OwnersDeleter interface {
	// DeleteOwners deletes every row of owners on shard in one short transaction, with
	// DeleteChunk's checks, if there are at most most of them, and returns how many it
	// deleted; if there are more, it deletes none and returns whole false. Run gives as
	// most the rows the window's sums counted there: more is a write that went around the
	// fence after the window, and Run stops with ErrCopyMismatch rather than delete it.
	DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (n int, whole bool, err error)
}

// SumKeeper is the part of a SharedStore that keeps the sums the window found of owners on
// their old shard, durably, until their old copies are deleted: a deletion that a later Run
// resumes (after a stop between the commit and the deletion) first checks that the old copy
// is still what the window compared, by content, and stops with ErrCopyMismatch, deleting
// nothing, if a write went around its fence since. A deletion in chunks replaces them
// before each chunk with the count of the rows left (a Sum whose Digest is empty: a part
// of a copy is not the copy the window's sums describe), so that one resumed part way
// stops where the old copy holds a row more than that.
type SumKeeper interface {
	// KeepSums records sums of owners on their old shard, in one transaction that refuses a
	// stale token, replacing what it kept of them before. SetMarks deletes the sums of
	// owners it marks Done.
	KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []Sum) error
	// KeptSums returns, for each of owners in order, the sums KeepSums recorded of it on
	// shard for migration and not deleted since, and whether there are any.
	KeptSums(ctx context.Context, migration string, owners []string, shard int) ([]Sum, []bool, error)
}

// Sum is what a shard holds of one owner: its rows and an order-independent digest of their
// content (SharedStore.Sums).
type Sum struct {
	Rows   int64
	Digest string
}

// Upper bounds of SharedOptions, beyond which NewShared returns an error wrapping ErrConfig.
const (
	MaxChunkRows = 100_000
	MaxMoverName = 256
	MaxBatch     = 10_000
	MaxFenceWait = time.Hour
	MaxYield     = 100
)

// SharedOptions tune a Shared migration. The zero value is valid: one mover of election
// epoch 0 named after its process, a 10 s lease, chunks of 1000 rows, marks in batches of 256
// owners, a 10 s wait for an owner being moved.
type SharedOptions struct {
	// Token is the mover's election epoch, which grows with each new mover (coord's
	// Mover.Epoch). A claim of an older one than the store has seen is refused; a newer one
	// takes the migration over from the mover that holds it, at once; one of the same epoch
	// is refused while the holder's lease runs (two movers started by mistake). The store
	// issues the fencing token every write of the mover carries (MoverLock). Processes that
	// only call Do need none.
	Token uint64
	// Mover names this mover in the store and in the error a second mover gets, up to
	// MaxMoverName bytes. Empty means host, pid and a random part.
	Mover string
	// Lease is how long the mover's claim holds without a renewal, in [0, MaxLease]: Run
	// renews it every third of it, and a mover that dies holds the migration that long.
	// Zero means 10 s.
	Lease time.Duration
	// Concurrency is how many owners Run moves at once, in [0, MaxConcurrency]. Zero means 1.
	Concurrency int
	// ChunkRows is how many rows one copy or delete transaction handles, in [0,
	// MaxChunkRows]. Zero means 1000.
	ChunkRows int
	// IdleChunkRows is how many rows one copy transaction handles while the application is
	// not using its shards, in [0, MaxChunkRows], if the store can tell (AccessMeter): Run
	// asks the store about a shard every 10 ms at most and doubles the chunks, from
	// ChunkRows up to IdleChunkRows, for every 5 answers in a row that saw no access on
	// either shard; the first access seen brings them back to ChunkRows. A grown chunk that
	// takes over 100 ms halves the most they may grow to (wide rows: the chunk's transaction
	// and memory stay bounded), and chunks of that most in under 50 ms double it again.
	// Bigger chunks move the rows faster (less of each transaction's fixed cost a row) and
	// make the accesses wait longer for the CPU and the locks. Zero means 10 times
	// ChunkRows, at most MaxChunkRows; ChunkRows or less keeps every chunk at ChunkRows.
	IdleChunkRows int
	// DeleteRows is how many rows one transaction deleting old copies handles, in [0,
	// MaxChunkRows]. Those rows belong to owners their shard no longer serves, so no access
	// waits for them on PostgreSQL, where bigger deletions cost the application nothing but
	// the work (10 times ChunkRows moved 1M rows 3-13% faster; see docs/rebalancing.md); on
	// SQLite a deletion holds the file's one write lock, as a copy does. Owners whose rows
	// the window counted and that fit in DeleteRows together go in one deletion, whole, if
	// the store is an OwnersDeleter. Zero means what the store says if it is a DeleteSizer,
	// else ChunkRows.
	DeleteRows int
	// Batch is how many owners' marks one statement reads or writes, in [0, MaxBatch]. Zero
	// means 256.
	Batch int
	// Group is how many owners of one pair of shards Run moves together, in [0, MaxBatch]:
	// their fences change in one transaction per step and their rows are counted in one
	// statement, and they are served by no shard over one window (their tails). Zero means 16;
	// 1 moves owners one by one.
	Group int
	// IdleGroup is how many owners Run moves together while the application is not using
	// the shards, in [0, MaxBatch], if the store can tell (AccessMeter), as IdleChunkRows:
	// a group doubles, from Group up to IdleGroup, for every 5 answers in a row that saw no
	// access on either of its shards, and the first access seen brings the groups back to
	// Group. A bigger group pays the fixed cost of its steps (each a few statements on each
	// shard) once for more owners, and keeps more rows over a longer window, where no access
	// waits while the shards are idle. Zero means 4 times Group, at most MaxBatch; Group or
	// less keeps every group at Group.
	IdleGroup int
	// Yield, in [0, MaxYield], makes the mover wait after each chunk it copies or deletes
	// while the old shard serves (not in the exclusive window) Yield times as long as the
	// chunk took, leaving the shards to the application: 1 halves the mover's share of a
	// shard. It matters most on SQLite, whose one write lock per database file a foreground
	// write waits for while a mover's chunk holds it. Zero means no wait.
	Yield float64
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
	// Windows counts those exclusive windows: one per group of owners committed together, one
	// per owner resumed alone. ExclusiveQuantile tells how long they were.
	Windows int64
	windows [windowBuckets]int64
}

// The exclusive windows' histogram: bucket i holds the windows in (b(i-1), b(i)], b(i) =
// 100 µs × 2^(i/8) (each bucket under 9% wide), bucket 0 those up to 100 µs, and the last
// one everything above its start (about an hour).
const (
	windowBuckets = 8 * 25
	windowBase    = 100 * time.Microsecond
)

func windowBucket(d time.Duration) int {
	if d <= windowBase {
		return 0
	}
	return min(int(math.Ceil(8*math.Log2(float64(d)/float64(windowBase)))), windowBuckets-1)
}

// ExclusiveQuantile returns the q quantile, 0 < q <= 1, of the exclusive windows: the end of
// the histogram bucket that holds it (at most 9% above it), or MaxExclusive if less; 0 if
// there was no window or q is out of range.
func (s SharedStats) ExclusiveQuantile(q float64) time.Duration {
	if s.Windows == 0 || !(q > 0 && q <= 1) {
		return 0
	}
	rank := int64(math.Ceil(q * float64(s.Windows)))
	var seen int64
	for i, n := range s.windows {
		if seen += n; seen >= rank && i < windowBuckets-1 {
			return min(time.Duration(float64(windowBase)*math.Exp2(float64(i)/8)), s.MaxExclusive)
		}
	}
	return s.MaxExclusive
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
	placement     Placement
	finished      atomic.Bool
	moving        ownerLocks // the owners Run's movers are moving; Do takes none

	moved, rows  atomic.Int64
	maxExclusive atomic.Int64 // nanoseconds
	windows      [windowBuckets]atomic.Int64
}

// NewShared returns a Shared migration with the given ID from before to after over store.
// Every process (the application's and the mover's) makes one with the same ID and sharders;
// the ID names the marks and the tokens in store. The arguments are checked as New checks
// them; bad ones are errors wrapping ErrConfig.
func NewShared[Tx any](id string, before, after shard.Sharder, store SharedStore[Tx], opts SharedOptions) (*Shared[Tx], error) {
	switch {
	case id == "":
		return nil, fmt.Errorf("rebalance: empty migration ID: %w", ErrConfig)
	case isNil(before) || isNil(after) || isNil(store):
		return nil, fmt.Errorf("rebalance: migration %q: nil sharder or store: %w", id, ErrConfig)
	case shareState(before, after):
		return nil, fmt.Errorf("rebalance: migration %q: before and after are the same sharder, or wrap the same one: resizing one resizes the other, so nothing would move: make a second sharder with the new count: %w", id, ErrConfig)
	case opts.Concurrency < 0 || opts.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("rebalance: migration %q: Concurrency %d: want [0, %d]: %w", id, opts.Concurrency, MaxConcurrency, ErrConfig)
	case opts.ChunkRows < 0 || opts.ChunkRows > MaxChunkRows || opts.DeleteRows < 0 || opts.DeleteRows > MaxChunkRows ||
		opts.IdleChunkRows < 0 || opts.IdleChunkRows > MaxChunkRows:
		return nil, fmt.Errorf("rebalance: migration %q: ChunkRows %d, IdleChunkRows %d and DeleteRows %d: want [0, %d]: %w",
			id, opts.ChunkRows, opts.IdleChunkRows, opts.DeleteRows, MaxChunkRows, ErrConfig)
	case opts.Batch < 0 || opts.Batch > MaxBatch || opts.Group < 0 || opts.Group > MaxBatch || opts.IdleGroup < 0 || opts.IdleGroup > MaxBatch:
		return nil, fmt.Errorf("rebalance: migration %q: Batch %d, Group %d and IdleGroup %d: want [0, %d]: %w", id, opts.Batch, opts.Group, opts.IdleGroup, MaxBatch, ErrConfig)
	case !(opts.Yield >= 0 && opts.Yield <= MaxYield):
		return nil, fmt.Errorf("rebalance: migration %q: Yield %v: want [0, %d]: %w", id, opts.Yield, MaxYield, ErrConfig)
	case opts.FenceWait < 0 || opts.FenceWait > MaxFenceWait:
		return nil, fmt.Errorf("rebalance: migration %q: FenceWait %v: want [0, %v]: %w", id, opts.FenceWait, MaxFenceWait, ErrConfig)
	case opts.Lease < 0 || opts.Lease > MaxLease:
		return nil, fmt.Errorf("rebalance: migration %q: Lease %v: want [0, %v]: %w", id, opts.Lease, MaxLease, ErrConfig)
	case len(opts.Mover) > MaxMoverName:
		return nil, fmt.Errorf("rebalance: migration %q: Mover name of %d bytes: want at most %d: %w", id, len(opts.Mover), MaxMoverName, ErrConfig)
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	opts.ChunkRows = cmp.Or(opts.ChunkRows, 1000)
	opts.IdleChunkRows = cmp.Or(opts.IdleChunkRows, min(10*opts.ChunkRows, MaxChunkRows))
	if ds, ok := store.(DeleteSizer); ok && opts.DeleteRows == 0 {
		opts.DeleteRows = min(max(ds.DeleteRows(opts.ChunkRows), 1), MaxChunkRows)
	}
	opts.DeleteRows = cmp.Or(opts.DeleteRows, opts.ChunkRows)
	opts.Batch = cmp.Or(opts.Batch, 256)
	opts.Group = cmp.Or(opts.Group, 16)
	opts.IdleGroup = cmp.Or(opts.IdleGroup, min(4*opts.Group, MaxBatch))
	opts.FenceWait = cmp.Or(opts.FenceWait, 10*time.Second)
	opts.Lease = cmp.Or(opts.Lease, 10*time.Second)
	opts.Mover = cmp.Or(opts.Mover, defaultMover())
	return &Shared[Tx]{id: id, before: before, after: after, store: store, opts: opts,
		placement: PlacementOf(id, before, after)}, nil
}

// ID returns the migration's ID.
func (m *Shared[Tx]) ID() string { return m.id }

// Placement returns the placement this migration routes by, which its accesses carry.
func (m *Shared[Tx]) Placement() Placement { return m.placement }

// Stats returns what this value's Runs have done so far.
func (m *Shared[Tx]) Stats() SharedStats {
	st := SharedStats{Moved: m.moved.Load(), Rows: m.rows.Load(), MaxExclusive: time.Duration(m.maxExclusive.Load())}
	for i := range m.windows {
		st.windows[i] = m.windows[i].Load()
		st.Windows += st.windows[i]
	}
	return st
}

// Do calls fn in a transaction on the shard that serves owner now, with that shard, and
// returns fn's error; fn's writes commit when it returns nil. An owner whose shard does not
// change is accessed on it, its fence read in the same transaction. An owner whose shard
// changes is tried on its old shard, then, if that one says moved, on its new shard; while
// neither serves it (the mover is between fencing the old shard and committing the new one,
// a few ms) Do backs off and tries again, up to SharedOptions.FenceWait, then returns an
// error wrapping ErrFenced that says so. If the old shard says the migration was finished
// (by another process's Finish), this Shared takes it as finished and routes by the after
// sharder alone from then on, as it does once its own Finish returned nil, labelling the
// accesses Arriving (Placement): a shard that has not recorded the finish yet refuses them,
// and Do tries again up to FenceWait, then returns its *PlacementError. fn may be called more than once (after an error
// wrapping ErrFenced, or if the store runs an access again); it must not call Do, Run or Finish.
func (m *Shared[Tx]) Do(ctx context.Context, owner string, fn func(tx Tx, shard int) error) error {
	if m.finished.Load() {
		return m.arrive(ctx, owner, fn)
	}
	from, to := m.before.Locate(owner), m.after.Locate(owner)
	if from == to {
		return m.access(ctx, owner, to, false, fn)
	}
	deadline := time.Now().Add(m.opts.FenceWait)
	wait := 500 * time.Microsecond
	s, switched := from, false
	for {
		err := m.access(ctx, owner, s, false, fn)
		if pe := (*PlacementError)(nil); s == from && errors.As(err, &pe) && pe.Served.Migration == m.id {
			switch {
			case pe.Finished:
				// Finished by another process: the after sharder alone routes from now on.
				m.finished.Store(true)
				return m.arrive(ctx, owner, fn)
			case pe.Finishing:
				// Until Finish decides, the owner is served by its old shard or by none.
				if err := m.backoff(ctx, owner, deadline, &wait, err); err != nil {
					return err
				}
				continue
			}
		}
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
		if err := m.backoff(ctx, owner, deadline, &wait, err); err != nil {
			return err
		}
		s, switched = next, false
	}
}

// backoff waits *wait, doubled up to 50 ms for the next time, unless the deadline passed
// (an error wrapping err) or ctx is done.
func (m *Shared[Tx]) backoff(ctx context.Context, owner string, deadline time.Time, wait *time.Duration, err error) error {
	if time.Now().After(deadline) {
		from, to := m.before.Locate(owner), m.after.Locate(owner)
		return fmt.Errorf("rebalance: migration %q: owner %q is being moved from shard %d to %d and neither serves it after %v (is the mover stopped between its steps? run it again): %w",
			m.id, owner, from, to, m.opts.FenceWait, err)
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("rebalance: migration %q: owner %q: waiting for its move: %w", m.id, owner, ctx.Err())
	case <-time.After(*wait):
	}
	*wait = min(2**wait, 50*time.Millisecond)
	return nil
}

// access runs fn on shard s for owner. An access routed by the after sharder alone, the
// migration held finished, is Arriving; otherwise an owner the migration moves, accessed on
// its before shard, is Leaving there.
func (m *Shared[Tx]) access(ctx context.Context, owner string, s int, arriving bool, fn func(tx Tx, shard int) error) error {
	p := m.placement
	p.Arriving = arriving
	p.Leaving = !arriving && s == m.before.Locate(owner) && s != m.after.Locate(owner)
	return m.store.Access(ctx, p, owner, s, func(tx Tx) error { return fn(tx, s) })
}

// arrive runs fn on owner's after shard, the migration held finished (an Arriving access).
// A shard that serves the migration but has not recorded it finished yet (a Finish under
// way in another process, which another shard told this one of) refuses it; arrive waits
// for the record, up to FenceWait, then returns that refusal. The refusal's Finished may
// already say finished: a store may read what the shard serves after its check, and the
// finish may have committed in between.
func (m *Shared[Tx]) arrive(ctx context.Context, owner string, fn func(tx Tx, shard int) error) error {
	to := m.after.Locate(owner)
	deadline := time.Now().Add(m.opts.FenceWait)
	wait := 500 * time.Microsecond
	for {
		err := m.access(ctx, owner, to, true, fn)
		pe := (*PlacementError)(nil)
		if !errors.As(err, &pe) || pe.Served != m.placement || pe.Finishing || pe.Shard != to {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rebalance: migration %q: owner %q: shard %d has not recorded the migration finished after %v, though another shard has (is a Finish stopped part way? run it again): %w",
				m.id, owner, to, m.opts.FenceWait, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rebalance: migration %q: owner %q: waiting for shard %d to record the migration finished: %w", m.id, owner, to, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// String returns the state, and the migration that set it: "moved by \"grow-5-10\"".
func (f Fence) String() string {
	if f.Migration == "" {
		return f.State.String()
	}
	return fmt.Sprintf("%v by %q", f.State, f.Migration)
}

// Finish checks the marks of every owner of owners whose shard changes, a batch at a time,
// that no shard holds rows of an owner the after sharder places elsewhere (an owner left out
// of owners; OwnerLister) and that no owner is fenced part way (FenceLister). If so, it
// records on the shards that the migration is finished (SharedStore.Finished: the next
// migration's mover may claim them), from then on Do routes by the after sharder alone
// (still reading the fence there; the accesses Arriving), and Finish returns nil. Otherwise
// nothing changes and it returns an *UnfinishedError. owners must not be nil (ErrConfig).
//
// Accesses of new owners to their old shards wait while it lists the shards
// (SharedStore.Finishing): a Finish stopped part way (its process killed) leaves them
// waiting, up to FenceWait each, until Finish runs again.
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
	// New owners' accesses to their old shards wait while the shards are listed, so that
	// none lands there between the listing and the finish, and a mover's fence is refused (a
	// Run of another process, started or resumed meanwhile). The record is this Finish's
	// own: one that gives up (a mover deposed while a newer one finishes) ends its record
	// only, and Finished refuses where another's replaced it.
	finisher := cmp.Or(rand.Uint64(), 1)
	if err := m.store.Finishing(ctx, m.placement, finisher, true); err != nil {
		return fmt.Errorf("rebalance: migration %q: record on the shards that it is being finished: %w", m.id, err)
	}
	// Owners fenced part way are looked for once no fence can change: those a Run fenced
	// before the record, seen here, and none after it.
	shards := max(m.before.Shards(), m.after.Shards(), m.store.Shards())
	err := leftBehind(ctx, m.store, m.after, shards, m.movedOwners, left)
	if err == nil {
		err = unsettled(ctx, m.store, shards, left)
	}
	if err != nil || left.misplaced() {
		if ferr := m.store.Finishing(context.WithoutCancel(ctx), m.placement, finisher, false); ferr != nil {
			return fmt.Errorf("rebalance: migration %q: %w (and record that it is not being finished: %w)", m.id, cmp.Or(err, error(left)), ferr)
		}
		return cmp.Or(err, error(left))
	}
	if err := m.store.Finished(ctx, m.placement, finisher); err != nil {
		return fmt.Errorf("rebalance: migration %q: record on the shards that it is finished: %w", m.id, err)
	}
	m.finished.Store(true)
	return nil
}

// movedOwners is a movedFunc: it reads the owners' marks.
func (m *Shared[Tx]) movedOwners(ctx context.Context, owners []string) ([]bool, error) {
	marks, err := m.store.Marks(ctx, m.id, owners)
	if err == nil && len(marks) != len(owners) {
		err = fmt.Errorf("store returned %d marks for %d owners", len(marks), len(owners))
	}
	if err != nil {
		return nil, err
	}
	done := make([]bool, len(owners))
	for i, mark := range marks {
		done[i] = mark == Done
	}
	return done, nil
}
