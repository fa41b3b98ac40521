package rebalance

// The size of the copy's chunks: ChunkRows while the application uses the shards,
// IdleChunkRows while it does not, as the store tells (AccessMeter).

import (
	"context"
	"sync"
	"time"
)

// How often a Run asks its store about one shard, and how long after the last access seen
// there the shard counts as idle: 25 questions, which see an application that is busy a
// tenth of the time 93 times in 100 ((1-0.1)^25 = 0.07), and the first access seen brings
// the chunks back to ChunkRows for as long again.
var (
	meterEvery = 10 * time.Millisecond
	meterQuiet = 250 * time.Millisecond
)

// meter keeps what an AccessMeter said of each shard, for all the movers of one Run.
type meter struct {
	am     AccessMeter // nil: the store cannot tell, and chunks stay ChunkRows
	mu     sync.Mutex
	shards map[int]*shardUse
}

// shardUse is what a meter knows of one shard: when it last asked, whether a question is
// under way, and when it last saw an access (at first, when it started to ask).
type shardUse struct {
	asked, seen time.Time
	asking      bool
}

func newMeter(store any) *meter {
	am, _ := store.(AccessMeter)
	return &meter{am: am, shards: map[int]*shardUse{}}
}

// chunkRows returns how many rows the next chunk copied from a to b handles.
func (m *mover[Tx]) chunkRows(ctx context.Context, a, b int) int {
	if m.meter.am == nil || m.opts.IdleChunkRows <= m.opts.ChunkRows || !m.meter.idle(ctx, a) || !m.meter.idle(ctx, b) {
		return m.opts.ChunkRows
	}
	return m.opts.IdleChunkRows
}

// idle reports whether no access has been seen on shard for meterQuiet. It asks the store
// first if nobody did within meterEvery (the other movers go on with what was said last). An
// error counts as an access: chunks grow only on a shard known to be idle.
func (mt *meter) idle(ctx context.Context, shard int) bool {
	now := time.Now()
	mt.mu.Lock()
	u := mt.shards[shard]
	if u == nil {
		u = &shardUse{seen: now}
		mt.shards[shard] = u
	}
	ask := !u.asking && now.Sub(u.asked) >= meterEvery
	if ask {
		u.asking, u.asked = true, now
	}
	mt.mu.Unlock()
	if ask {
		busy, err := mt.am.Accessing(ctx, shard)
		mt.mu.Lock()
		u.asking = false
		if busy || err != nil {
			u.seen = time.Now()
		}
		mt.mu.Unlock()
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return time.Since(u.seen) >= meterQuiet
}
