package rebalance

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// repinWorld is a directory over Jump(4) with every owner's rows on its shard.
type repinWorld struct {
	d      *shard.Directory
	owners []string
	store  *memStore
	rows   map[string]*atomic.Int64
}

func newRepinWorld(t *testing.T, owners int) *repinWorld {
	t.Helper()
	rule, err := shard.NewJump(4)
	require.NoError(t, err)
	w := &repinWorld{d: shard.NewDirectory(rule, nil), store: newMemStore(4), rows: map[string]*atomic.Int64{}}
	for i := range owners {
		o := fmt.Sprint("user:", i)
		w.owners = append(w.owners, o)
		w.rows[o] = &atomic.Int64{}
		for j := range 1 + i%5 {
			w.store.put(w.d.Locate(o), o, j, "row")
		}
		w.rows[o].Store(int64(1 + i%5))
	}
	return w
}

func (w *repinWorld) repin(t *testing.T, id string) *Repin {
	t.Helper()
	return repinOf(t, id, w.d, w.store, Options{Concurrency: 2})
}

// repinOf returns a Repin of id over d and st, with a rule of its own.
func repinOf(t *testing.T, id string, d *shard.Directory, st Store, opts Options) *Repin {
	t.Helper()
	rule, err := shard.NewJump(d.Shards())
	require.NoError(t, err)
	r, err := NewRepin(id, d, rule, st, opts)
	require.NoError(t, err)
	return r
}

// copyOf returns a directory loaded with d's entries, as another value of a process loads
// the saved directory.
func copyOf(t *testing.T, d *shard.Directory) *shard.Directory {
	t.Helper()
	fallback, err := shard.NewJump(d.Shards())
	require.NoError(t, err)
	c := shard.NewDirectory(fallback, nil)
	require.NoError(t, c.Load(d.Entries()))
	return c
}

// check checks that every owner's rows are all on the shard the directory gives it, and that
// Do serves them there.
func (w *repinWorld) check(t *testing.T, r *Repin) {
	t.Helper()
	for _, o := range w.owners {
		require.Equal(t, []int{w.d.Locate(o)}, w.store.where(o), "rows of %s", o)
		require.NoError(t, r.Do(context.Background(), o, func(s int) error {
			require.Equal(t, int(w.rows[o].Load()), w.store.count(s, o), "owner %s served by shard %d", o, s)
			return nil
		}))
	}
}

// Pin a hot owner to another shard, then drain shard 3 in batches to where Jump(3) places
// its owners, while writers keep adding rows through Do; then removing shard 3 and
// unpinning the drained owners moves nothing; the hot owner moves again, then back.
func TestRepinPinAndDrain(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 600)
	r := w.repin(t, "rebalance-shard-3")

	stop := writeWhile(3, func(i int) error {
		o := w.owners[(i*31)%len(w.owners)]
		return r.Do(ctx, o, func(s int) error {
			w.store.put(s, o, int(w.rows[o].Add(1))-1, "written during the moves")
			return nil
		})
	})

	hot := w.owners[7]
	to := (w.d.Locate(hot) + 1) % 3
	require.NoError(t, r.Move(ctx, map[string]int{hot: to}))
	pinned, ok := w.d.Pinned(hot)
	require.True(t, ok)
	require.Equal(t, to, pinned)

	three, err := shard.NewJump(3)
	require.NoError(t, err)
	var onThree []string
	for _, o := range w.owners {
		if w.d.Locate(o) == 3 {
			onThree = append(onThree, o)
		}
	}
	require.NotEmpty(t, onThree)
	require.NoError(t, r.Drain(ctx, 3, slices.Values(w.owners), 25, three.Locate))
	writes, err := stop()
	require.NoError(t, err)
	require.Positive(t, writes)
	w.check(t, r)
	require.Equal(t, 1+len(onThree), w.d.Len(), "the hot owner and every drained one are pinned")

	before := make([]int, len(w.owners))
	for i, o := range w.owners {
		before[i] = w.d.Locate(o)
		require.NotEqual(t, 3, before[i], o)
	}
	require.NoError(t, r.Resize(ctx, 3))
	require.NoError(t, r.Unpin(ctx, onThree...), "the drained owners' entries agree with the rule: nothing moves")
	require.Equal(t, 1, w.d.Len(), "only the hot owner is pinned")
	for i, o := range w.owners {
		require.Equal(t, before[i], w.d.Locate(o), "removing the drained shard moved %s", o)
	}
	w.check(t, r)

	require.ErrorIs(t, r.Move(ctx, map[string]int{hot: -1}), shard.ErrShard)
	// The same Repin moves the hot owner again, then unpins it: its rows move back to the
	// rule's shard.
	require.NoError(t, r.Move(ctx, map[string]int{hot: (to + 1) % 3}))
	w.check(t, r)
	require.NoError(t, r.Unpin(ctx, hot, "no-such-owner"))
	_, ok = w.d.Pinned(hot)
	require.False(t, ok)
	require.Equal(t, three.Locate(hot), w.d.Locate(hot))
	require.Zero(t, w.d.Len())
	w.check(t, r)
}

