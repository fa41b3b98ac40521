package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardkit/shard"
)

var (
	// ErrConfig reports an argument that cannot work: given to New, an empty ID, a nil
	// sharder or store, one sharder (or two wrappers of one) before and after, an option out
	// of range or an unknown Mode; given to Run or Finish, a nil owners sequence; found by a
	// Shared Run, an owner whose rows its before sharder does not place.
	ErrConfig = errors.New("invalid migration")
	// ErrMark reports a mark that a Store returned outside Unmoved, Copied and Done.
	ErrMark = errors.New("invalid mark")
	// ErrUnfinished reports owners left unmoved when Finish is called; the error is an
	// *UnfinishedError that says how many and which. Repin.Drain wraps it too, naming the
	// owners still on the drained shard after its last batch.
	ErrUnfinished = errors.New("owners left to move")
	// ErrFinished reports a Run after a successful Finish (of this value or, over a
	// FinishRecorder, of any Migration of the ID, in any process), when the marks may
	// already be gone and moving again would copy an empty old shard over the data; also a
	// claim of a migration that the store recorded finished, by any process
	// (MoverLock.Claim).
	ErrFinished = errors.New("migration finished")
	// ErrCopyMismatch reports a Copy after which the new shard does not hold as many of the
	// owner's rows as the old one: the Store's Copy lost or left rows, or something wrote to
	// the owner outside the Migration. The owner stays Unmoved, served by its old shard,
	// which keeps its rows.
	ErrCopyMismatch = errors.New("copy does not match its source")
	// ErrCopyLost reports an owner marked Copied whose new shard now holds fewer of its rows
	// than the old copy a crash left behind: the new shard lost data since the copy (its
	// file deleted or truncated, its log lost, a restore from an older backup). The old copy
	// is kept; restore the new shard, or copy the owner back by hand, before running again.
	ErrCopyLost = errors.New("new shard lost the copy")
	// ErrSourceEmpty reports a Copy that found no row of the owner on its source while its
	// destination holds some, or whose source lost rows while it read them: it changed
	// nothing. A twin of the Migration (the mover started twice) that moved the owner and
	// deleted its old copy meanwhile looks like that, and copying "nothing" (or a part) over
	// the destination would lose rows.
	ErrSourceEmpty = errors.New("copy source holds no row while its destination does")
	// ErrStrayRows reports a Copy that found rows of the owner on its destination that no
	// copy of its own wrote (a Store that can tell: sqlstore's does): a process routed the
	// owner there by a placement not in force, or it is served there already. Copying over
	// them would lose them; the Copy changed nothing.
	ErrStrayRows = errors.New("copy destination holds rows no copy wrote")
)

// Upper bounds of Options, beyond which New returns an error wrapping ErrConfig. More movers
// than a database has connections only wait for each other; a stripe is 24 bytes, and 65536
// of them (1.5 MiB) already make it rare that two of a few hundred owners accessed at once
// share one.
const (
	MaxConcurrency = 1024
	MaxStripes     = 1 << 16
)

// Mode says when a Migration moves an owner.
type Mode uint8

const (
	// Async moves owners only in Run; until then an owner is served by its old shard.
	Async Mode = iota
	// Lazy moves an owner on its first Do, which then uses the new shard; Run sweeps the rest.
	Lazy
)

