package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planKeyCount is how many keys the range plans are checked on: a million, fewer where the
// race detector or -short slows every lookup.
func planKeyCount() int {
	if raceEnabled || testing.Short() {
		return 100_000
	}
	return 1_000_000
}

// seqKeys yields n keys without holding them.
func seqKeys(n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range n {
			if !yield("key:" + strconv.Itoa(i)) {
				return
			}
		}
	}
}

// rangeAt returns the range of ranges that holds h, and whether there is one.
func rangeAt(ranges []HashRange, h uint64) (HashRange, bool) {
	i, _ := slices.BinarySearchFunc(ranges, h, func(r HashRange, h uint64) int { return cmp.Compare(r.Last, h) })
	if i < len(ranges) && ranges[i].First <= h {
		return ranges[i], true
	}
	return HashRange{}, false
}

// checkRangesAgainstKeys checks that a range plan is the per-key plan exactly: every key
// whose shard changes is in a range that moves it so, every other key in none, and counting
// the keys by range gives PlanKeys' flows to the key; the ranges are ordered, apart and
// merged, and the plan's shares add up to 1.
func checkRangesAgainstKeys(t *testing.T, what string, p *LeafPlan, position func(string) uint64, before, after shard.Sharder, keys iter.Seq[string]) {
	t.Helper()
	require.NoError(t, checkRanges(p.Ranges), what)
	for i := 1; i < len(p.Ranges); i++ {
		a, b := p.Ranges[i-1], p.Ranges[i]
		require.Falsef(t, a.Last+1 == b.First && a.From == b.From && a.To == b.To, "%s: ranges %d and %d not merged", what, i-1, i)
	}
	counts := map[pair]int64{}
	var total, moved int64
	for k := range keys {
		from, to := before.Locate(k), after.Locate(k)
		r, in := rangeAt(p.Ranges, position(k))
		if in != (from != to) || in && (r.From != from || r.To != to) {
			t.Fatalf("%s: key %q at %#016x goes %d -> %d; its range: %+v (%v)", what, k, position(k), from, to, r, in)
		}
		if in {
			counts[pair{r.From, r.To}]++
			moved++
		} else {
			counts[pair{from, from}]++
		}
		total++
	}
	want := PlanKeys(before, after, keys)
	require.Equal(t, want, plan(counts, total), what)
	var moves int64
	for m := range Moves(before, after, keys) {
		if r, in := rangeAt(p.Ranges, position(m.Key)); !in || r.From != m.From || r.To != m.To {
			t.Fatalf("%s: Moves gives %+v, its range %+v (%v)", what, m, r, in)
		}
		moves++
	}
	require.Equal(t, moved, moves, what)
	var sum float64
	for _, f := range p.Flows {
		sum += f.Share
	}
	require.InDelta(t, 1, sum, 1e-9, what)
	require.InDelta(t, p.Fraction(), float64(moved)/float64(total), 0.01, "%s: the ranges' share of the hashes against the keys in them", what)
}

// posSharder places keys as a pool ring does, as the index of the node in names.
type posSharder struct {
	p     *pool.Ring
	index map[string]int
}

func (s posSharder) Locate(k string) int { return s.index[s.p.Locate(k)] }
func (s posSharder) Resize(int) error    { return nil }
func (s posSharder) Shards() int         { return len(s.index) }

func TestPlanRingAgainstKeys(t *testing.T) {
	// A million keys for the first case, a tenth of that for the others, to keep the
	// package's tests fast.
	keys := seqKeys(planKeyCount())
	coarse := func(s string) uint64 { return keyhash.XXH64(s) &^ (1<<54 - 1) }
	for _, c := range []struct {
		name     string
		from, to int
		newRing  func(n int) (*shard.Ring, error)
	}{
		{"xxh64 160", 10, 11, func(n int) (*shard.Ring, error) { return shard.NewRing(n, shard.RingOptions{}) }},
		{"xxh64 160", 10, 20, func(n int) (*shard.Ring, error) { return shard.NewRing(n, shard.RingOptions{}) }},
		{"jedis", 5, 6, shard.NewJedisRing},
		{"murmur 16", 10, 9, func(n int) (*shard.Ring, error) { return shard.NewMurmurRing(n, 16) }},
		{"coarse 40", 7, 9, func(n int) (*shard.Ring, error) { return shard.NewRing(n, shard.RingOptions{Hash: coarse, Vnodes: 40}) }},
		{"xxh64 1", 1, 2, func(n int) (*shard.Ring, error) { return shard.NewRing(n, shard.RingOptions{Vnodes: 1}) }},
	} {
		what := fmt.Sprintf("%s %d -> %d", c.name, c.from, c.to)
		before, err := c.newRing(c.from)
		require.NoError(t, err)
		after, err := c.newRing(c.to)
		require.NoError(t, err)
		p, err := PlanRing(before, after)
		require.NoError(t, err)
		checkRangesAgainstKeys(t, what, p, before.Position, before, after, keys)
		t.Logf("%s: %d ranges, %.2f%% of the hashes", what, len(p.Ranges), 100*p.Fraction())
		keys = seqKeys(planKeyCount() / 10)
	}
}

