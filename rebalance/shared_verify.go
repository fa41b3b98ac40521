package rebalance

// The window and after: the changes left replayed, the copy compared by content, and the
// old copies deleted once the new shard serves the owners.

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"sync"
	"time"
)

// verify runs in the window, a fenced moved and b importing: nothing writes either. It replays
// the changes of owners left recorded on a, then compares the owners' sums on both shards
// and returns those whose copies match, with their rows on a. An owner whose copy does not
// match stays on a, served again, its copy on b kept importing; mismatch says which key
// differs first (ErrCopyMismatch). It keeps the sums on a (SumKeeper).
func (m *mover[Tx]) verify(ctx context.Context, owners []string, a, b int) (commit []string, rows []int64, mismatch, err error) {
	if err := m.replay(ctx, owners, a, b); err != nil {
		return nil, nil, nil, err
	}
	// Both sums at once: they are the part of the window that grows with the owners' rows.
	var sa []Sum
	var errA error
	var summed sync.WaitGroup
	summed.Go(func() {
		sa, errA = m.store.Sums(ctx, owners, a)
		if errA == nil && len(sa) == len(owners) {
			// Kept whatever b's sums, while they run: the sums kept of an old copy that a
			// later Run deletes are those of the window that committed it.
			if err := m.store.KeepSums(ctx, m.id, m.token, owners, a, sa); err != nil {
				errA = fmt.Errorf("keep them: %w", err)
			}
		}
	})
	sb, err := m.store.Sums(ctx, owners, b)
	summed.Wait()
	switch {
	case errA != nil:
		return nil, nil, nil, fmt.Errorf("sum the rows on shard %d: %w", a, errA)
	case err != nil:
		return nil, nil, nil, fmt.Errorf("sum the rows on shard %d: %w", b, err)
	case len(sa) != len(owners) || len(sb) != len(owners):
		return nil, nil, nil, fmt.Errorf("store returned %d and %d sums for %d owners", len(sa), len(sb), len(owners))
	}
	for i, o := range owners {
		if sa[i] == sb[i] {
			commit, rows = append(commit, o), append(rows, sa[i].Rows)
			continue
		}
		key, kerr := m.store.FirstDiff(ctx, o, a, b)
		where := fmt.Sprintf("first at key %q", key)
		if kerr != nil {
			where = fmt.Sprintf("(the first key that differs is unknown: %v)", kerr)
		}
		e := fmt.Errorf("rebalance: migration %q: owner %q: verify the copy (shard %d -> %d): shard %d holds %d rows, shard %d holds %d, and they differ %s: nothing deleted, shard %d serves the owner again: %w",
			m.id, o, a, b, a, sa[i].Rows, b, sb[i].Rows, where, a, ErrCopyMismatch)
		// Exporting, as reopen does: a serves the owner, and the next Run knows the rows on b
		// for a copy of its own.
		if rerr := m.store.SetFence(ctx, m.id, []string{o}, a, Exporting, m.token); rerr != nil {
			e = fmt.Errorf("%w (and fence old shard exporting again: %w)", e, rerr)
		}
		mismatch = cmp.Or(mismatch, e)
	}
	return commit, rows, mismatch, nil
}

// keptRows checks the old copy of owner on shard a, moved and committed on its new shard by
// an earlier Run, against the sums the store kept of it (SumKeeper): by content where the
// window's sums are kept, by its count where a deletion in chunks began. It returns the rows
// the old copy may hold, or nil if nothing is kept.
func (m *mover[Tx]) keptRows(ctx context.Context, owner string, a int) ([]int64, error) {
	one := []string{owner}
	kept, found, err := m.store.KeptSums(ctx, m.id, one, a)
	switch {
	case err != nil:
		return nil, err
	case len(kept) != 1 || len(found) != 1:
		return nil, fmt.Errorf("store returned %d kept sums for 1 owner", len(kept))
	case !found[0]:
		return nil, nil
	}
	now, err := m.store.Sums(ctx, one, a)
	switch {
	case err != nil:
		return nil, err
	case len(now) != 1:
		return nil, fmt.Errorf("store returned %d sums for 1 owner", len(now))
	case kept[0].Digest == "" && now[0].Rows > kept[0].Rows:
		return nil, fmt.Errorf("shard %d holds %d rows of the old copy, whose deletion in chunks left %d: a write reached it after the window, around its fence; nothing deleted: compare it with the new shard and settle the difference before a Run deletes it: %w",
			a, now[0].Rows, kept[0].Rows, ErrCopyMismatch)
	case oldCopyChanged(now[0], kept[0]):
		return nil, fmt.Errorf("shard %d holds %d rows of the old copy, which the window compared at %d rows, and their content differs: a write reached the old copy after the window, around its fence; nothing deleted: compare it with the new shard and settle the difference before a Run deletes it: %w",
			a, now[0].Rows, kept[0].Rows, ErrCopyMismatch)
	}
	return []int64{kept[0].Rows}, nil
}