// String returns "async", "lazy", or "mode(n)" for a value out of range.
func (m Mode) String() string {
	switch m {
	case Async:
		return "async"
	case Lazy:
		return "lazy"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Options tune a Migration. The zero value is valid: Async, one mover, no progress.
type Options struct {
	Mode Mode
	// Concurrency is how many owners Run moves at once, in [0, MaxConcurrency]; Run never
	// starts more movers than owners change shard. Zero means 1.
	Concurrency int
	// Progress, if not nil, is called by Run after each owner that changes shard, one call
	// at a time. It should return quickly: the movers wait for it.
	Progress func(Progress)
	// Stripes is the number of per-owner locks, in [0, MaxStripes]: owners share them by
	// hash, so memory stays fixed however many owners there are, and two owners in one
	// stripe at worst wait for each other's move. Zero means 1024. Migration values of one
	// ID in one process share their locks: while one of them is reachable, a later New of
	// that ID uses its locks, and their number, whatever Stripes it is given.
	Stripes int
	// Mover and Lease name this mover and bound its claim, as SharedOptions' do, when the
	// Store is a MoverLock: Run then claims the migration first, and a second Run of the
	// same ID (the mover started twice) is refused with a *MoverError while this one runs.
	// The claim carries the migration's Placement: a store whose shards serve another
	// migration, unfinished, refuses it with a *PlacementError (see Placement.Accepts), so a
	// migration started before the one in force finished moves nothing.
	Mover string
	Lease time.Duration
}

// Progress is how far Run has gone: Done of the Total owners that change shard are moved.
type Progress struct {
	Done, Total int
}

// Stats counts the owners that this Migration value moved, by who moved them: Run, or Do
// (in Lazy mode, and in either mode for an owner whose move a crash left Copied).
type Stats struct {
	ByRun, Lazily int64
}

// Migration routes each owner to its old or its new shard while a resize moves the data,
// following the owner's durable Mark. All its methods are safe for concurrent use, and
// Migration values of one ID in one process share their per-owner locks.
//
// before and after must not be resized while the Migration is in use.
type Migration struct {
	id            string
	before, after shard.Sharder
	store         Store
	opts          Options
	locks         *stripeTable // shared by every value of this ID in the process
	finished      *atomic.Bool // shared by the values of this ID over store (locks), but a Repin's batch's own
	finishRead    atomic.Bool  // whether Do has asked the FinishRecorder, if any
	placementRead recheck      // when Do last found the placement served, if checked
	claimMu       sync.Mutex   // serializes claimOnce
	claimed       atomic.Bool  // a claim of this value recorded the placement on the shards
	byRun, lazily atomic.Int64
	bound         binding // kept while Do runs functions on old shards

	// placement is what the claim records and Do checks: PlacementOf the ID, InProcess.
	placement Placement
	// repin says this is a batch of a Repin (see Repin.migration): its Finish checks the
	// owners' marks even once the batch is recorded finished.
	repin bool
}

// New returns a Migration with the given ID from before to after. The ID names the
// migration's marks in store: a restart after a crash must use the same ID, and the next
// migration a new one.
//
// before and after must share no state, so that before keeps the old placement while after
// has the new one: typically after is a second sharder of the same strategy, made with the
// new count. New checks this as far as it can without calling them: it rejects one sharder
// given twice, and two wrappers of one sharder (such as ByPrefix(s) and ByPrefix(s)), looking
// through struct fields that hold a Sharder. It never compares sharders with ==, which
// panics on a comparable value that holds an uncomparable one.
func New(id string, before, after shard.Sharder, store Store, opts Options) (*Migration, error) {
	return newMigration(id, before, after, store, opts, 0, 0)
}

// newMigration is New for a caller that has the Fingerprints of before and after already
// (0: not yet).
func newMigration(id string, before, after shard.Sharder, store Store, opts Options, beforeFP, afterFP uint64) (*Migration, error) {
	switch {
	case id == "":
		return nil, fmt.Errorf("rebalance: empty migration ID: %w", ErrConfig)
	case isNil(before) || isNil(after) || isNil(store):
		return nil, fmt.Errorf("rebalance: migration %q: nil sharder or store: %w", id, ErrConfig)
	case shareState(before, after):
		return nil, fmt.Errorf("rebalance: migration %q: before and after are the same sharder, or wrap the same one: resizing one resizes the other, so nothing would move: make a second sharder with the new count: %w", id, ErrConfig)
	case opts.Mode > Lazy:
		return nil, fmt.Errorf("rebalance: migration %q: unknown %v: %w", id, opts.Mode, ErrConfig)
	case opts.Concurrency < 0 || opts.Concurrency > MaxConcurrency || opts.Stripes < 0 || opts.Stripes > MaxStripes:
		return nil, fmt.Errorf("rebalance: migration %q: Concurrency %d and Stripes %d: want [0, %d] and [0, %d]: %w",
			id, opts.Concurrency, opts.Stripes, MaxConcurrency, MaxStripes, ErrConfig)
	case opts.Lease < 0 || opts.Lease > MaxLease:
		return nil, fmt.Errorf("rebalance: migration %q: Lease %v: want [0, %v]: %w", id, opts.Lease, MaxLease, ErrConfig)
	case len(opts.Mover) > MaxMoverName:
		return nil, fmt.Errorf("rebalance: migration %q: Mover name of %d bytes: want at most %d: %w", id, len(opts.Mover), MaxMoverName, ErrConfig)
	}
	opts.Lease = cmp.Or(opts.Lease, 10*time.Second)
	opts.Mover = cmp.Or(opts.Mover, defaultMover())
	opts.Concurrency = max(opts.Concurrency, 1)
	if opts.Stripes == 0 {
		opts.Stripes = 1024
	}
	if beforeFP == 0 {
		beforeFP = Fingerprint(before)
	}
	if afterFP == 0 {
		afterFP = Fingerprint(after)
	}
	locks := lockTable(id, opts.Stripes)
	return &Migration{id: id, before: before, after: after, store: store, opts: opts, locks: locks,
		finished: locks.finishedOver(store), placement: Placement{Migration: id, Before: beforeFP, After: afterFP, InProcess: true}}, nil
}

// sharderType is the interface a field must implement for shareState to look into it.
var sharderType = reflect.TypeFor[shard.Sharder]()

// isNil reports whether v is nil, or an interface holding a nil pointer, map, slice, channel
// or function (a typed nil): a Store or a Sharder of that kind fails at its first call, so
// the constructors refuse it up front as they refuse an untyped nil.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// shareState reports whether a and b are one sharder, or wrap one: whether a sharder
// reachable from a through fields that hold a Sharder is identical to one reachable from b.
func shareState(a, b shard.Sharder) bool {
	bs := wrapped(reflect.ValueOf(b), nil, 4)
	for _, x := range wrapped(reflect.ValueOf(a), nil, 4) {
		for _, y := range bs {
			if identical(x, y) {
				return true
			}
		}
	}
	return false
}

// wrapped appends v, and what its struct fields (through a pointer) that implement Sharder
// hold, down to depth levels, to out.
func wrapped(v reflect.Value, out []reflect.Value, depth int) []reflect.Value {
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return out
		}
		v = v.Elem()
	}
	out = append(out, v)
	s := v
	if s.Kind() == reflect.Pointer && !s.IsNil() {
		s = s.Elem()
	}
	if depth == 0 || s.Kind() != reflect.Struct {
		return out
	}
	for i := range s.NumField() {
		if f := s.Field(i); f.Type().Implements(sharderType) {
			out = wrapped(f, out, depth-1)
		}
	}
	return out
}

