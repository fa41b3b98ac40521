package rebalance

// The mover of a Shared migration: Run claims the migration and feeds groups of owners to
// movers; moveGroup and move take each owner through the steps of Run's doc, from wherever a
// stop left it.

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"
)

// Run moves every owner of owners whose shard changes and that is not Done, up to
// SharedOptions.Concurrency at once, and reports Progress. It ranges over owners twice (to
// count, then to move) and holds only a batch of them at a time. For each owner, from its
// old shard A to its new shard B:
//
//  1. fence B importing, and delete what a stopped copy left of the owner there (if B
//     served the owner and holds rows of it, the plan is wrong: stop, changing nothing);
//     then count B again: a row there now was written before the fence, not copied, and
//     B serves the owner again (ErrStrayRows). A stopped copy is told by A fenced
//     exporting: A serving beside B importing means none began;
//  2. fence A exporting: A still serves the owner and records every change of its rows
//     from now on (change capture);
//  3. copy the owner's rows A -> B in chunks, each its own short transaction, while A
//     serves the owner and the application keeps writing there (owners whose rows fit in
//     one chunk together share it), then replay on B the changes recorded meanwhile;
//  4. fence A moved: the owner is served by no shard from here to step 6;
//  5. replay the changes recorded since, and compare the owner's sums (rows and a digest
//     of their content) on A and B; if they differ, fence A exporting again (it serves)
//     and stop with ErrCopyMismatch naming the first key that differs, deleting nothing;
//  6. fence B serving: the commit point, B serves the owner from now on;
//  7. delete the owner's rows on A in chunks, or with others whole where the window counted
//     that they fit in one (OwnersDeleter; A stays fenced moved), and its changes; never more
//     rows than the window counted, and where a later Run resumes the deletion, only an old
//     copy equal by content to the sums the window kept, or no bigger than the rows left
//     when a chunk of it was last deleted (SumKeeper), else stop with ErrCopyMismatch;
//  8. mark the owner Done, in a batch with others.
//
// Run first claims the migration (MoverLock.Claim, with SharedOptions.Token as the election
// epoch): a second mover of the same epoch gets a *MoverError that names this one while its
// lease runs, and Run renews the lease until it returns, then releases it. Every write
// carries the token the claim returned, and a store that has seen a newer one refuses it
// (ErrFenced): a mover that was replaced changes nothing, and its Run returns that error.
// Every step is idempotent: a Run stopped anywhere (an error, ctx, a crash) resumes from the
// fences and marks when run again, by this process or another. After a successful Finish,
// in any process, it returns an error wrapping ErrFinished (the store refuses the claim):
// nothing is left to move, and Finish again is harmless (a Finish that stopped part way
// completes). owners must not be nil (ErrConfig).
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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	mv, stop, err := m.claim(ctx, cancel)
	if err != nil {
		return err
	}
	defer stop()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards done, firstErr, the Progress calls and finished
		done     int
		firstErr error
		finished []string // owners moved, whose Done marks are not written yet
		work     = make(chan []string)
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
		if err := m.store.SetMarks(ctx, m.id, batch, Done, mv.token); err != nil {
			fail(fmt.Errorf("rebalance: migration %q: mark %d owners done: %w", m.id, len(batch), err))
		}
	}
	for range min(m.opts.Concurrency, total) {
		wg.Go(func() {
			for group := range work {
				unlock := m.moving.lock(group) // an owner listed twice is moved once at a time
				moved, err := mv.moveGroup(ctx, group, m.before.Locate(group[0]), m.after.Locate(group[0]))
				unlock()
				if err != nil {
					fail(err)
				}
				mu.Lock()
				finished = append(finished, moved...)
				for range moved {
					if done++; m.opts.Progress != nil {
						m.opts.Progress(Progress{Done: done, Total: total})
					}
				}
				mu.Unlock()
				flush(false)
			}
		})
	}
	// passed counts an owner the feed passes over: Done already, or listed twice.
	passed := func() {
		mu.Lock()
		defer mu.Unlock()
		if done++; m.opts.Progress != nil {
			m.opts.Progress(Progress{Done: done, Total: total})
		}
	}
	// Owners wait in groups by pair of shards until a group is full (groupSize: bigger while
	// the shards are idle); the rest go at the end. At most IdleGroup-1 owners wait per pair:
	// memory in proportion to the shards, not the owners.
	groups := map[[2]int][]string{}
	// send hands the owners waiting for pair to the movers, in groups of the size in force
	// now: one that filled while the shards were idle goes in smaller groups once an access
	// is seen. It reports whether the Run goes on.
	send := func(pair [2]int) bool {
		g := groups[pair]
		delete(groups, pair)
		for size := 0; len(g) > 0; g = g[size:] {
			if ctx.Err() != nil || failed() {
				return false
			}
			size = min(len(g), mv.groupSize(ctx, pair[0], pair[1]))
			work <- g[:size:size]
		}
		return true
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
				passed()
				continue
			}
			pair := [2]int{m.before.Locate(o), m.after.Locate(o)}
			if slices.Contains(groups[pair], o) {
				// Listed twice: it moves with its twin (a group names each owner once, as the
				// store copies a group's owners in one statement). Counted as its twin will be.
				passed()
				continue
			}
			groups[pair] = append(groups[pair], o)
			if g := groups[pair]; len(g) >= m.opts.Group && len(g) >= mv.groupSize(ctx, pair[0], pair[1]) && !send(pair) {
				return false
			}
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
	for pair := range groups {
		if !send(pair) {
			break
		}
	}
	close(work)
	wg.Wait()
	flush(true)
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return cause // the lease was lost: the steps' errors only follow from it
	}
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rebalance: migration %q: stopped after %d of %d owners: %w", m.id, done, total, err)
	}
	return nil
}

