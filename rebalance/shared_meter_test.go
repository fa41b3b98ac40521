package rebalance

import (
	"cmp"
	"context"
	"errors"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// copyLimits is a MemShared that records when each CopyChunk began and its limit, and
// takes a millisecond a chunk, so that a move lasts long enough to see the chunks change.
type copyLimits struct {
	*MemShared
	mu     sync.Mutex
	chunks []copyLimit
	onCopy func(limit int)
	perRow time.Duration // if not zero, a chunk takes this long a row of its limit
}

type copyLimit struct {
	at    time.Time
	limit int
}

func (c *copyLimits) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	c.mu.Lock()
	c.chunks = append(c.chunks, copyLimit{time.Now(), limit})
	if c.onCopy != nil {
		c.onCopy(limit)
	}
	took := cmp.Or(time.Duration(limit)*c.perRow, time.Millisecond)
	c.mu.Unlock()
	time.Sleep(took)
	return c.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

// meteredCopies is a copyLimits that tells whether a shard is accessed (AccessMeter): busy,
// or an error if fail, and counts the questions.
type meteredCopies struct {
	*copyLimits
	busy, fail atomic.Bool
	asked      atomic.Int64
}

func (m *meteredCopies) Accessing(context.Context, int) (bool, error) {
	m.asked.Add(1)
	if m.fail.Load() {
		return false, errors.New("no view of the shard's sessions")
	}
	return m.busy.Load(), nil
}

// TestSharedChunksGrowWhileIdle: a store that says its shards are idle gets chunks that
// double every meterStep answers (never before), up to IdleChunkRows, and ChunkRows again
// within a question or two of its first access; a busy store, one whose answers fail, one
// that cannot tell, or IdleChunkRows no more than ChunkRows keep every chunk at ChunkRows.
// Every owner ends on its new shard with its rows.
func TestSharedChunksGrowWhileIdle(t *testing.T) {
	every, step, backoff := meterEvery, meterStep, meterBackoff
	meterEvery, meterStep, meterBackoff = time.Millisecond, 3, 5*time.Millisecond
	t.Cleanup(func() { meterEvery, meterStep, meterBackoff = every, step, backoff })
	first := time.Duration(meterStep-1) * meterEvery // the least time the first doubling takes
	const small, big = 5, 30
	for _, tc := range []struct {
		name              string
		meter, busy, fail bool
		idle              int // IdleChunkRows
		flip              bool
	}{
		{name: "idle", meter: true, idle: big},
		{name: "idle by default", meter: true},
		{name: "busy", meter: true, busy: true, idle: big},
		{name: "failing", meter: true, fail: true, idle: big},
		{name: "no meter", idle: big},
		{name: "one size", meter: true, idle: small},
		{name: "busy once big", meter: true, idle: big, flip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSharedWorld(t, 60, 80, 3, 4)
			c := &copyLimits{MemShared: w.store}
			var store SharedStore[*MemTx] = c
			m := &meteredCopies{copyLimits: c}
			m.busy.Store(tc.busy)
			m.fail.Store(tc.fail)
			if tc.meter {
				store = m
			}
			var flipped time.Time
			if tc.flip {
				c.onCopy = func(limit int) {
					if limit == big && flipped.IsZero() {
						m.busy.Store(true)
						flipped = time.Now()
					}
				}
			}
			// Groups of one size: their questions would count as the chunks' (see TestSharedGroupsGrowWhileIdle).
			mv := w.shared(t, "grow", store, SharedOptions{Token: 1, Concurrency: 2, ChunkRows: small, IdleChunkRows: tc.idle, Group: 16, IdleGroup: 16})
			began := time.Now()
			require.NoError(t, mv.Run(context.Background(), slices.Values(w.owners)))
			w.check(t, true)
			most := cmp.Or(tc.idle, 10*small)
			grew, full := 0, 0
			for _, ch := range c.chunks {
				if ch.limit == small {
					continue
				}
				grew++
				switch {
				case ch.limit == most:
					full++
				case ch.limit > most || ch.limit%small != 0 || bits.OnesCount(uint(ch.limit/small)) != 1:
					t.Fatalf("a chunk of %d rows: want %d doubled, up to %d", ch.limit, small, most)
				}
				if ch.at.Before(began.Add(first)) {
					t.Fatalf("a chunk of %d rows %v after the start, before %d answers said idle (%v at least)", ch.limit, ch.at.Sub(began), meterStep, first)
				}
				if !flipped.IsZero() && ch.at.After(flipped.Add(100*time.Millisecond)) {
					t.Fatalf("a chunk of %d rows %v after the first access", ch.limit, ch.at.Sub(flipped))
				}
			}
			idle := tc.meter && !tc.busy && !tc.fail && tc.idle != small
			require.Equal(t, idle, full > 0, "%d chunks of %d rows, %d grown, among %d", full, most, grew, len(c.chunks))
			if tc.flip {
				require.Greater(t, c.chunks[len(c.chunks)-1].at.Sub(flipped), 200*time.Millisecond, "the move ended too soon after the access to tell")
			}
			if tc.idle == small {
				require.Zero(t, m.asked.Load(), "asked the store although chunks have one size")
			}
		})
	}
}