// identical reports whether x and y are the same sharder: the same pointer, map or slice,
// or equal values of a type that can be compared without panicking.
func identical(x, y reflect.Value) bool {
	if x.Type() != y.Type() {
		return false
	}
	switch x.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return x.Pointer() == y.Pointer()
	case reflect.Slice:
		return x.Pointer() == y.Pointer() && x.Len() == y.Len()
	}
	return x.Comparable() && y.Comparable() && x.Equal(y)
}

// ID returns the migration's ID.
func (m *Migration) ID() string { return m.id }

// Stats returns how many owners this Migration value has moved so far.
func (m *Migration) Stats() Stats {
	return Stats{ByRun: m.byRun.Load(), Lazily: m.lazily.Load()}
}

func (m *Migration) lock(owner string) *sync.RWMutex { return m.locks.of(owner) }

// Do calls fn with the shard that serves owner now, and returns fn's error. In Lazy mode it
// first moves owner if it has not moved yet; in either mode it first finishes the move of an
// owner that a crash left Copied (it deletes the old copy), so that nothing writes to the new
// shard while an old copy waits to be checked against it. While fn runs, owner's move cannot
// start, so whatever fn writes is on the shard the move reads; accesses of one owner run
// concurrently with each other. fn must not call Do, Run or Finish: it could wait for itself.
// The first Do of a value, and the first after each PlacementRecheck, asks a Store that is a
// PlacementChecker whether its shards serve the migration, and if not returns its
// *PlacementError, calling no function; over a ProcessBinder it binds this process to the
// migration, and returns the *ProcessError while another process uses it. It
// asks a Store that is a FinishRecorder whether the migration finished, and if so routes by
// the after sharder alone from then on; in Async mode, so does each Do of an owner not
// moved yet, under its lock (a Finish through another Store value).
func (m *Migration) Do(ctx context.Context, owner string, fn func(shard int) error) error {
	if m.placementRead.due() {
		if err := m.checkPlacement(ctx); err != nil {
			return err
		}
	}
	from, to := m.before.Locate(owner), m.after.Locate(owner)
	if from == to || m.finished.Load() {
		return fn(to)
	}
	if !m.finishRead.Load() { // once per value: a restart after Finish must not read marks
		if _, err := m.recordedFinished(ctx); err != nil {
			return err
		}
		m.finishRead.Store(true)
		if m.finished.Load() {
			return fn(to)
		}
	}
	l := m.lock(owner)
	// Every release is deferred: a panic in the Store or in fn that the application
	// recovers (as net/http does) must not leave the owner locked, or Run and Finish wait
	// for it forever. held says whether the read lock is held when a panic unwinds.
	l.RLock()
	held := true
	defer func() {
		if held {
			l.RUnlock()
		}
	}()
	if m.finished.Load() { // Finish held every lock meanwhile, and finished
		return fn(to)
	}
	mark, err := m.mark(ctx, owner)
	if err == nil && mark == Unmoved && m.opts.Mode != Lazy {
		// Finish through a value that shares no flag with this one (another Store value over
		// the same databases) may have recorded the finish since this value last asked; a
		// Finish holds every lock, so what the recorder says now holds until fn returns.
		var done bool
		if done, err = m.recordedFinished(ctx); done {
			return fn(to)
		}
	}
	if err == nil && (mark == Copied || mark == Unmoved && m.opts.Mode == Lazy) {
		// A move claims the shards first, as Run does: a Lazy migration moved owners that
		// no claim announced, so another migration could claim the shards meanwhile and
		// serve a placement that does not see them.
		if err := m.claimOnce(ctx); err != nil {
			return err
		}
		held = false
		l.RUnlock()
		err = m.moveLocked(ctx, l, owner, from, to, &m.lazily)
		l.RLock()
		held = true
		mark = Done // marks only advance, so it is still Done
	}
	if err != nil {
		return err
	}
	if mark == Unmoved {
		if m.bound.hold(m.store, m.id) {
			defer m.bound.release()
		}
		return fn(from)
	}
	return fn(to)
}

