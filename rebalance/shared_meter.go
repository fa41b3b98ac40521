package rebalance

// The size of the copy's chunks and of the groups of owners moved together: ChunkRows and
// Group while the application uses the shards, up to IdleChunkRows and IdleGroup while it
// does not, as the store tells (AccessMeter).

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// How often a Run asks its store about one shard at most, how many answers in a row that
// say the shard is idle double the chunks, and how long the questions pause after an access
// is seen (the chunks stay small longer than that anyway, and a busy shard is asked ten
// times a second, not a hundred). The chunks grow as the evidence does: 5 answers that saw
// no access miss an application busy a tenth of the time 59 times in 100, 20 answers (ten
// times ChunkRows) 12 times ((1-0.1)^20).
var (
	meterEvery   = 10 * time.Millisecond
	meterStep    = 5
	meterBackoff = 100 * time.Millisecond
)

// meterChunkTime is how long a grown chunk may take. A slower one halves the most rows the
// chunks may grow to, and one at that most in less than half the time doubles it again: as
// pt-online-schema-change's --chunk-time does, the size follows what the shards do in that
// time, which bounds the transaction and the memory of a chunk of wide rows.
var meterChunkTime = 100 * time.Millisecond

// meter keeps what an AccessMeter said of each shard, for all the movers of one Run.
type meter struct {
	am     AccessMeter // nil: the store cannot tell, and chunks stay ChunkRows
	mu     sync.Mutex
	shards map[int]*shardUse
	most   atomic.Int64 // the most rows a grown chunk may have now (meterChunkTime)
}

// shardUse is what a meter knows of one shard: when to ask next, whether a question is
// under way, and how many answers in a row said idle.
type shardUse struct {
	next   time.Time
	asking bool
	idle   int
}

func newMeter(store any, idleChunkRows int) *meter {
	am, _ := store.(AccessMeter)
	mt := &meter{am: am, shards: map[int]*shardUse{}}
	mt.most.Store(int64(idleChunkRows))
	return mt
}

// chunkRows returns how many rows the next chunk copied from a to b handles: ChunkRows,
// doubled for every meterStep answers in a row that saw no access on either shard, up to
// IdleChunkRows.
func (m *mover[Tx]) chunkRows(ctx context.Context, a, b int) int {
	return m.grown(ctx, a, b, m.opts.ChunkRows, int(m.meter.most.Load()))
}

// groupSize returns how many owners moving from a to b the next group holds: Group, doubled
// for every meterStep answers in a row that saw no access on either shard, up to IdleGroup.
func (m *mover[Tx]) groupSize(ctx context.Context, a, b int) int {
	return m.grown(ctx, a, b, m.opts.Group, m.opts.IdleGroup)
}

// grown returns n doubled for every meterStep answers in a row that saw no access on shard
// a or b, up to most; n if the store cannot tell or most is not above n.
func (m *mover[Tx]) grown(ctx context.Context, a, b, n, most int) int {
	if m.meter.am == nil || most <= n {
		return n
	}
	for k := min(m.meter.idle(ctx, a), m.meter.idle(ctx, b)) / meterStep; k > 0 && n < most; k-- {
		n *= 2
	}
	return min(n, most)
}

// took notes that a chunk of limit rows took d: a grown chunk slower than meterChunkTime
// halves the most rows (not below ChunkRows); one of the most rows in less than half of it
// doubles them (up to IdleChunkRows).
func (m *mover[Tx]) took(limit int, d time.Duration) {
	switch most := int(m.meter.most.Load()); {
	case limit > m.opts.ChunkRows && d > meterChunkTime:
		m.meter.most.Store(int64(max(m.opts.ChunkRows, limit/2)))
	case limit == most && most < m.opts.IdleChunkRows && d < meterChunkTime/2:
		m.meter.most.Store(int64(min(m.opts.IdleChunkRows, 2*most)))
	}
}

// idle returns how many answers in a row about shard said idle. It asks first if the shard
// is due (the other movers go on with what was said last). An error counts as an access:
// chunks grow only on a shard known to be idle.
func (mt *meter) idle(ctx context.Context, shard int) int {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	u := mt.shards[shard]
	if u == nil {
		u = &shardUse{}
		mt.shards[shard] = u
	}
	if !u.asking && !time.Now().Before(u.next) {
		u.asking = true
		mt.mu.Unlock()
		busy, err := mt.am.Accessing(ctx, shard)
		mt.mu.Lock()
		if busy || err != nil {
			u.idle, u.next = 0, time.Now().Add(meterBackoff)
		} else {
			u.idle, u.next = u.idle+1, time.Now().Add(meterEvery)
		}
		u.asking = false
	}
	return u.idle
}