// Resize refuses, changing nothing, a count that would strand an entry, a shard not
// drained, a count above the directory's, and an unfinished batch.
func TestRepinResizeRefuses(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 100)
	r := w.repin(t, "resize")
	require.NoError(t, r.Move(ctx, map[string]int{w.owners[0]: 3}))
	require.ErrorIs(t, r.Resize(ctx, 3), shard.ErrShard, "an owner is pinned to shard 3")
	require.NoError(t, w.repin(t, "resize-back").Move(ctx, map[string]int{w.owners[0]: 0}))
	require.ErrorIs(t, r.Resize(ctx, 5), ErrConfig, "Resize only removes shards")
	err := r.Resize(ctx, 3)
	require.ErrorIs(t, err, ErrUnfinished, "shard 3 is not drained")
	require.Equal(t, 4, w.d.Shards())
	require.Equal(t, 4, r.rule.Shards(), "the rule is resized back")
	w.check(t, r)

	crash := &crashStore{memStore: w.store, op: "delete", when: "before", at: 1}
	r2, err := NewRepin("resize-2", w.d, r.rule, crash, Options{})
	require.NoError(t, err)
	require.Error(t, r2.Move(ctx, map[string]int{w.owners[1]: (w.d.Locate(w.owners[1]) + 1) % 4}))
	require.ErrorIs(t, r2.Resize(ctx, 3), ErrConfig, "a batch is unfinished")
	require.Equal(t, 4, w.d.Shards())
}

// A batch that fails keeps routing its owners by their marks; the next Move finishes it,
// and a new Repin with the same ID (a restart) pins owners a crash left moved.
func TestRepinResumes(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"copy", "copied", "delete", "done"} {
		w := newRepinWorld(t, 200)
		crash := &crashStore{memStore: w.store, op: op, when: "after", at: 3}
		rule, err := shard.NewJump(4)
		require.NoError(t, err)
		r, err := NewRepin("drain-"+op, w.d, rule, crash, Options{})
		require.NoError(t, err)
		three, err := shard.NewJump(3)
		require.NoError(t, err)
		err = r.Drain(ctx, 3, slices.Values(w.owners), 100, three.Locate)
		require.ErrorIs(t, err, errCrash, op)
		for _, o := range w.owners { // served all their rows, wherever they are
			require.NoError(t, r.Do(ctx, o, func(s int) error {
				require.Equal(t, int(w.rows[o].Load()), w.store.count(s, o), "%s: owner %s on shard %d", op, o, s)
				return nil
			}))
		}
		crash.at = 0 // the fault is gone
		require.NoError(t, r.Move(ctx, nil), op)
		// A restart: the directory as saved (the pins of finished batches), the same ID.
		again := w.repin(t, "drain-"+op)
		require.NoError(t, again.Drain(ctx, 3, slices.Values(w.owners), 100, three.Locate), op)
		w.check(t, again)
		for _, o := range w.owners {
			require.NotEqual(t, 3, w.d.Locate(o), "%s: %s", op, o)
		}
	}
}