// checkPlacement asks a Store that is a PlacementChecker whether its shards accept the
// migration's accesses, binds this process to it over a ProcessBinder, and remembers a yes
// for PlacementRecheck. An owner that does not change shard is checked too: it may be one
// that the migration in force moves.
func (m *Migration) checkPlacement(ctx context.Context) error {
	if pc, ok := m.store.(PlacementChecker); ok {
		if err := pc.CheckPlacement(ctx, m.placement); err != nil {
			return err // a *PlacementError names the migration
		}
	}
	if err := m.bind(ctx); err != nil {
		return err
	}
	m.placementRead.passed()
	return nil
}

// PlacementRecheck is how long the in-process routers (Migration.Do, Repin.Do) trust a
// PlacementChecker's yes before they ask again: a process that still routes by a migration
// after a newer one claimed the shards is refused from then on, within this time, rather
// than writing where the newer one's mover no longer reads. The in-process API hands the
// function a shard number, so no check can sit inside the application's own transaction:
// within that time such a write is still possible (Shared checks every access).
const PlacementRecheck = time.Second

// recheck remembers when a check last passed, and says when it is due again.
type recheck struct{ at atomic.Int64 } // nanoseconds of the monotonic clock since clockStart; 0: never

var clockStart = time.Now()

func (c *recheck) due() bool {
	at := c.at.Load()
	return at == 0 || time.Duration(int64(time.Since(clockStart))-at) >= PlacementRecheck
}

func (c *recheck) passed() { c.at.Store(max(int64(time.Since(clockStart)), 1)) }

func (c *recheck) forget() { c.at.Store(0) }

// moveLocked moves owner holding l exclusively, and releases l however move returns,
// a panic included.
func (m *Migration) moveLocked(ctx context.Context, l *sync.RWMutex, owner string, from, to int, count *atomic.Int64) error {
	l.Lock()
	defer l.Unlock()
	return m.move(ctx, owner, from, to, count)
}

// movedOwners is a movedFunc: it reads each owner's mark.
func (m *Migration) movedOwners(ctx context.Context, owners []string) ([]bool, error) {
	done := make([]bool, len(owners))
	for i, o := range owners {
		mark, err := m.mark(ctx, o)
		if err != nil {
			return nil, err
		}
		done[i] = mark == Done
	}
	return done, nil
}