// mover is one Run's claim of the migration: every write it makes carries its token.
type mover[Tx any] struct {
	*Shared[Tx]
	token uint64
	meter *meter
}

// claim takes the migration for this mover and keeps it (hold).
func (m *Shared[Tx]) claim(ctx context.Context, lost func(error)) (*mover[Tx], func(), error) {
	token, stop, err := hold(ctx, m.store, Claim{Migration: m.id, Election: m.opts.Token, Mover: m.opts.Mover,
		Lease: m.opts.Lease, Placement: m.placement}, lost)
	if err != nil {
		return nil, nil, err
	}
	return &mover[Tx]{Shared: m, token: token, meter: newMeter(m.store, m.opts.IdleChunkRows)}, stop, nil
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

// ownerLocks are locks of owners by name, held while they move. Locks of stripes of owners
// by hash made a mover wait for another that moved none of its owners: with 8 movers of 16
// owners in 1024 stripes, a group found one of its stripes held 84% of the time, so fewer
// movers ran than Concurrency said (with groups of 32, the two cores of the benchmark were
// 78% busy, against 90% with 16).
type ownerLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when the owner is unlocked
}

// lock locks owners, in order (two groups that share owners cannot deadlock), and returns
// the unlock.
func (l *ownerLocks) lock(owners []string) func() {
	sorted := slices.Compact(slices.Sorted(slices.Values(owners)))
	for _, o := range sorted {
		for {
			l.mu.Lock()
			if l.held == nil {
				l.held = map[string]chan struct{}{}
			}
			wait, busy := l.held[o]
			if !busy {
				l.held[o] = make(chan struct{})
			}
			l.mu.Unlock()
			if !busy {
				break
			}
			<-wait
		}
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, o := range sorted {
			close(l.held[o])
			delete(l.held, o)
		}
	}
}