func TestPlanPoolRingAgainstKeys(t *testing.T) {
	keys := seqKeys(planKeyCount() / 10)
	coarse := func(s string) uint64 { return keyhash.XXH64(s) &^ (1<<52 - 1) }
	nodes := func(names ...string) []pool.Node {
		var out []pool.Node
		for _, n := range names {
			out = append(out, pool.Node{Name: n})
		}
		return out
	}
	for _, opts := range []pool.RingOptions{
		{},
		{Vnodes: 40, Lookup: pool.RingNearest},
		{Vnodes: 40, Lookup: pool.RingNearestPoint, Ties: pool.TieFirstPoint, Hash: coarse},
		{Vnodes: 40, Ties: pool.TieLastPoint, Hash: coarse},
	} {
		before, err := pool.NewRing(nodes("a", "b", "c", "d"), opts)
		require.NoError(t, err)
		for _, change := range []struct {
			name  string
			apply func(r *pool.Ring) error
		}{
			{"add e", func(r *pool.Ring) error { return r.Add(pool.Node{Name: "e"}) }},
			{"remove b", func(r *pool.Ring) error { return r.Remove("b") }},
			{"weight c 3", func(r *pool.Ring) error { return r.SetWeight("c", 3) }},
		} {
			after, err := pool.NewRing(before.Nodes(), opts)
			require.NoError(t, err)
			require.NoError(t, change.apply(after))
			p, names, err := PlanPoolRing(before, after)
			require.NoError(t, err)
			index := map[string]int{}
			for i, n := range names {
				index[n] = i
			}
			require.True(t, slices.IsSorted(names))
			what := fmt.Sprintf("%+v %s", opts, change.name)
			checkRangesAgainstKeys(t, what, p, before.Position, posSharder{before, index}, posSharder{after, index}, keys)
		}
	}
}

// growthRanges returns the range plans of growing a ring of v points per shard from n to
// n+1 shards and of shrinking it back.
func growthRanges(t *testing.T, n, v int) (grow, shrink []HashRange) {
	before, err := shard.NewRing(n, shard.RingOptions{Vnodes: v})
	require.NoError(t, err)
	after, err := shard.NewRing(n+1, shard.RingOptions{Vnodes: v})
	require.NoError(t, err)
	g, err := PlanRing(before, after)
	require.NoError(t, err)
	s, err := PlanRing(after, before)
	require.NoError(t, err)
	return g.Ranges, s.Ranges
}

// movedArcs counts the arcs of a ring's range plan: its ranges, less one when the last and
// the first are the two halves of the arc across position 0.
func movedArcs(ranges []HashRange) int {
	n := len(ranges)
	if n > 1 && ranges[0].First == 0 && ranges[n-1].Last == math.MaxUint64 &&
		ranges[0].From == ranges[n-1].From && ranges[0].To == ranges[n-1].To {
		return n - 1
	}
	return n
}