func TestRepinRejects(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 50)
	rule, err := shard.NewJump(4)
	require.NoError(t, err)
	five, err := shard.NewJump(5)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		id   string
		d    *shard.Directory
		rule shard.Sharder
		s    Store
	}{
		"empty ID":       {"", w.d, rule, w.store},
		"nil directory":  {"x", nil, rule, w.store},
		"nil rule":       {"x", w.d, nil, w.store},
		"nil store":      {"x", w.d, rule, nil},
		"rule of 5":      {"x", w.d, five, w.store},
		"itself as rule": {"x", w.d, w.d, w.store},
	} {
		_, err := NewRepin(c.id, c.d, c.rule, c.s, Options{})
		require.ErrorIs(t, err, ErrConfig, name)
		require.ErrorContains(t, err, "rebalance: ", name)
	}
	var zero Repin
	require.ErrorIs(t, zero.Move(ctx, map[string]int{"a": 0}), ErrConfig)
	require.ErrorIs(t, zero.Drain(ctx, 0, slices.Values(w.owners), 1, func(string) int { return 1 }), ErrConfig)
	require.ErrorIs(t, zero.Do(ctx, "a", func(int) error { return nil }), ErrConfig)
	r := w.repin(t, "bad")
	require.ErrorIs(t, r.Move(ctx, map[string]int{w.owners[0]: 4}), shard.ErrShard)
	require.ErrorIs(t, r.Move(ctx, map[string]int{w.owners[0]: -1}), shard.ErrShard)
	prefixed := shard.NewDirectory(rule, shard.PrefixOwner)
	rp, err := NewRepin("prefix", prefixed, five, w.store, Options{})
	require.ErrorIs(t, err, ErrConfig)
	require.Nil(t, rp)
	two, err := shard.NewJump(4)
	require.NoError(t, err)
	rp, err = NewRepin("prefix", prefixed, two, w.store, Options{})
	require.NoError(t, err)
	require.ErrorIs(t, rp.Move(ctx, map[string]int{"1-A1": 0}), shard.ErrDirectory, "a key where its owner is meant")
	for _, batch := range []int{0, -3} {
		require.ErrorIs(t, r.Drain(ctx, 3, slices.Values(w.owners), batch, func(string) int { return 0 }), ErrConfig)
	}
	require.ErrorIs(t, r.Drain(ctx, 3, slices.Values(w.owners), 5, func(string) int { return 3 }), ErrConfig)
	require.ErrorIs(t, r.Drain(ctx, 3, nil, 5, func(string) int { return 0 }), ErrConfig)
	require.Zero(t, w.d.Len(), "nothing was pinned")
	r, err = NewRepin("resized", w.d, rule, w.store, Options{})
	require.NoError(t, err)
	require.NoError(t, rule.Resize(5))
	require.ErrorIs(t, r.Move(ctx, map[string]int{w.owners[0]: 1}), ErrConfig, "a rule resized behind the Repin")
}

// Two Repin values of one ID over one Store in a process, over directories loaded from the
// same entries, the Store one that cannot check placements: a write through the second value while the
// first moves its owner waits for the move and lands on the new shard, and once the batch
// ended the second value, whose directory lacks the pin, is refused rather than writing on
// the old shard, where nothing reads.
func TestRepinValuesOfOneIDShareTheBatch(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 50)
	st := &hookStore{memStore: w.store}
	op := repinOf(t, "shared", w.d, st, Options{})
	other := copyOf(t, w.d)
	app := repinOf(t, "shared", other, st, Options{})

	hot := w.owners[3]
	to := (w.d.Locate(hot) + 1) % 4
	wait := writeWhenCopied(t, st, hot, func() error {
		return app.Do(ctx, hot, func(s int) error {
			w.store.put(s, hot, 100, "acknowledged")
			w.rows[hot].Add(1)
			return nil
		})
	})
	require.NoError(t, op.Move(ctx, map[string]int{hot: to}))
	wait()
	w.check(t, op)
	require.ErrorIs(t, app.Do(ctx, hot, func(int) error { return nil }), ErrPlacement)
	require.NoError(t, other.Pin(hot, to)) // the saved directory, loaded
	require.NoError(t, app.Do(ctx, hot, func(s int) error {
		require.Equal(t, to, s)
		return nil
	}))
}