// moveGroup moves owners, all from shard a to shard b, and returns those it moved (up to
// the deletion of their old copies). Owners that start fresh go through the steps together;
// an owner a stop left part way is resumed on its own (move).
func (m *mover[Tx]) moveGroup(ctx context.Context, owners []string, a, b int) (moved []string, err error) {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("rebalance: migration %q: %d owners: %s (shard %d -> %d): %w", m.id, len(owners), what, a, b, err)
		}
		return nil
	}
	fas, err := m.fences(ctx, owners, a)
	if err := step(fmt.Sprintf("read fences on shard %d", a), err); err != nil {
		return nil, err
	}
	fbs, err := m.fences(ctx, owners, b)
	if err := step(fmt.Sprintf("read fences on shard %d", b), err); err != nil {
		return nil, err
	}
	// Not begun: A serves the owner, and B serves it too or says an earlier migration moved
	// it away from B (moving back, 10 -> 5 after 5 -> 10). Owners a stop left part way are
	// resumed one by one.
	var fresh, away []string
	for i, o := range owners {
		if fas[i].State == Serving && fbs[i].State == Serving {
			fresh = append(fresh, o)
			continue
		}
		if fas[i].State == Serving && fbs[i].State == Moved && fbs[i].Migration != m.id {
			fresh, away = append(fresh, o), append(away, o)
			continue
		}
		if err := m.move(ctx, o, a, b); err != nil {
			return moved, err
		}
		moved = append(moved, o)
	}
	if len(fresh) == 0 {
		return moved, nil
	}
	// Where B serves an owner, rows there are its data, not a stopped copy, and the before
	// sharder does not say where the owner is. Where B says the owner moved away, rows there
	// are what that move had not deleted yet: cleared before B is fenced importing.
	nb, err := m.store.Counts(ctx, fresh, b)
	if err := step(fmt.Sprintf("count rows on shard %d", b), countsErr(nb, fresh, err)); err != nil {
		return moved, err
	}
	for i, o := range fresh {
		if nb[i] > 0 && !slices.Contains(away, o) {
			return moved, fmt.Errorf("rebalance: migration %q: owner %q: check the new shard (shard %d -> %d): shard %d holds %d rows of the owner and serves it, while the before sharder puts it on shard %d: the plan does not match where the owner is; nothing changed: %w", m.id, o, a, b, b, nb[i], a, ErrConfig)
		}
	}
	if len(away) > 0 {
		if err := step(fmt.Sprintf("clear old copies on shard %d", b), m.clearAway(ctx, away, b)); err != nil {
			return moved, err
		}
	}
	if err := step("fence new shard importing", m.store.SetFence(ctx, m.id, fresh, b, Importing, m.token)); err != nil {
		return moved, err
	}
	if err := step("check the new shard under its fence", m.emptyUnderFence(ctx, fresh, a, b)); err != nil {
		return moved, err
	}
	na, err := m.store.Counts(ctx, fresh, a)
	if err := step(fmt.Sprintf("count rows on shard %d", a), countsErr(na, fresh, err)); err != nil {
		return moved, err
	}
	if err := step("copy", m.copyAll(ctx, fresh, a, b, na)); err != nil {
		return moved, err
	}
	// From the fence on A to the commit on B, no shard serves these owners: Do waits. The
	// window holds a few statements whatever the group's size: the fence, the changes
	// recorded since the catch-up, a sum on each shard, the commit.
	start, wctx := time.Now(), context.WithValue(ctx, inWindow{}, true)
	if err := m.store.SetFence(ctx, m.id, fresh, a, Moved, m.token); err != nil {
		// The fence may have changed before the error (a store that gave up waiting for the
		// writes under way): a serves the owners again rather than nobody.
		return moved, step("fence old shard moved", m.reopen(ctx, fresh, a, err))
	}
	commit, rows, mismatch, err := m.verify(wctx, fresh, a, b)
	if err != nil {
		// Nothing on b serves them yet: a serves them again rather than nobody until the
		// next Run (which copies them anew), if this mover still may.
		err = m.reopen(ctx, fresh, a, err)
	}
	if err := step("verify the copy", err); err != nil {
		return moved, err
	}
	if len(commit) == 0 {
		return moved, mismatch
	}
	if err := step("commit on the new shard", m.store.SetFence(ctx, m.id, commit, b, Serving, m.token)); err != nil {
		return moved, err
	}
	m.noteExclusive(time.Since(start))
	m.moved.Add(int64(len(commit)))
	if err := step(fmt.Sprintf("delete old copies on shard %d", a), m.deleteOld(ctx, commit, a, rows)); err != nil {
		return moved, err
	}
	return append(moved, commit...), mismatch
}