// The sharding lecture [003]: only contiguous arcs move. A new shard's v points each take the
// end of one arc, so growing by one shard moves at most v arcs, and shrinking by one as
// many; the arc across position 0 is two ranges.
func TestPlanRingIsShort(t *testing.T) {
	for _, n := range []int{1, 2, 10, 11, 100} {
		for _, v := range []int{1, 16, 160, 1000} {
			growRanges, shrinkRanges := growthRanges(t, n, v)
			grow, shrink := movedArcs(growRanges), movedArcs(shrinkRanges)
			t.Logf("ring of %d -> %d shards, %d points each: %d arcs, %d ranges", n, n+1, v, grow, len(growRanges))
			require.LessOrEqualf(t, grow, v, "%d -> %d shards of %d points", n, n+1, v)
			require.LessOrEqualf(t, len(growRanges), grow+1, "%d -> %d shards of %d points", n, n+1, v)
			require.Equalf(t, grow, shrink, "%d <- %d shards of %d points: the same arcs move back", n, n+1, v)
			if n >= 10 && v >= 16 {
				// Two new points are neighbours with probability about 1/(n+1) each: merges
				// are rare, so the plan is close to v long.
				require.GreaterOrEqualf(t, grow, v*8/10, "%d -> %d shards of %d points", n, n+1, v)
			}
		}
	}
	// The new shard's first point is the smallest of 11 -> 12 shards of 16 points: its arc
	// crosses position 0, and the plan lists 16 arcs as 17 ranges.
	growRanges, _ := growthRanges(t, 11, 16)
	require.Len(t, growRanges, 17)
	require.Equal(t, 16, movedArcs(growRanges))
	// Pools: a node of weight w adds w*v points; the nearest rules split each arc in two.
	base := []pool.Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}}
	for _, opts := range []pool.RingOptions{{Vnodes: 100}, {Vnodes: 100, Lookup: pool.RingNearest}} {
		for _, w := range []int{1, 3} {
			before, err := pool.NewRing(base, opts)
			require.NoError(t, err)
			after, err := pool.NewRing(append(slices.Clone(base), pool.Node{Name: "f", Weight: w}), opts)
			require.NoError(t, err)
			bound := w * opts.Vnodes
			if opts.Lookup != pool.RingSuccessor {
				bound *= 2
			}
			for _, dir := range [][2]*pool.Ring{{before, after}, {after, before}} {
				p, _, err := PlanPoolRing(dir[0], dir[1])
				require.NoError(t, err)
				require.LessOrEqualf(t, movedArcs(p.Ranges), bound, "lookup %d, a node of weight %d", opts.Lookup, w)
				t.Logf("pool ring, lookup %d, 5 nodes of %d points, one of weight %d joins or leaves: %d ranges (bound %d)", opts.Lookup, opts.Vnodes, w, len(p.Ranges), bound)
				require.Greater(t, len(p.Ranges), bound/3)
			}
		}
	}
}

func TestPlanRingRejects(t *testing.T) {
	jedis, err := shard.NewJedisRing(3)
	require.NoError(t, err)
	murmur, err := shard.NewMurmurRing(3, 160)
	require.NoError(t, err)
	xxh, err := shard.NewRing(3, shard.RingOptions{})
	require.NoError(t, err)
	custom, err := shard.NewRing(3, shard.RingOptions{Hash: func(s string) uint64 { return keyhash.XXH64(s) ^ 1 }})
	require.NoError(t, err)
	for _, pair := range [][2]*shard.Ring{{jedis, murmur}, {murmur, xxh}, {xxh, custom}, {xxh, nil}, {nil, xxh}} {
		_, err := PlanRing(pair[0], pair[1])
		require.ErrorIs(t, err, ErrLayout)
		require.ErrorContains(t, err, "rebalance: plan ring")
	}
	_, err = PlanRing(xxh, &shard.Ring{})
	require.ErrorIs(t, err, ErrLayout, "a zero ring")
	_, _, err = PlanPoolRing(&pool.Ring{}, &pool.Ring{})
	require.ErrorIs(t, err, ErrLayout, "zero pool rings")
	p, err := PlanRing(xxh, xxh)
	require.NoError(t, err)
	require.Empty(t, p.Ranges, "a ring against itself moves nothing")

	a, err := pool.NewRing([]pool.Node{{Name: "a"}}, pool.RingOptions{})
	require.NoError(t, err)
	b, err := pool.NewRing([]pool.Node{{Name: "a"}}, pool.RingOptions{Hash: func(s string) uint64 { return uint64(keyhash.JedisMD5(s)) << 32 }})
	require.NoError(t, err)
	_, _, err = PlanPoolRing(a, b)
	require.ErrorIs(t, err, ErrLayout)
	_, _, err = PlanPoolRing(nil, b)
	require.ErrorIs(t, err, ErrLayout)
}

// rangeMem is a RangeStore in memory: rows[shard][key] holds a key's rows by ID, and a key's
// position is pos(key). fail, if set, is asked before every call named by op ("copy",
// "count", "delete", "copied" and "done" for the marks) whether to fail it, and after the
// call whether to fail having made it.
type rangeMem struct {
	mu    sync.Mutex
	pos   func(string) uint64
	rows  []map[string]map[int]string
	marks map[[2]string]Mark
	fail  func(op string, done bool) error
	lossy bool // CopyRange leaves one row out
}