// Repins of one ID over two Stores (two clusters managed by one process) share nothing: a
// batch of one neither holds nor refuses the other's accesses.
func TestRepinValuesOverTwoStoresApart(t *testing.T) {
	ctx := context.Background()
	one, two := newRepinWorld(t, 20), newRepinWorld(t, 20)
	a, b := one.repin(t, "cluster"), two.repin(t, "cluster")
	hot := one.owners[0]
	require.NoError(t, a.Move(ctx, map[string]int{hot: (one.d.Locate(hot) + 1) % 4}))
	require.NoError(t, b.Do(ctx, hot, func(s int) error {
		require.Equal(t, two.d.Locate(hot), s)
		return nil
	}))
	require.NoError(t, b.Move(ctx, map[string]int{hot: (two.d.Locate(hot) + 2) % 4}))
	one.check(t, a)
	two.check(t, b)
}

// A batch that one Repin value left unfinished by an error belongs to every value of the ID:
// another value's Move ends it first (or is refused), never replaces it with a batch of its
// own, under which the first batch's owners moved already would be routed to the old shards
// their rows have left. The store here cannot check placements, so only the process can.
func TestRepinValueAfterAnotherValuesFailedBatch(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 50)
	st := &hookStore{memStore: w.store}
	op := repinOf(t, "shared", w.d, st, Options{Concurrency: 1})
	other := copyOf(t, w.d)
	app := repinOf(t, "shared", other, st, Options{})

	first, second, third := w.owners[11], w.owners[12], w.owners[30] // in the order Run takes them
	fail := func(owner string, m Mark) {
		if owner == second && m == Copied {
			st.failMark.Store(true)
		}
	}
	st.beforeMark.Store(&fail)
	err := op.Move(ctx, map[string]int{first: (w.d.Locate(first) + 1) % 4, second: (w.d.Locate(second) + 1) % 4})
	require.ErrorIs(t, err, errCrash)
	st.beforeMark.Store(nil)
	st.failMark.Store(false)
	require.Equal(t, []int{(w.d.Locate(first) + 1) % 4}, w.store.where(first), "the first owner moved before the error")

	// A value whose directory has other entries may not end it; one with the same may.
	stale := copyOf(t, w.d)
	require.NoError(t, stale.Pin(third, other.Locate(third)))
	elsewhere := repinOf(t, "shared", stale, st, Options{})
	require.ErrorIs(t, elsewhere.Move(ctx, map[string]int{third: (other.Locate(third) + 1) % 4}), ErrPlacement)
	require.NoError(t, app.Move(ctx, map[string]int{third: (other.Locate(third) + 1) % 4}))
	for _, o := range []string{first, second, third} {
		require.NoError(t, app.Do(ctx, o, func(s int) error {
			require.Equal(t, int(w.rows[o].Load()), w.store.count(s, o), "owner %s served by shard %d", o, s)
			return nil
		}))
		require.ErrorIs(t, op.Do(ctx, o, func(int) error { return nil }), ErrPlacement, "its directory lacks the pins")
	}
}

// A Repin value whose directory lacks the pins of the ID's last batch in this process may
// not move from it: it would copy an owner from the shard its rows have left (nothing) and
// pin it there, over a store that cannot tell.
func TestRepinValueWithoutTheLastBatchsPins(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 20)
	st := blindStore{w.store}
	op := repinOf(t, "shared", w.d, st, Options{})
	app := repinOf(t, "shared", copyOf(t, w.d), st, Options{})

	hot := w.owners[5]
	require.NoError(t, op.Move(ctx, map[string]int{hot: (w.d.Locate(hot) + 1) % 4}))
	require.ErrorIs(t, app.Move(ctx, map[string]int{hot: (w.d.Locate(hot) + 2) % 4}), ErrPlacement)
	w.check(t, op)
}

// blindStore is a Store that can neither list owners nor check placements.
type blindStore struct{ Store }
