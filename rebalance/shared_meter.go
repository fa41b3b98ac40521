package rebalance

// The size of the copy's chunks: ChunkRows while the application uses the shards,
// IdleChunkRows while it does not, as the store tells (AccessMeter).

import (
	"context"
	"sync"
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

// meter keeps what an AccessMeter said of each shard, for all the movers of one Run.
type meter struct {
	am     AccessMeter // nil: the store cannot tell, and chunks stay ChunkRows
	mu     sync.Mutex
	shards map[int]*shardUse
}

// shardUse is what a meter knows of one shard: when to ask next, whether a question is
// under way, and how many answers in a row said idle.
type shardUse struct {
	next   time.Time
	asking bool
	idle   int
}

func newMeter(store any) *meter {
	am, _ := store.(AccessMeter)
	return &meter{am: am, shards: map[int]*shardUse{}}
}

// chunkRows returns how many rows the next chunk copied from a to b handles: ChunkRows,
// doubled for every meterStep answers in a row that saw no access on either shard, up to
// IdleChunkRows.
func (m *mover[Tx]) chunkRows(ctx context.Context, a, b int) int {
	rows := m.opts.ChunkRows
	if m.meter.am == nil || m.opts.IdleChunkRows <= rows {
		return rows
	}
	for n := min(m.meter.idle(ctx, a), m.meter.idle(ctx, b)) / meterStep; n > 0 && rows < m.opts.IdleChunkRows; n-- {
		rows *= 2
	}
	return min(rows, m.opts.IdleChunkRows)
}

// idle returns how many answers in a row about shard said idle. It asks first if the shard
// is due (the other movers go on with what was said last). An error counts as an access:
// chunks grow only on a shard known to be idle.
func (mt *meter) idle(ctx context.Context, shard int) int {
	mt.mu.Lock()
	u := mt.shards[shard]
	if u == nil {
		u = &shardUse{}
		mt.shards[shard] = u
	}
	ask := !u.asking && !time.Now().Before(u.next)
	u.asking = u.asking || ask
	mt.mu.Unlock()
	if ask {
		busy, err := mt.am.Accessing(ctx, shard)
		mt.mu.Lock()
		if busy || err != nil {
			u.idle, u.next = 0, time.Now().Add(meterBackoff)
		} else {
			u.idle, u.next = u.idle+1, time.Now().Add(meterEvery)
		}
		u.asking = false
		mt.mu.Unlock()
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return u.idle
}