// TestMeterCountsIdleAnswers: the meter counts the answers in a row that saw no access, asks
// no more often than meterEvery, and after an access (or an error) starts over and pauses
// its questions for meterBackoff; chunks double every meterStep answers on both shards.
func TestMeterCountsIdleAnswers(t *testing.T) {
	every, step, backoff := meterEvery, meterStep, meterBackoff
	meterEvery, meterStep, meterBackoff = 0, 5, time.Hour
	t.Cleanup(func() { meterEvery, meterStep, meterBackoff = every, step, backoff })
	w := newSharedWorld(t, 1, 1, 2, 3)
	m := &meteredCopies{copyLimits: &copyLimits{MemShared: w.store}}
	mv := &mover[*MemTx]{Shared: w.shared(t, "m", m, SharedOptions{ChunkRows: 100, IdleChunkRows: 1000}), meter: newMeter(m, 1000)}
	ctx := context.Background()
	var rows []int
	for range 21 {
		rows = append(rows, mv.chunkRows(ctx, 0, 1))
	}
	want := slices.Concat(slices.Repeat([]int{100}, 4), slices.Repeat([]int{200}, 5), slices.Repeat([]int{400}, 5), slices.Repeat([]int{800}, 5), []int{1000, 1000})
	require.Equal(t, want, rows)
	require.Equal(t, int64(2*21), m.asked.Load())
	require.Equal(t, 100, mv.chunkRows(ctx, 0, 2), "a shard not asked before")

	m.busy.Store(true)
	require.Equal(t, 100, mv.chunkRows(ctx, 0, 1), "an access seen")
	m.busy.Store(false)
	asked := m.asked.Load()
	for range 10 {
		require.Equal(t, 100, mv.chunkRows(ctx, 0, 1), "questions paused after an access")
	}
	require.Equal(t, asked, m.asked.Load(), "asked within meterBackoff of an access")

	m.fail.Store(true)
	mv.meter = newMeter(m, 1000)
	for range 10 {
		require.Equal(t, 100, mv.chunkRows(ctx, 0, 1), "failing answers")
	}

	meterEvery = time.Hour
	m.fail.Store(false)
	mv.meter = newMeter(m, 1000)
	asked = m.asked.Load()
	for range 10 {
		mv.chunkRows(ctx, 0, 1)
	}
	require.Equal(t, asked+2, m.asked.Load(), "asked within meterEvery of the last question")
}

// TestSharedSlowChunksShrink: a grown chunk slower than meterChunkTime halves the most rows
// the chunks may grow to, and chunks of that most that take less than half of it double it
// again, up to IdleChunkRows.
func TestSharedSlowChunksShrink(t *testing.T) {
	every, step, chunkTime := meterEvery, meterStep, meterChunkTime
	meterEvery, meterStep, meterChunkTime = 0, 1, 12*time.Millisecond
	t.Cleanup(func() { meterEvery, meterStep, meterChunkTime = every, step, chunkTime })
	w := newSharedWorld(t, 60, 80, 3, 4)
	c := &copyLimits{MemShared: w.store, perRow: 400 * time.Microsecond} // 20 rows: 8 ms, 40: 16
	const slow = 40                                                      // chunks at that pace, then 40 times faster
	c.onCopy = func(int) {
		if len(c.chunks) == slow {
			c.perRow = 10 * time.Microsecond
		}
	}
	m := &meteredCopies{copyLimits: c}
	mv := w.shared(t, "grow", m, SharedOptions{Token: 1, ChunkRows: 5, IdleChunkRows: 80, Group: 16, IdleGroup: 16})
	require.NoError(t, mv.Run(context.Background(), slices.Values(w.owners)))
	w.check(t, true)
	require.Greater(t, len(c.chunks), slow+10)
	var limits []int
	for _, ch := range c.chunks {
		limits = append(limits, ch.limit)
	}
	first40 := slices.Index(limits, 40)
	require.NotEqual(t, -1, first40, "no chunk grew to 40 rows: %v", limits)
	for i, l := range limits[:slow] {
		require.LessOrEqual(t, l, 40, "chunk %d", i)
		if i > first40 {
			require.LessOrEqual(t, l, 20, "chunk %d, after a chunk of 40 rows took 16 ms: %v", i, limits[:slow])
		}
	}
	require.Contains(t, limits[slow:], 80, "chunks did not grow again once fast: %v", limits[slow:])
}