func newRangeMem(shards int, pos func(string) uint64) *rangeMem {
	s := &rangeMem{pos: pos, rows: make([]map[string]map[int]string, shards), marks: map[[2]string]Mark{}}
	for i := range s.rows {
		s.rows[i] = map[string]map[int]string{}
	}
	return s
}

// call runs fn under the lock, between the two questions to fail.
func (s *rangeMem) call(op string, fn func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(op, false); err != nil {
			return err
		}
	}
	fn()
	if s.fail != nil {
		return s.fail(op, true)
	}
	return nil
}

// keysIn returns the keys on shard whose position is in [first, last].
func (s *rangeMem) keysIn(first, last uint64, shard int) []string {
	var out []string
	for k := range s.rows[shard] {
		if h := s.pos(k); first <= h && h <= last {
			out = append(out, k)
		}
	}
	return out
}

func (s *rangeMem) CopyRange(_ context.Context, first, last uint64, from, to int) error {
	return s.call("copy", func() {
		for _, k := range s.keysIn(first, last, to) {
			delete(s.rows[to], k)
		}
		for _, k := range s.keysIn(first, last, from) {
			s.rows[to][k] = maps.Clone(s.rows[from][k])
			if s.lossy {
				delete(s.rows[to][k], 0)
			}
		}
	})
}

func (s *rangeMem) CountRange(_ context.Context, first, last uint64, shard int) (int64, error) {
	var n int64
	err := s.call("count", func() {
		for _, k := range s.keysIn(first, last, shard) {
			n += int64(len(s.rows[shard][k]))
		}
	})
	return n, err
}

func (s *rangeMem) DeleteRange(_ context.Context, first, last uint64, shard int) error {
	return s.call("delete", func() {
		for _, k := range s.keysIn(first, last, shard) {
			delete(s.rows[shard], k)
		}
	})
}

// The owner methods: a key's range of one position.
func (s *rangeMem) Copy(ctx context.Context, key string, from, to int) error {
	return s.CopyRange(ctx, s.pos(key), s.pos(key), from, to)
}

func (s *rangeMem) Count(ctx context.Context, key string, shard int) (int64, error) {
	return s.CountRange(ctx, s.pos(key), s.pos(key), shard)
}

func (s *rangeMem) Delete(ctx context.Context, key string, shard int) error {
	return s.DeleteRange(ctx, s.pos(key), s.pos(key), shard)
}

func (s *rangeMem) Mark(_ context.Context, migration, owner string) (Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[[2]string{migration, owner}], nil
}

func (s *rangeMem) SetMark(_ context.Context, migration, owner string, m Mark) error {
	op := map[Mark]string{Copied: "copied", Done: "done"}[m]
	return s.call(op, func() { s.marks[[2]string{migration, owner}] = m })
}

func (s *rangeMem) put(shard int, key string, id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows[shard][key] == nil {
		s.rows[shard][key] = map[int]string{}
	}
	s.rows[shard][key][id] = key + "/" + strconv.Itoa(id)
}

// where returns the shards that hold rows of key, and how many rows each.
func (s *rangeMem) where(key string) map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for i, sh := range s.rows {
		if n := len(sh[key]); n > 0 {
			out[i] = n
		}
	}
	return out
}

// ringWorld is a ring resize with a loaded rangeMem, its range plan and the rows written.
type ringWorld struct {
	before, after *shard.Ring
	plan          *LeafPlan
	keys          []string
	store         *rangeMem
	rows          map[string]*atomic.Int64
}

func newRingWorld(t *testing.T, keys, from, to int) *ringWorld {
	t.Helper()
	before, err := shard.NewRing(from, shard.RingOptions{Vnodes: 16})
	require.NoError(t, err)
	after, err := shard.NewRing(to, shard.RingOptions{Vnodes: 16})
	require.NoError(t, err)
	p, err := PlanRing(before, after)
	require.NoError(t, err)
	w := &ringWorld{before: before, after: after, plan: p, store: newRangeMem(max(from, to), before.Position), rows: map[string]*atomic.Int64{}}
	for k := range seqKeys(keys) {
		w.keys = append(w.keys, k)
		w.rows[k] = &atomic.Int64{}
		for id := range 3 {
			w.store.put(before.Locate(k), k, id)
		}
		w.rows[k].Store(3)
	}
	return w
}