// emptyUnderFence checks, once owners are fenced importing on b, that b holds none of their
// rows: from then on only the mover writes them there, so that rows a stop leaves on b are
// a copy of its own (A fenced exporting says one began). A row written there before the fence
// (between the count before it and its commit, by an access of another owner that writes an
// owner's rows or a script's INSERT) is the application's: such owners are fenced serving
// on b again, as before the move, and the move stops with ErrStrayRows; the next Run's count
// refuses them until the rows are where they belong.
func (m *mover[Tx]) emptyUnderFence(ctx context.Context, owners []string, a, b int) error {
	if len(owners) == 0 {
		return nil
	}
	n, err := m.store.Counts(ctx, owners, b)
	if err = countsErr(n, owners, err); err != nil {
		return fmt.Errorf("count rows on shard %d: %w", b, err)
	}
	var stray []string
	var rows int64
	for i, o := range owners {
		if n[i] > 0 {
			stray, rows = append(stray, o), rows+n[i]
		}
	}
	if len(stray) == 0 {
		return nil
	}
	err = fmt.Errorf("shard %d holds %d rows of %d owners (first %q) that no copy of this migration wrote, written there before its fence: a write of an owner's rows on a shard that does not serve it (an access of another owner, a script), while the before sharder puts them on shard %d: %w", b, rows, len(stray), stray[0], a, ErrStrayRows)
	if rerr := m.store.SetFence(ctx, m.id, stray, b, Serving, m.token); rerr != nil {
		return fmt.Errorf("%w (and fence the new shard serving again: %w)", err, rerr)
	}
	return fmt.Errorf("%w: shard %d serves them again, as before the move", err, b)
}

// reopen fences owners exporting again on their old shard a after err stopped their move
// in the window (a serves them, and records their changes), and returns err, with the
// reopening's own error if it failed. Exporting, not serving: the next Run tells by it that
// the rows of the owners on their new shard are a copy of its own. It runs even if ctx was
// cancelled (an operator's interrupt), for a few seconds; a replaced mover's token is
// refused there.
func (m *mover[Tx]) reopen(ctx context.Context, owners []string, a int, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := m.store.SetFence(rctx, m.id, owners, a, Exporting, m.token); rerr != nil {
		return fmt.Errorf("%w (and fence old shard exporting again: %w)", err, rerr)
	}
	return fmt.Errorf("%w: shard %d serves the owners again", err, a)
}

// clearAway deletes on b the old copies of owners that a move away from b left, under a fence
// moved of this migration: a store refuses every other write of their rows there, so that
// what a stop leaves on b is known for an old copy (a fence moved), whatever the next Run
// finds.
func (m *mover[Tx]) clearAway(ctx context.Context, owners []string, b int) error {
	if err := m.store.SetFence(ctx, m.id, owners, b, Moved, m.token); err != nil {
		return fmt.Errorf("fence shard %d moved: %w", b, err)
	}
	return m.deleteAll(ctx, owners, b, nil)
}

func countsErr(n []int64, owners []string, err error) error {
	if err == nil && len(n) != len(owners) {
		return fmt.Errorf("store returned %d counts for %d owners", len(n), len(owners))
	}
	return err
}

func (m *Shared[Tx]) noteExclusive(held time.Duration) {
	m.windows[windowBucket(held)].Add(1)
	for {
		old := m.maxExclusive.Load()
		if int64(held) <= old || m.maxExclusive.CompareAndSwap(old, int64(held)) {
			return
		}
	}
}