func (m *Migration) mark(ctx context.Context, owner string) (Mark, error) {
	mark, err := m.store.Mark(ctx, m.id, owner)
	if err != nil {
		return 0, fmt.Errorf("rebalance: migration %q: owner %q: read mark: %w", m.id, owner, err)
	}
	if mark > Done {
		return 0, fmt.Errorf("rebalance: migration %q: owner %q: store returned %v: %w", m.id, owner, mark, ErrMark)
	}
	return mark, nil
}

// move brings owner's mark to Done, from wherever a crash left it; count is incremented if it
// moved anything. The caller holds owner's lock exclusively.
//
// Nothing is deleted before the new shard is seen to hold the rows: after a Copy the two
// shards must hold as many rows of owner (nothing else runs on owner meanwhile), and
// for an owner a crash left Copied, whose old copy may remain, the new shard must hold at
// least as many as remain (Do never runs fn on it while Copied; a crash in a Delete that is
// not atomic may have removed some of the old rows).
func (m *Migration) move(ctx context.Context, owner string, from, to int, count *atomic.Int64) error {
	mark, err := m.mark(ctx, owner)
	if err != nil || mark == Done {
		return err
	}
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("rebalance: migration %q: owner %q: %s (shard %d -> %d): %w", m.id, owner, what, from, to, err)
		}
		return nil
	}
	if mark == Unmoved {
		if err := m.store.Copy(ctx, owner, from, to); err != nil {
			if errors.Is(err, ErrSourceEmpty) || errors.Is(err, ErrStrayRows) {
				// A twin of this Migration moved the owner since its mark was read (it is
				// Copied or Done now), or rows outside the Migration are out of place.
				if now, merr := m.mark(ctx, owner); merr == nil && now > Unmoved {
					return m.move(ctx, owner, from, to, count)
				}
			}
			return step("copy", err)
		}
	}
	old, err := m.store.Count(ctx, owner, from)
	if err := step(fmt.Sprintf("count rows on shard %d", from), err); err != nil {
		return err
	}
	if mark == Unmoved || old > 0 {
		n, err := m.store.Count(ctx, owner, to)
		if err := step(fmt.Sprintf("count rows on shard %d", to), err); err != nil {
			return err
		}
		if mark == Unmoved && n != old {
			// A twin of this Migration may have deleted the old copy after this one's Copy:
			// its mark says so.
			if now, err := m.mark(ctx, owner); err == nil && now > Unmoved {
				return m.move(ctx, owner, from, to, count)
			}
		}
		switch {
		case mark == Unmoved && n != old:
			return step("verify copy", fmt.Errorf("after the copy shard %d holds %d rows of the owner, shard %d holds %d: nothing deleted: %w", to, n, from, old, ErrCopyMismatch))
		case n < old:
			return step("verify copy", fmt.Errorf("shard %d holds %d rows of the owner, the old copy on shard %d holds %d: shard %d lost rows since the copy: the old copy is kept: %w", to, n, from, old, to, ErrCopyLost))
		}
	}
	checked, _ := m.store.(CheckedDeleter)
	if mark == Unmoved {
		sum, summed, err := m.sameContent(ctx, owner, from, to)
		if err := step("verify copy", err); err != nil {
			return err
		}
		if checked != nil && summed {
			if err := step("keep the old copy's sum", checked.KeepOldSum(ctx, m.id, owner, from, sum)); err != nil {
				return err
			}
		}
		if err := step("mark copied", m.store.SetMark(ctx, m.id, owner, Copied)); err != nil {
			return err
		}
	}
	// Copied and verified: the new shard serves owner; the old copy may remain after a crash.
	del := func() error { return m.store.Delete(ctx, owner, from) }
	if checked != nil {
		del = func() error { return checked.DeleteChecked(ctx, m.id, owner, from) }
	}
	if err := step("delete old copy", del()); err != nil {
		return err
	}
	if err := step("mark done", m.store.SetMark(ctx, m.id, owner, Done)); err != nil {
		return err
	}
	count.Add(1)
	return nil
}