// groupSizes is a meteredCopies that records how many owners each group's first fence
// change (exporting on the old shard) holds, and when.
type groupSizes struct {
	*meteredCopies
	mu      sync.Mutex
	groups  []copyLimit // limit: the group's owners
	onFence func(owners int)
}

func (g *groupSizes) SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error {
	if state == Exporting {
		g.mu.Lock()
		g.groups = append(g.groups, copyLimit{time.Now(), len(owners)})
		if g.onFence != nil {
			g.onFence(len(owners))
		}
		g.mu.Unlock()
	}
	return g.meteredCopies.SetFence(ctx, migration, owners, shard, state, token)
}

// TestSharedGroupsGrowWhileIdle: a store that says its shards are idle gets groups of owners
// that double every meterStep answers up to IdleGroup, and Group again soon after its first
// access; a busy store, one that cannot tell, or IdleGroup no more than Group keep every
// group at Group. Every owner ends on its new shard with its rows.
func TestSharedGroupsGrowWhileIdle(t *testing.T) {
	every, step, backoff := meterEvery, meterStep, meterBackoff
	meterEvery, meterStep, meterBackoff = time.Millisecond, 3, 5*time.Millisecond
	t.Cleanup(func() { meterEvery, meterStep, meterBackoff = every, step, backoff })
	const group = 2
	for _, tc := range []struct {
		name        string
		meter, busy bool
		idle        int // IdleGroup
		flip        bool
	}{
		{name: "idle", meter: true, idle: 8},
		{name: "idle by default", meter: true},
		{name: "busy", meter: true, busy: true, idle: 8},
		{name: "no meter", idle: 8},
		{name: "one size", meter: true, idle: group},
		{name: "busy once big", meter: true, idle: 8, flip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSharedWorld(t, 400, 10, 3, 4)
			m := &meteredCopies{copyLimits: &copyLimits{MemShared: w.store}}
			m.busy.Store(tc.busy)
			g := &groupSizes{meteredCopies: m}
			var store SharedStore[*MemTx] = g
			if !tc.meter {
				store = struct{ SharedStore[*MemTx] }{g} // no AccessMeter
			}
			most := cmp.Or(tc.idle, 4*group)
			var flipped time.Time
			if tc.flip {
				g.onFence = func(owners int) {
					if owners == most && flipped.IsZero() {
						m.busy.Store(true)
						flipped = time.Now()
					}
				}
			}
			mv := w.shared(t, "grow", store, SharedOptions{Token: 1, Concurrency: 2, ChunkRows: 5, IdleChunkRows: 5, Group: group, IdleGroup: tc.idle})
			require.NoError(t, mv.Run(context.Background(), slices.Values(w.owners)))
			w.check(t, true)
			biggest, late := 0, 0
			for _, gr := range g.groups {
				biggest = max(biggest, gr.limit)
				if !flipped.IsZero() && gr.at.After(flipped.Add(100*time.Millisecond)) {
					late++
					require.LessOrEqual(t, gr.limit, group, "a group of %d owners %v after the first access", gr.limit, gr.at.Sub(flipped))
				}
			}
			idle := tc.meter && !tc.busy && tc.idle != group
			if idle {
				require.Equal(t, most, biggest, "groups of %v", g.groups)
			} else {
				require.LessOrEqual(t, biggest, group)
			}
			if tc.flip {
				require.Greater(t, late, 10, "the move ended too soon after the access to tell")
			}
		})
	}
}
