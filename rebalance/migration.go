package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/keyhash"
)

var (
	// ErrConfig reports an argument of New that cannot work: an empty ID, a nil sharder or
	// store, the same sharder before and after, a negative option or an unknown Mode.
	ErrConfig = errors.New("invalid migration")
	// ErrMark reports a mark that a Store returned outside Unmoved, Copied and Done.
	ErrMark = errors.New("invalid mark")
	// ErrUnfinished reports owners left unmoved when Finish is called; the error is an
	// *UnfinishedError that says how many and which.
	ErrUnfinished = errors.New("owners left to move")
	// ErrFinished reports a Run after a successful Finish, when the marks may already be
	// gone and moving again would copy an empty old shard over the data.
	ErrFinished = errors.New("migration finished")
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
	// Concurrency is how many owners Run moves at once. Zero means 1.
	Concurrency int
	// Progress, if not nil, is called by Run after each owner that changes shard, one call
	// at a time. It should return quickly: the movers wait for it.
	Progress func(Progress)
	// Stripes is the number of per-owner locks: owners share them by hash, so memory stays
	// fixed however many owners there are, and two owners in one stripe at worst wait for
	// each other's move. Zero means 1024.
	Stripes int
}

// Progress is how far Run has gone: Done of the Total owners that change shard are moved.
type Progress struct {
	Done, Total int
}

// Stats counts the owners that this Migration value moved, by who moved them.
type Stats struct {
	ByRun, Lazily int64
}

// Migration routes each owner to its old or its new shard while a resize moves the data,
// following the owner's durable Mark. All its methods are safe for concurrent use.
//
// before and after must not be resized while the Migration is in use.
type Migration struct {
	id            string
	before, after shard.Sharder
	store         Store
	opts          Options
	locks         []sync.RWMutex
	finished      atomic.Bool
	byRun, lazily atomic.Int64
}

// New returns a Migration with the given ID from before to after. The ID names the
// migration's marks in store: a restart after a crash must use the same ID, and the next
// migration a new one.
func New(id string, before, after shard.Sharder, store Store, opts Options) (*Migration, error) {
	switch {
	case id == "":
		return nil, fmt.Errorf("rebalance: empty migration ID: %w", ErrConfig)
	case before == nil || after == nil || store == nil:
		return nil, fmt.Errorf("rebalance: migration %q: nil sharder or store: %w", id, ErrConfig)
	case reflect.TypeOf(before).Comparable() && before == after:
		return nil, fmt.Errorf("rebalance: migration %q: before and after are the same sharder: resize a second one: %w", id, ErrConfig)
	case opts.Mode > Lazy:
		return nil, fmt.Errorf("rebalance: migration %q: unknown %v: %w", id, opts.Mode, ErrConfig)
	case opts.Concurrency < 0 || opts.Stripes < 0:
		return nil, fmt.Errorf("rebalance: migration %q: Concurrency %d and Stripes %d must be >= 0: %w",
			id, opts.Concurrency, opts.Stripes, ErrConfig)
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	if opts.Stripes == 0 {
		opts.Stripes = 1024
	}
	return &Migration{id: id, before: before, after: after, store: store, opts: opts,
		locks: make([]sync.RWMutex, opts.Stripes)}, nil
}

// ID returns the migration's ID.
func (m *Migration) ID() string { return m.id }

// Stats returns how many owners this Migration value has moved so far.
func (m *Migration) Stats() Stats {
	return Stats{ByRun: m.byRun.Load(), Lazily: m.lazily.Load()}
}

func (m *Migration) lock(owner string) *sync.RWMutex {
	return &m.locks[keyhash.XXH64(owner)%uint64(len(m.locks))]
}

// Do calls fn with the shard that serves owner now, and returns fn's error. In Lazy mode it
// first moves owner if it has not moved yet. While fn runs, owner's move cannot start, so
// whatever fn writes is on the shard the move reads; accesses of one owner run concurrently
// with each other. fn must not call Do, Run or Finish: it could wait for itself.
func (m *Migration) Do(ctx context.Context, owner string, fn func(shard int) error) error {
	from, to := m.before.Locate(owner), m.after.Locate(owner)
	if from == to || m.finished.Load() {
		return fn(to)
	}
	l := m.lock(owner)
	l.RLock()
	mark, err := m.mark(ctx, owner)
	if err == nil && mark != Done && m.opts.Mode == Lazy {
		l.RUnlock()
		l.Lock()
		err = m.move(ctx, owner, from, to, &m.lazily)
		l.Unlock()
		l.RLock()
		mark = Done // marks only advance, so it is still Done
	}
	defer l.RUnlock()
	if err != nil {
		return err
	}
	if mark == Unmoved {
		return fn(from)
	}
	return fn(to)
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
		if err := step("copy", m.store.Copy(ctx, owner, from, to)); err != nil {
			return err
		}
		if err := step("mark copied", m.store.SetMark(ctx, m.id, owner, Copied)); err != nil {
			return err
		}
	}
	// Copied: the new shard serves owner; the old copy may remain after a crash.
	if err := step("delete old copy", m.store.Delete(ctx, owner, from)); err != nil {
		return err
	}
	if err := step("mark done", m.store.SetMark(ctx, m.id, owner, Done)); err != nil {
		return err
	}
	count.Add(1)
	return nil
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
// running it again resumes. After a successful Finish it returns an error wrapping
// ErrFinished.
func (m *Migration) Run(ctx context.Context, owners iter.Seq[string]) error {
	if m.finished.Load() {
		return fmt.Errorf("rebalance: migration %q: Run after Finish: %w", m.id, ErrFinished)
	}
	total := 0
	for range m.changed(owners) {
		total++
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
	for range m.opts.Concurrency {
		wg.Go(func() {
			for o := range work {
				l := m.lock(o)
				l.Lock()
				err := m.move(ctx, o, m.before.Locate(o), m.after.Locate(o), &m.byRun)
				l.Unlock()
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
	Left      int      // how many owners are not Done
	Owners    []string // the first of them, at most 10
}

// Error says how many owners are left and names the first.
func (e *UnfinishedError) Error() string {
	return fmt.Sprintf("rebalance: migration %q: %d owners not moved yet, among them %q: run the mover again", e.Migration, e.Left, e.Owners)
}

// Is makes errors.Is(err, ErrUnfinished) true.
func (e *UnfinishedError) Is(target error) bool { return target == ErrUnfinished }

// Finish checks the mark of every owner of owners whose shard changes. If every one is
// Done, from then on Do routes by the after sharder alone, reading no mark, and Finish
// returns nil. Otherwise nothing changes and it returns an *UnfinishedError.
func (m *Migration) Finish(ctx context.Context, owners iter.Seq[string]) error {
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
	if left.Left > 0 {
		return left
	}
	m.finished.Store(true)
	return nil
}