// sameContent returns an error wrapping ErrCopyMismatch if the store is a Summer and owner's
// rows on shards from and to differ by content, and otherwise their sum, if it has one. The
// caller holds owner's lock: nothing of this Migration writes either copy meanwhile.
func (m *Migration) sameContent(ctx context.Context, owner string, from, to int) (Sum, bool, error) {
	sm, ok := m.store.(Summer)
	if !ok {
		return Sum{}, false, nil
	}
	one := []string{owner}
	a, err := sm.Sums(ctx, one, from)
	if err != nil {
		return Sum{}, false, fmt.Errorf("sum the rows on shard %d: %w", from, err)
	}
	b, err := sm.Sums(ctx, one, to)
	if err != nil {
		return Sum{}, false, fmt.Errorf("sum the rows on shard %d: %w", to, err)
	}
	if len(a) != 1 || len(b) != 1 {
		return Sum{}, false, fmt.Errorf("store returned %d and %d sums for 1 owner", len(a), len(b))
	}
	if a[0] == b[0] {
		return a[0], true, nil
	}
	where := "(the first key that differs is unknown)"
	if key, err := sm.FirstDiff(ctx, owner, from, to); err == nil {
		where = fmt.Sprintf("first at key %q", key)
	}
	return Sum{}, false, fmt.Errorf("shard %d holds %d rows of the owner, shard %d holds %d, and they differ %s (a trigger that fires on the copy's inserts, or a column changed on one shard): nothing deleted: %w",
		to, b[0].Rows, from, a[0].Rows, where, ErrCopyMismatch)
}

// changed yields the owners whose shard differs between before and after.
func (m *Migration) changed(owners iter.Seq[string]) iter.Seq[string] {
	return func(yield func(string) bool) {
		for o := range owners {
			if m.before.Locate(o) != m.after.Locate(o) && !yield(o) {
				return
			}
		}
	}
}

// Run moves every owner of owners whose shard changes and that is not Done, up to
// Options.Concurrency at once, and reports Progress. It ranges over owners twice: once to
// count, once to move. It stops at the first error, or when ctx is done, and returns it;
// running it again resumes. After a successful Finish (of this value, or one the Store
// recorded: see FinishRecorder) it returns an error wrapping ErrFinished; owners must not
// be nil (ErrConfig). Over a MoverLock it first claims the migration with its placement,
// also when no owner changes shard (see MoverLock.Claim).
func (m *Migration) Run(ctx context.Context, owners iter.Seq[string]) error {
	if owners == nil {
		return fmt.Errorf("rebalance: migration %q: Run with nil owners: %w", m.id, ErrConfig)
	}
	if done, err := m.recordedFinished(ctx); err != nil {
		return err
	} else if done {
		return fmt.Errorf("rebalance: migration %q: Run after Finish: %w", m.id, ErrFinished)
	}
	total := 0
	for range m.changed(owners) {
		total++
	}
	// A migration that moves no owner claims too: the shards then serve its placement, and
	// its Finish records it finished, so that processes routing by its after sharder are
	// accepted (a directory resized once its removed shards are drained, say).
	if lock, ok := m.store.(MoverLock); ok {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		// The placement too, as Shared's claim: a store that serves another migration
		// unfinished refuses this one (started before that one finished, its before
		// sharder does not say where the owners are, and its copies would replace their
		// rows with what its Do wrote in the wrong place).
		_, stop, err := hold(ctx, lock, m.claim(), cancel)
		if err != nil {
			return err
		}
		m.claimed.Store(true)
		defer stop()
	}
	if total == 0 {
		return nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards done, firstErr and the Progress calls
		done     int
		firstErr error
		work     = make(chan string)
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	for range min(m.opts.Concurrency, total) {
		wg.Go(func() {
			for o := range work {
				err := m.moveLocked(ctx, m.lock(o), o, m.before.Locate(o), m.after.Locate(o), &m.byRun)
				mu.Lock()
				if err != nil {
					firstErr = cmp.Or(firstErr, err)
				} else if done++; m.opts.Progress != nil {
					m.opts.Progress(Progress{Done: done, Total: total})
				}
				mu.Unlock()
			}
		})
	}
	for o := range m.changed(owners) {
		if ctx.Err() != nil || failed() {
			break // moves under way finish; the next Run resumes
		}
		work <- o
	}
	close(work)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return cause // the claim was lost
	}
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rebalance: migration %q: stopped after %d of %d owners: %w", m.id, done, total, err)
	}
	return nil
}