func (w *ringWorld) migration(t *testing.T, id string, opts Options) *RangeMigration {
	t.Helper()
	rm, err := NewRangeMigration(id, w.before, w.after, w.before.Position, w.plan.Ranges, w.store, opts)
	require.NoError(t, err)
	return rm
}

// checkServed checks that Do gives every key a shard that holds all its rows.
func (w *ringWorld) checkServed(t *testing.T, rm *RangeMigration) {
	t.Helper()
	for _, k := range w.keys {
		require.NoError(t, rm.Do(context.Background(), k, func(s int) error {
			require.Equalf(t, int(w.rows[k].Load()), w.store.where(k)[s], "key %s served by shard %d", k, s)
			return nil
		}))
	}
}

// checkMoved checks that every key's rows are all on its after shard, and nowhere else.
func (w *ringWorld) checkMoved(t *testing.T) {
	t.Helper()
	for _, k := range w.keys {
		require.Equalf(t, map[int]int{w.after.Locate(k): int(w.rows[k].Load())}, w.store.where(k), "key %s", k)
	}
}

func TestRangeMigrationMoves(t *testing.T) {
	for _, mode := range []Mode{Async, Lazy} {
		w := newRingWorld(t, 3000, 6, 8)
		rm := w.migration(t, "grow-"+mode.String(), Options{Mode: mode, Concurrency: 3})
		require.Equal(t, w.plan.Ranges, rm.Ranges())
		ctx := context.Background()
		// Writers add rows to keys all over the ring while the ranges move.
		stop := writeWhile(4, func(i int) error {
			k := w.keys[(i*7919)%len(w.keys)]
			return rm.Do(ctx, k, func(s int) error {
				w.store.put(s, k, int(w.rows[k].Add(1))-1)
				return nil
			})
		})
		require.NoError(t, rm.Run(ctx))
		writes, err := stop()
		require.NoError(t, err)
		require.Positive(t, writes)
		require.NoError(t, rm.Finish(ctx))
		w.checkMoved(t)
		w.checkServed(t, rm)
		st := rm.Stats()
		require.Equal(t, int64(len(w.plan.Ranges)), st.ByRun+st.Lazily, mode)
	}
}

// writeWhile starts writers goroutines, each calling write(i) for i = g, g+writers, ...
// until stop is called; stop waits for them and returns how many writes succeeded and the
// first error.
func writeWhile(writers int, write func(i int) error) (stop func() (int64, error)) {
	var (
		wg       sync.WaitGroup
		done     atomic.Bool
		n        atomic.Int64
		mu       sync.Mutex
		firstErr error
	)
	for g := range writers {
		wg.Go(func() {
			for i := g; !done.Load(); i += writers {
				if err := write(i); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				n.Add(1)
			}
		})
	}
	return func() (int64, error) {
		done.Store(true)
		wg.Wait()
		return n.Load(), firstErr
	}
}

var errRangeCrash = errors.New("crash")

// TestRangeMigrationCrashAndResume stops a range migration at every step of a move, checks
// that every key is served all its rows in that state, then resumes with a new
// RangeMigration (a new process) over the same store and checks that everything moved.
func TestRangeMigrationCrashAndResume(t *testing.T) {
	for _, op := range []string{"copy", "copied", "delete", "done"} {
		for _, after := range []bool{false, true} {
			w := newRingWorld(t, 800, 4, 5)
			n := 0
			w.store.fail = func(o string, done bool) error {
				if o == op && done == after {
					if n++; n == 3 {
						return errRangeCrash
					}
				}
				return nil
			}
			rm := w.migration(t, "grow", Options{})
			require.ErrorIs(t, rm.Run(context.Background()), errRangeCrash, "%s after=%v", op, after)
			w.store.fail = nil
			w.checkServed(t, rm)
			again := w.migration(t, "grow", Options{})
			w.checkServed(t, again)
			require.NoError(t, again.Run(context.Background()))
			require.NoError(t, again.Finish(context.Background()))
			w.checkMoved(t)
		}
	}
}

