package rebalance

// The size of the copy's chunks: ChunkRows while the application uses the shards,
// IdleChunkRows while it does not, as the store tells (AccessMeter).

import (
	"context"
	"sync"
	"time"
)

// How often a Run asks its store about one shard, and how long the store must have said
// the shard is idle, each time, for chunks to grow: 25 questions, which see an application
// busy a tenth of the time 93 times in 100 ((1-0.1)^25 = 0.07). After an access is seen the
// questions pause for meterBackoff: the chunks stay small at least that long anyway, and a
// busy shard is asked ten times a second, not a hundred.
var (
	meterEvery   = 10 * time.Millisecond
	meterQuiet   = 250 * time.Millisecond
	meterBackoff = 100 * time.Millisecond
)

// meter keeps what an AccessMeter said of each shard, for all the movers of one Run.
type meter struct {
	am     AccessMeter // nil: the store cannot tell, and chunks stay ChunkRows
	mu     sync.Mutex
	shards map[int]*shardUse
}

// shardUse is what a meter knows of one shard: when to ask next, whether a question is
// under way, when the last answer came, and since when every answer said idle (zero if the
// last one did not).
type shardUse struct {
	next, answered, idleSince time.Time
	asking                    bool
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

// idle reports whether the store has said shard is idle, in answers at most two meterEvery
// apart, for meterQuiet. It asks first if the shard is due (the other movers go on with what
// was said last). An error counts as an access: chunks grow only on a shard known to be idle.
func (mt *meter) idle(ctx context.Context, shard int) bool {
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
		now := time.Now()
		mt.mu.Lock()
		switch {
		case busy || err != nil:
			u.idleSince, u.next = time.Time{}, now.Add(meterBackoff)
		case u.idleSince.IsZero() || now.Sub(u.answered) > 2*meterEvery:
			// The first idle answer, or one after a gap no answer covers: start over.
			u.idleSince, u.next = now, now.Add(meterEvery)
		default:
			u.next = now.Add(meterEvery)
		}
		u.answered, u.asking = now, false
		mt.mu.Unlock()
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return !u.idleSince.IsZero() && time.Since(u.idleSince) >= meterQuiet
}