// UnfinishedError is the error of a Finish that found owners not Done.
type UnfinishedError struct {
	Migration string
	Left      int      // how many of the owners given are not Done
	Owners    []string // the first of them, at most 10
	// Unlisted counts owners with rows on a shard that the after sharder does not give
	// them, found when every owner given was Done (see OwnerLister): owners not among those
	// given; and owners a Run left fenced part way (see FenceLister). UnlistedOwners names
	// the first 10, each with the shard.
	Unlisted       int
	UnlistedOwners []string
	// Returned counts owners the migration moved (marked Done) that have rows again on a
	// shard the after sharder does not give them: rows its move deleted that came back (the
	// shard restored from a backup taken before the move) or rows written around the
	// library. Running the mover does not touch them (they are moved); ReturnedOwners names
	// the first 10, each with the shard.
	Returned       int
	ReturnedOwners []string
}

// misplaced reports owners with rows where the after sharder does not place them.
func (e *UnfinishedError) misplaced() bool { return e.Unlisted > 0 || e.Returned > 0 }

// Error says how many owners are left and names the first.
func (e *UnfinishedError) Error() string {
	if e.Left > 0 {
		return fmt.Sprintf("rebalance: migration %q: %d owners not moved yet, among them %q: run the mover again", e.Migration, e.Left, e.Owners)
	}
	var what []string
	if e.Unlisted > 0 {
		what = append(what, fmt.Sprintf("%d owners have rows on a shard the after sharder does not give them, or were left fenced part way by a mover that stopped, and were not among the owners moved, among them %q: run the mover with every owner, these included", e.Unlisted, e.UnlistedOwners))
	}
	if e.Returned > 0 {
		what = append(what, fmt.Sprintf("%d owners it moved have rows again on a shard the after sharder does not give them, among them %q: rows its move deleted there that came back (the shard restored from a backup taken before the move), or rows written around the library; their rows on the after shard are the ones served, and the mover does not move them again: compare these with those, bring over what is missing, and delete these", e.Returned, e.ReturnedOwners))
	}
	return fmt.Sprintf("rebalance: migration %q: %s; then finish", e.Migration, strings.Join(what, "; "))
}

// Is makes errors.Is(err, ErrUnfinished) true.
func (e *UnfinishedError) Is(target error) bool { return target == ErrUnfinished }

// Finish checks the mark of every owner of owners whose shard changes, and, if the Store is
// an OwnerLister, that no shard holds rows of an owner the after sharder places elsewhere.
// If so, it records the finish if the Store is a FinishRecorder, from then on Do routes by
// the after sharder alone, reading no mark, and Finish returns nil. Otherwise nothing
// changes and it returns an *UnfinishedError. A migration finished already (by this value,
// or as the FinishRecorder records) is not checked again: Finish records it again (a crash
// inside RecordFinished may have recorded it on some shards only) and returns nil. owners
// must not be nil (ErrConfig): a nil sequence would check nothing and finish.
//
// The values of the ID over the same Store in this process see the finish at once (a Do
// through any of them routes by the after sharder from then on). Over a Store that is not a
// FinishRecorder only they know it: no process may make a Migration of this ID again while
// owners are written (see FinishRecorder).
func (m *Migration) Finish(ctx context.Context, owners iter.Seq[string]) error {
	if owners == nil {
		return fmt.Errorf("rebalance: migration %q: Finish with nil owners: %w", m.id, ErrConfig)
	}
	// Finished already, here or as the Store records: the marks may be gone, and owners
	// created since have none. A Repin's batch keeps its marks: its owners are checked.
	done, err := m.recordedFinished(ctx)
	if err != nil {
		return err
	}
	if done && !m.repin {
		return m.recordAgain(ctx)
	}
	left := &UnfinishedError{Migration: m.id}
	for o := range m.changed(owners) {
		mark, err := m.mark(ctx, o)
		if err != nil {
			return err
		}
		if mark != Done {
			left.Left++
			if len(left.Owners) < 10 {
				left.Owners = append(left.Owners, o)
			}
		}
	}
	if left.Left > 0 && done {
		return fmt.Errorf("rebalance: migration %q: a batch that started from this directory finished before, but %d of these owners are not moved, among them %q: move that batch's owners again, then these: %w",
			m.id, left.Left, left.Owners, ErrUnfinished)
	}
	if left.Left > 0 {
		return left
	}
	if done {
		return m.recordAgain(ctx)
	}
	// A migration no Run of this value claimed (Lazy, its owners all moved by Do; or one
	// that moves none) claims now, so that the shards serve its placement and record it
	// finished: else they go on serving the one before, and accept a process that routes
	// by that one's after sharder where this one's placed new owners.
	// ErrFinished: the shards recorded the finish and the Store did not (a crash inside
	// RecordFinished); this Finish completes the record.
	if err := m.claimOnce(ctx); err != nil && !errors.Is(err, ErrFinished) {
		return err
	}
	// Every owner's lock while the shards are listed: a new owner's first rows cannot land
	// on its old shard between the listing and the finish. Another process's can: it holds
	// none of these locks, so this one stays bound while it lists (bound before, and still
	// bound after).
	if err := m.bind(ctx); err != nil {
		return err
	}
	stripes := m.locks.stripes
	for i := range stripes {
		stripes[i].Lock()
	}
	defer func() {
		for i := range stripes {
			stripes[i].Unlock()
		}
	}()
	shards := max(m.before.Shards(), m.after.Shards())
	if c, ok := m.store.(interface{ Shards() int }); ok {
		shards = max(shards, c.Shards()) // a sharder of too few shards by a typo
	}
	if err := leftBehind(ctx, m.store, m.after, shards, m.movedOwners, left); err != nil {
		return err
	}
	if left.misplaced() {
		return left
	}
	if err := m.bind(ctx); err != nil {
		return err
	}
	if rec, ok := m.store.(FinishRecorder); ok {
		if err := rec.RecordFinished(ctx, m.id); err != nil {
			return fmt.Errorf("rebalance: migration %q: record it finished: %w", m.id, err)
		}
	}
	m.finished.Store(true)
	return nil
}