// Nothing is deleted before its copy is counted: a copy that loses a row stops the move with
// the source whole, and a new shard that lost rows after a crash keeps the old copy.
func TestRangeMigrationVerifies(t *testing.T) {
	ctx := context.Background()
	w := newRingWorld(t, 500, 4, 5)
	w.store.lossy = true
	rm := w.migration(t, "lossy", Options{})
	err := rm.Run(ctx)
	require.ErrorIs(t, err, ErrCopyMismatch)
	w.store.lossy = false
	failed := slices.IndexFunc(rm.Ranges(), func(r HashRange) bool { return strings.Contains(err.Error(), rangeName(r)) })
	require.GreaterOrEqual(t, failed, 0, "the error names the range: %v", err)
	r := rm.Ranges()[failed]
	for _, k := range w.keys {
		if h := w.before.Position(k); r.First <= h && h <= r.Last {
			require.Equal(t, 3, w.store.where(k)[r.From], "key %s keeps its rows on its old shard", k)
		}
	}
	w.checkServed(t, rm)

	// A crash after the first range is marked Copied, then the new shard loses a row.
	w = newRingWorld(t, 500, 4, 5)
	w.store.fail = func(op string, done bool) error {
		if op == "delete" && !done {
			return errRangeCrash
		}
		return nil
	}
	rm = w.migration(t, "lost", Options{})
	require.ErrorIs(t, rm.Run(ctx), errRangeCrash)
	w.store.fail = nil
	r = w.plan.Ranges[0]
	var victim string
	for _, k := range w.keys {
		if h := w.before.Position(k); r.First <= h && h <= r.Last {
			victim = k
			break
		}
	}
	require.NotEmpty(t, victim)
	delete(w.store.rows[r.To][victim], 1)
	err = w.migration(t, "lost", Options{}).Run(ctx)
	require.ErrorIs(t, err, ErrCopyLost)
	require.Equal(t, 3, w.store.where(victim)[r.From], "the old copy is kept")
}

func TestNewRangeMigrationRejects(t *testing.T) {
	w := newRingWorld(t, 400, 3, 4)
	pos := w.before.Position
	for _, ranges := range [][]HashRange{
		{{First: 5, Last: 4, From: 0, To: 1}},
		{{First: 0, Last: 4, From: 1, To: 1}},
		{{First: 0, Last: 4, From: -1, To: 1}},
		{{First: 0, Last: 4, From: 0, To: -2}},
		{{First: 10, Last: 20, From: 0, To: 1}, {First: 0, Last: 4, From: 0, To: 1}},   // unsorted
		{{First: 10, Last: 20, From: 0, To: 1}, {First: 20, Last: 24, From: 2, To: 1}}, // overlapping
	} {
		_, err := NewRangeMigration("bad", w.before, w.after, pos, ranges, w.store, Options{})
		require.ErrorIs(t, err, ErrLayout, "%+v", ranges)
		require.ErrorContains(t, err, "rebalance: range")
	}
	_, err := NewRangeMigration("bad", w.before, w.after, nil, nil, w.store, Options{})
	require.ErrorIs(t, err, ErrConfig)
	var zero RangeMigration
	require.ErrorIs(t, zero.Do(context.Background(), "k", func(int) error { return nil }), ErrConfig)
	require.ErrorIs(t, zero.Run(context.Background()), ErrConfig)
	require.ErrorIs(t, zero.Finish(context.Background()), ErrConfig)
	require.Zero(t, zero.Stats())
	require.Empty(t, zero.ID())
	_, err = NewRangeMigration("", w.before, w.after, pos, nil, w.store, Options{})
	require.ErrorIs(t, err, ErrConfig)

	// A plan that is not the one from before to after: Do refuses the keys it misplaces.
	short := w.migration(t, "short", Options{})
	for _, k := range w.keys { // drop the range of the first key that moves
		if i := short.find(w.before.Position(k)); i >= 0 {
			short.ranges, short.names = slices.Delete(short.ranges, i, i+1), slices.Delete(short.names, i, i+1)
			break
		}
	}
	wrong := w.migration(t, "wrong", Options{})
	other, err := shard.NewRing(5, shard.RingOptions{Vnodes: 16})
	require.NoError(t, err)
	wrong.after = other
	for _, rm := range []*RangeMigration{short, wrong} {
		refused := 0
		for _, k := range w.keys {
			err := rm.Do(context.Background(), k, func(int) error { return nil })
			if err != nil {
				require.ErrorIs(t, err, ErrLayout)
				refused++
			}
		}
		assert.Positive(t, refused, rm.ID())
	}
}