// oldCopyChanged reports whether an old copy whose sums are now differs from the sums kept of
// it: by content from the window's, unless deleted whole since; by a row more than the count
// kept while its deletion in chunks runs (an empty Digest).
func oldCopyChanged(now, kept Sum) bool {
	if kept.Digest == "" {
		return now.Rows > kept.Rows
	}
	return now.Rows > 0 && now != kept
}

// deleteOld deletes the old copies of owners on shard s, moved away from it, and the changes
// recorded of them there. rows, if not nil, are the owners' rows there, as the window's sums
// counted them (see deleteAll).
func (m *mover[Tx]) deleteOld(ctx context.Context, owners []string, s int, rows []int64) error {
	if err := m.deleteAll(ctx, owners, s, rows); err != nil {
		return err
	}
	return m.store.ClearChanges(ctx, m.id, m.token, owners, s)
}

// deleteAll deletes owners' rows on shard s, on a shard that does not serve them (nothing
// adds rows there). rows, if not nil, are their counts as the window's sums found them: the
// old copies have been frozen since, and a row more is a write that went around the fence,
// which the deletion would take, so each deletion is bounded by them. Owners that fit in
// DeleteRows together go in one deletion, a run at a time: whole where the store is an
// OwnersDeleter (bounded in its own transaction), else counted first; a bigger owner goes
// on its own in chunks of DeleteRows rows (deleteCounted).
func (m *mover[Tx]) deleteAll(ctx context.Context, owners []string, s int, rows []int64) error {
	if len(rows) != len(owners) {
		// A stopped copy on a new shard, or what a move away left there: nothing to bound.
		for {
			began := time.Now()
			n, err := m.store.DeleteChunk(ctx, m.id, m.token, owners, s, m.opts.DeleteRows)
			if err != nil || n < m.opts.DeleteRows {
				return err
			}
			if err := m.yield(ctx, began); err != nil {
				return err
			}
		}
	}
	od, whole := m.store.(OwnersDeleter)
	limit := int64(m.opts.DeleteRows)
	var began time.Time
	for first := 0; first < len(owners); {
		last, n := first+1, rows[first]
		for ; last < len(owners) && n+rows[last] <= limit; last++ {
			n += rows[last]
		}
		run, runRows := owners[first:last], rows[first:last]
		first = last
		if !began.IsZero() {
			if err := m.yield(ctx, began); err != nil {
				return err
			}
		}
		began = time.Now()
		if whole && n <= limit {
			deleted, ok, err := od.DeleteOwners(ctx, m.id, m.token, run, s, int(n))
			switch {
			case err == nil && !ok:
				err = aroundTheFence(s, run, n)
			case err == nil && int64(deleted) < n:
				// Fewer than counted: gone already, or kept by the shard.
				err = m.noneLeft(ctx, run, s)
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := m.deleteCounted(ctx, run, s, runRows); err != nil {
			return err
		}
	}
	return nil
}

// deleteCounted deletes the old copies of owners on shard s, of at most rows each as the
// window counted them, counted again first: one deletion where they fit in DeleteRows, else
// (one owner) chunks of DeleteRows rows that take no more rows than counted in all; and it
// stops with ErrCopyMismatch if a row is left after them. Before each chunk it keeps the
// rows left (SumKeeper), in place of the window's sums (a part of a copy is not the copy they
// describe), so that a Run that resumes the deletion stops where the old copy holds more.
func (m *mover[Tx]) deleteCounted(ctx context.Context, owners []string, s int, rows []int64) error {
	now, err := m.store.Counts(ctx, owners, s)
	if err := countsErr(now, owners, err); err != nil {
		return fmt.Errorf("count rows on shard %d: %w", s, err)
	}
	var left int64
	for i, o := range owners {
		if now[i] > rows[i] {
			return aroundTheFence(s, []string{o}, rows[i])
		}
		left += now[i]
	}
	keeps := len(owners) == 1 && left > int64(m.opts.DeleteRows)
	for left > 0 {
		if keeps {
			if err := m.store.KeepSums(ctx, m.id, m.token, owners, s, []Sum{{Rows: left}}); err != nil {
				return fmt.Errorf("keep the count of the rows left: %w", err)
			}
		}
		began := time.Now()
		limit := int(min(left, int64(m.opts.DeleteRows)))
		n, err := m.store.DeleteChunk(ctx, m.id, m.token, owners, s, limit)
		if err != nil {
			return err
		}
		if n < limit { // fewer than counted: gone already, or kept by the shard
			break
		}
		if left -= int64(n); left > 0 {
			if err := m.yield(ctx, began); err != nil {
				return err
			}
		}
	}
	return m.noneLeft(ctx, owners, s)
}

// noneLeft returns an error wrapping ErrCopyMismatch if shard s holds rows of owners after
// their deletion took the rows counted: a write that reached an old copy after the window,
// around its fence (a deletion in chunks goes in the key order, and may have taken such a
// row in place of one counted), or rows the shard kept from a deletion (a trigger that marks
// rows deleted rather than delete them). They stay, and the owners are not marked done.
func (m *mover[Tx]) noneLeft(ctx context.Context, owners []string, s int) error {
	now, err := m.store.Counts(ctx, owners, s)
	if err := countsErr(now, owners, err); err != nil {
		return fmt.Errorf("count rows on shard %d: %w", s, err)
	}
	for i, o := range owners {
		if now[i] > 0 {
			return fmt.Errorf("shard %d still holds %d rows of owner %q after the deletion of the rows the window counted: a write reached the old copy after the window, around its fence, or the shard kept rows from the deletion (a trigger that skips deletions); they are kept: compare them with the new shard: %w", s, now[i], o, ErrCopyMismatch)
		}
	}
	return nil
}

// aroundTheFence is the error of a deletion that found more rows of owners on shard s than
// the window counted (n): a write went around the old copy's fence after the window.
func aroundTheFence(s int, owners []string, n int64) error {
	return fmt.Errorf("shard %d holds more rows of %d owners (%s) than the window counted (%d): a write reached the old copy after the window, around its fence; nothing deleted: compare it with the new shard and settle the difference before a Run deletes it: %w",
		s, len(owners), someOwners(owners), n, ErrCopyMismatch)
}

// someOwners names up to three of owners, for an error.
func someOwners(owners []string) string {
	if len(owners) > 3 {
		return fmt.Sprintf("%q and %d more", owners[:3], len(owners)-3)
	}
	return fmt.Sprintf("%q", owners)
}

// Report is what Verify found.
type Report struct {
	// Owners counts the owners checked (those whose shard changes), Rows their rows on the
	// shards that serve them.
	Owners, Rows int64
	// Compared counts the rows compared by content: owners between their fence and their
	// commit, whose two copies must be equal.
	Compared int64
	// Stray counts rows on a shard that does not serve their owner: an old copy not deleted
	// yet (Run deletes it when run again), or a copy stopped part way on a new shard.
	Stray int64
	// Problems lists what must not be, up to MaxProblems: copies that differ, an owner
	// served by both shards, old copies left after the owner was done, an old copy changed
	// since its window (SumKeeper).
	Problems []Problem
	// More counts the problems past MaxProblems.
	More int64
}

// MaxProblems bounds Report.Problems.
const MaxProblems = 100

// Problem is one owner that Verify found wrong.
type Problem struct {
	Owner string
	// Shard holds the rows in question; Key is the first key that differs between the
	// owner's two copies, "" if unknown.
	Shard int
	Key   string
	What  string
}

// Verify checks, from the fences and the rows on the shards, where every owner of owners
// whose shard changes stands, and compares by content what must be equal; an operator can
// run it at any time, during a migration or after it (before the marks are deleted). It
// changes nothing. An error is a store's failure; what it finds is in the Report. owners
// must not be nil (ErrConfig).
func (m *Shared[Tx]) Verify(ctx context.Context, owners iter.Seq[string]) (*Report, error) {
	if owners == nil {
		return nil, fmt.Errorf("rebalance: migration %q: Verify with nil owners: %w", m.id, ErrConfig)
	}
	r := &Report{}
	pending := map[[2]int][]string{}
	for o := range m.changed(owners) {
		pair := [2]int{m.before.Locate(o), m.after.Locate(o)}
		if pending[pair] = append(pending[pair], o); len(pending[pair]) == m.opts.Batch {
			if err := m.verifyBatch(ctx, r, pending[pair], pair[0], pair[1]); err != nil {
				return r, err
			}
			delete(pending, pair)
		}
	}
	for pair, batch := range pending {
		if err := m.verifyBatch(ctx, r, batch, pair[0], pair[1]); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (m *Shared[Tx]) verifyBatch(ctx context.Context, r *Report, owners []string, a, b int) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("rebalance: migration %q: verify %d owners (shard %d -> %d): %s: %w", m.id, len(owners), a, b, what, err)
	}
	fas, err := m.fences(ctx, owners, a)
	if err != nil {
		return fail(fmt.Sprintf("read fences on shard %d", a), err)
	}
	fbs, err := m.fences(ctx, owners, b)
	if err != nil {
		return fail(fmt.Sprintf("read fences on shard %d", b), err)
	}
	// The kept sums, read before and after the old copies' sums: a deletion under way keeps
	// a smaller count before each chunk, and only a count that held throughout is compared.
	readKept := func() ([]Sum, []bool, error) {
		kept, found, err := m.store.KeptSums(ctx, m.id, owners, a)
		if err == nil && (len(kept) != len(owners) || len(found) != len(owners)) {
			err = fmt.Errorf("store returned %d kept sums for %d owners", len(kept), len(owners))
		}
		if err != nil {
			return nil, nil, fail(fmt.Sprintf("read the kept sums of shard %d", a), err)
		}
		return kept, found, nil
	}
	kept, found, err := readKept()
	if err != nil {
		return err
	}
	sa, err := m.store.Sums(ctx, owners, a)
	if err == nil && len(sa) != len(owners) {
		err = fmt.Errorf("store returned %d sums for %d owners", len(sa), len(owners))
	}
	if err != nil {
		return fail(fmt.Sprintf("sum rows on shard %d", a), err)
	}
	keptAfter, foundAfter, err := readKept()
	if err != nil {
		return err
	}
	for i := range found {
		found[i] = found[i] && foundAfter[i] && kept[i] == keptAfter[i]
	}
	sb, err := m.store.Sums(ctx, owners, b)
	if err == nil && len(sb) != len(owners) {
		err = fmt.Errorf("store returned %d sums for %d owners", len(sb), len(owners))
	}
	if err != nil {
		return fail(fmt.Sprintf("sum rows on shard %d", b), err)
	}
	problem := func(o string, s int, what string) {
		if len(r.Problems) == MaxProblems {
			r.More++
			return
		}
		key, err := m.store.FirstDiff(ctx, o, a, b)
		if err != nil {
			what += fmt.Sprintf(" (the first key that differs is unknown: %v)", err)
		}
		r.Problems = append(r.Problems, Problem{Owner: o, Shard: s, Key: key, What: what})
	}
	for i, o := range owners {
		r.Owners++
		fa, fb := fas[i], fbs[i]
		servesA := fa.State == Serving || fa.State == Exporting
		switch {
		case fa.State == Moved && fb.State == Serving: // moved: the old copy is deleted, or soon
			r.Rows += sb[i].Rows
			r.Stray += sa[i].Rows
			if sa[i].Rows > 0 && fa.Migration == m.id && m.finished.Load() {
				problem(o, a, fmt.Sprintf("%d rows left on the old shard after the migration finished", sa[i].Rows))
			}
			if fa.Migration == m.id && found[i] && oldCopyChanged(sa[i], kept[i]) {
				problem(o, a, fmt.Sprintf("the old copy differs from the sums kept of it (%d rows then, %d now): a write went around its fence, and Run will not delete it", kept[i].Rows, sa[i].Rows))
			}
		case servesA && fb.State == Serving && sb[i].Rows > 0 && sa[i].Rows > 0:
			r.Rows += sa[i].Rows + sb[i].Rows
			problem(o, b, "served by both shards, with rows on both")
		case servesA: // not moved yet: whatever b holds is a copy under way or stopped
			r.Rows += sa[i].Rows
			if fb.State == Serving {
				r.Rows += sb[i].Rows
			} else {
				r.Stray += sb[i].Rows
			}
		case fa.State == Moved && fb.State == Importing: // in the window, or stopped in it
			r.Rows += sa[i].Rows
			r.Compared += sa[i].Rows
			if sa[i] != sb[i] {
				r.Stray += sb[i].Rows
				problem(o, b, fmt.Sprintf("copies differ between the fence and the commit: %d rows on shard %d, %d on shard %d (a move under way, or stopped there: Run replays the changes left and compares again)", sa[i].Rows, a, sb[i].Rows, b))
			}
		default:
			r.Stray += sa[i].Rows + sb[i].Rows
			problem(o, a, fmt.Sprintf("shard %d says %s and shard %d says %s: no shard serves the owner", a, fa, b, fb))
		}
	}
	return nil
}
