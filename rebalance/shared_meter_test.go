package rebalance

import (
	"context"
	"errors"
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
	c.mu.Unlock()
	time.Sleep(time.Millisecond)
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

// TestSharedChunksGrowWhileIdle: a store that says its shards are idle gets chunks of
// IdleChunkRows once it has said so for meterQuiet (never before), and ChunkRows again within
// a question or two of its first access; a busy store, one whose answers fail, one that cannot
// tell, or IdleChunkRows no more than ChunkRows keep every chunk at ChunkRows. Every owner
// ends on its new shard with its rows.
func TestSharedChunksGrowWhileIdle(t *testing.T) {
	every, quiet, backoff := meterEvery, meterQuiet, meterBackoff
	meterEvery, meterQuiet, meterBackoff = 5*time.Millisecond, 30*time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { meterEvery, meterQuiet, meterBackoff = every, quiet, backoff })
	const small, big = 5, 40
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
					if limit != small && flipped.IsZero() {
						m.busy.Store(true)
						flipped = time.Now()
					}
				}
			}
			mv := w.shared(t, "grow", store, SharedOptions{Token: 1, Concurrency: 2, ChunkRows: small, IdleChunkRows: tc.idle})
			began := time.Now()
			require.NoError(t, mv.Run(context.Background(), slices.Values(w.owners)))
			w.check(t, true)
			want := tc.idle
			if want == 0 {
				want = 10 * small
			}
			grew, after := 0, 0
			for _, ch := range c.chunks {
				switch {
				case ch.limit == small:
				case ch.limit != want:
					t.Fatalf("a chunk of %d rows: want %d or %d", ch.limit, small, want)
				case ch.at.Before(began.Add(meterQuiet)):
					t.Fatalf("a chunk of %d rows %v after the start, before the shards were idle for %v", ch.limit, ch.at.Sub(began), meterQuiet)
				case !flipped.IsZero() && ch.at.After(flipped.Add(100*time.Millisecond)):
					after++
					fallthrough
				default:
					grew++
				}
			}
			idle := tc.meter && !tc.busy && !tc.fail && tc.idle != small
			require.Equal(t, idle, grew > 0, "%d chunks of %d rows among %d", grew, want, len(c.chunks))
			require.Zero(t, after, "chunks of %d rows 100 ms after the first access", want)
			if tc.flip {
				require.Greater(t, c.chunks[len(c.chunks)-1].at.Sub(flipped), 200*time.Millisecond, "the move ended too soon after the access to tell")
			}
			if tc.idle == small {
				require.Zero(t, m.asked.Load(), "asked the store although chunks have one size")
			}
		})
	}
}

// TestMeterWantsEveryAnswerIdle: a shard counts as idle only after meterQuiet of idle
// answers no more than two meterEvery apart; a gap starts the count over, and an access seen
// ends it at once and pauses the questions for meterBackoff.
func TestMeterWantsEveryAnswerIdle(t *testing.T) {
	every, quiet, backoff := meterEvery, meterQuiet, meterBackoff
	meterEvery, meterQuiet, meterBackoff = 2*time.Millisecond, 20*time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { meterEvery, meterQuiet, meterBackoff = every, quiet, backoff })
	m := &meteredCopies{}
	mt := newMeter(m)
	ctx := context.Background()
	askFor := func(d time.Duration) (idle bool) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Microsecond) {
			idle = mt.idle(ctx, 0)
		}
		return idle
	}
	require.False(t, mt.idle(ctx, 0), "idle at the first answer")
	time.Sleep(3 * meterQuiet / 2)
	require.False(t, mt.idle(ctx, 0), "idle after one answer and a gap")
	require.True(t, askFor(3*meterQuiet/2), "not idle after answers every %v for %v", meterEvery, 3*meterQuiet/2)
	m.busy.Store(true)
	asked := m.asked.Load()
	askFor(10 * meterBackoff)
	require.False(t, mt.idle(ctx, 0), "idle after an access")
	require.LessOrEqual(t, m.asked.Load()-asked, int64(12), "a busy shard asked more often than every %v", meterBackoff)
	m.busy.Store(false)
	require.True(t, askFor(3*meterQuiet/2))
	require.False(t, mt.idle(ctx, 1), "another shard is not known idle")
}