// recordAgain records the migration finished again, over a FinishRecorder: a crash inside
// RecordFinished may have left it recorded where IsFinished looks and not on every shard,
// which then serve it unfinished and refuse the next migration's claim. Recording is
// idempotent.
func (m *Migration) recordAgain(ctx context.Context) error {
	if rec, ok := m.store.(FinishRecorder); ok {
		if err := rec.RecordFinished(ctx, m.id); err != nil {
			return fmt.Errorf("rebalance: migration %q: record it finished: %w", m.id, err)
		}
	}
	return nil
}

// claim is the migration's Claim over a MoverLock.
func (m *Migration) claim() Claim {
	return Claim{Migration: m.id, Mover: m.opts.Mover, Lease: m.opts.Lease, Placement: m.placement, Process: thisProcess}
}

// claimOnce claims the migration over a Store that is a MoverLock, unless a claim of this
// value did, and releases the lease at once: the shards then serve its placement, refuse
// another migration's claim until it is finished, and record its finish.
func (m *Migration) claimOnce(ctx context.Context) error {
	lock, ok := m.store.(MoverLock)
	if !ok || m.claimed.Load() {
		return nil
	}
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if m.claimed.Load() {
		return nil
	}
	// Released at once, so a short lease: if the release's answer is lost, a Run waits for
	// it to run out.
	c := m.claim()
	c.Lease = min(c.Lease, PlacementRecheck)
	_, stop, err := hold(ctx, lock, c, func(error) {})
	if errors.Is(err, ErrMoverRunning) {
		// Another mover's lease (a Run of another value, say): its claim recorded the
		// placement on the shards.
		m.claimed.Store(true)
		return nil
	}
	if err != nil {
		return err
	}
	stop()
	m.claimed.Store(true)
	return nil
}

// recordedFinished reports whether the migration is finished: by this value, or, if the
// store is a FinishRecorder, as recorded there by any Migration of the ID.
func (m *Migration) recordedFinished(ctx context.Context) (bool, error) {
	if m.finished.Load() {
		return true, nil
	}
	rec, ok := m.store.(FinishRecorder)
	if !ok {
		return false, nil
	}
	done, err := rec.IsFinished(ctx, m.id)
	if err != nil {
		return false, fmt.Errorf("rebalance: migration %q: read whether it is finished: %w", m.id, err)
	}
	if done {
		m.finished.Store(true)
	}
	return done, nil
}