// move brings owner from shard a to shard b, from wherever a stop left it (the fences on a
// and b say where), up to the deletion of its rows on a; Run marks it Done.
func (m *mover[Tx]) move(ctx context.Context, owner string, a, b int) error {
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
	var rows []int64 // the owner's rows on a, if this Run's window counted them
	mine := func(f Fence) bool { return f.Migration == m.id }
	servingA := fa.State == Serving || fa.State == Exporting && mine(fa)
	switch {
	case fa.State == Moved && mine(fa) && fb.State == Serving:
		// Committed by an earlier Run: only the old copy is left to delete. B has served the
		// owner since its rows were found equal to A's by content, so B is the owner's data:
		// the application may have deleted rows there since, and fewer rows on B than in the
		// old copy is no sign of a loss. The old copy is checked against the window's kept
		// sums instead, where the store kept them.
		counted, err := m.keptRows(ctx, owner, a)
		if err := step(fmt.Sprintf("check the old copy on shard %d", a), err); err != nil {
			return err
		}
		rows = counted
	case servingA && (fb.State != Importing || mine(fb)), fa.State == Moved && mine(fa) && fb.State == Importing && mine(fb):
		// A Moved fence on B is an earlier migration's, which moved the owner from B: it is
		// replaced by Importing, as the fence always says the current truth.
		if servingA {
			switch {
			case fb.State == Serving:
				// B serves the owner as far as B knows: rows there are the owner's data, not a
				// stopped copy, and the before sharder does not say where the owner is.
				n, err := m.store.Count(ctx, owner, b)
				if err := step(fmt.Sprintf("count rows on shard %d", b), err); err != nil {
					return err
				}
				if n > 0 {
					return step("check the new shard", fmt.Errorf("shard %d holds %d rows of the owner and serves it, while the before sharder puts it on shard %d: the plan does not match where the owner is; nothing changed: %w", b, n, a, ErrConfig))
				}
			case fb.State == Moved:
				// An old copy a move away from B left (an earlier migration's, or this one's
				// stopped while it cleared it).
				if err := step(fmt.Sprintf("clear an old copy on shard %d", b), m.clearAway(ctx, one, b)); err != nil {
					return err
				}
			case fa.State == Exporting:
				// A stopped copy: A exports the owner only once B was found empty under its
				// fence (a stop in the window fences A exporting again, see reopen).
				if err := step(fmt.Sprintf("clear a stopped copy on shard %d", b), m.deleteAll(ctx, one, b, nil)); err != nil {
					return err
				}
			default:
				// B fenced importing by this migration, A serving: stopped before the check
				// under the fence, with no copy begun; rows on B are not the mover's own, and
				// the check below refuses them.
			}
			if fb.State != Importing {
				if err := step("fence new shard importing", m.store.SetFence(ctx, m.id, one, b, Importing, m.token)); err != nil {
					return err
				}
			}
			if err := step("check the new shard under its fence", m.emptyUnderFence(ctx, one, a, b)); err != nil {
				return err
			}
			if err := m.copyAll(ctx, one, a, b, nil); err != nil {
				return step("copy", err)
			}
		}
		// From the fence on A to the commit on B, no shard serves the owner: Do waits.
		start, wctx := time.Now(), context.WithValue(ctx, inWindow{}, true)
		if err := m.store.SetFence(ctx, m.id, one, a, Moved, m.token); err != nil {
			return step("fence old shard moved", m.reopen(ctx, one, a, err))
		}
		if !servingA {
			// Stopped in the window: copy the owner again from its fenced old shard (the
			// changes not replayed yet are replayed next, deletions among them).
			if err := step("copy", m.copyChunks(wctx, one, a, b)); err != nil {
				return err
			}
		}
		commit, counted, mismatch, err := m.verify(wctx, one, a, b)
		if err != nil {
			err = m.reopen(ctx, one, a, err)
		}
		if err != nil || len(commit) == 0 {
			return cmp.Or(step("verify the copy", err), mismatch)
		}
		if err := step("commit on the new shard", m.store.SetFence(ctx, m.id, one, b, Serving, m.token)); err != nil {
			return err
		}
		m.noteExclusive(time.Since(start))
		m.moved.Add(1)
		rows = counted
	default:
		return step("read fences", fmt.Errorf("shard %d says %s and shard %d says %s: the owner is not where this migration's before sharder puts it, or another migration's move of it is unfinished; nothing changed: %w", a, fa, b, fb, ErrFenced))
	}
	return step(fmt.Sprintf("delete old copy on shard %d", a), m.deleteOld(ctx, one, a, rows))
}

// fences reads the fences of owners on shard s and checks what the store returned.
func (m *Shared[Tx]) fences(ctx context.Context, owners []string, s int) ([]Fence, error) {
	f, err := m.store.Fences(ctx, owners, s)
	switch {
	case err != nil:
		return nil, err
	case len(f) != len(owners):
		return nil, fmt.Errorf("store returned %d fences for %d owners", len(f), len(owners))
	}
	for _, x := range f {
		if x.State > Exporting {
			return nil, fmt.Errorf("store returned %v: %w", x.State, ErrMark)
		}
	}
	return f, nil
}

func (m *Shared[Tx]) fence(ctx context.Context, owner string, s int) (Fence, error) {
	f, err := m.store.Fences(ctx, []string{owner}, s)
	switch {
	case err != nil:
		return Fence{}, err
	case len(f) != 1:
		return Fence{}, fmt.Errorf("store returned %d fences for 1 owner", len(f))
	case f[0].State > Exporting:
		return Fence{}, fmt.Errorf("store returned %v: %w", f[0].State, ErrMark)
	}
	return f[0], nil
}
