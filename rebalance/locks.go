package rebalance

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/shardkit/shard/internal/keyhash"
)

// stripeTable holds the per-owner locks of one migration ID in this process, striped by hash.
// Every Migration value of that ID shares them (see lockTable): a mover started twice by
// mistake, or a mover that resumes after an error with a new value while the application
// keeps using the first one for Do, must wait for the other value's accesses and moves, or a
// write through one value could land on the old shard between the other's count and its
// deletion of the old copy.
//
// Values of the ID over one Store share whether the migration finished too: a Finish through
// one sets it while it holds every lock, so that a Do through another, which read its
// owner's mark as Unmoved, does not write a new owner's first rows on the old shard once
// the shards have been listed and the finish recorded.
type stripeTable struct {
	stripes  []sync.RWMutex
	mu       sync.Mutex
	finished map[any]*atomic.Bool // by Store
}

// finishedOver returns the flag that the values of the ID over store share, or a flag of its
// own for a store that cannot be a map key.
func (l *stripeTable) finishedOver(store Store) *atomic.Bool {
	if v := reflect.ValueOf(store); !v.IsValid() || !v.Comparable() {
		return new(atomic.Bool)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished == nil {
		l.finished = map[any]*atomic.Bool{}
	}
	f := l.finished[store]
	if f == nil {
		f = new(atomic.Bool)
		l.finished[store] = f
	}
	return f
}

func (l *stripeTable) of(owner string) *sync.RWMutex {
	return &l.stripes[keyhash.XXH64(owner)%uint64(len(l.stripes))]
}

// perID maps a key (a migration ID, a Repin ID and its Store) to the value its live users
// in this process share (the locks of a Migration ID, the batch of a Repin). It holds weak
// pointers, and a cleanup deletes a key's entry once no user of the value is reachable, so
// it holds at most one entry per key in use, not one per key ever made.
type perID[K comparable, T any] struct {
	mu   sync.Mutex
	byID map[K]weak.Pointer[T]
}

// get returns the value of id, made by make if no live user of id holds one.
func (p *perID[K, T]) get(id K, make func() *T) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := p.byID[id].Value(); v != nil {
		return v
	}
	v := make()
	wp := weak.Make(v)
	if p.byID == nil {
		p.byID = map[K]weak.Pointer[T]{}
	}
	p.byID[id] = wp
	// The cleanup holds wp, which does not keep v alive; it deletes the entry only if no
	// newer value of id replaced it meanwhile.
	runtime.AddCleanup(v, func(id K) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.byID[id] == wp {
			delete(p.byID, id)
		}
	}, id)
	return v
}

var lockTables perID[string, stripeTable]

// lockTable returns the locks of migration id, made with n stripes if no live Migration of
// id has them; otherwise the existing ones, whatever their number of stripes.
func lockTable(id string, n int) *stripeTable {
	return lockTables.get(id, func() *stripeTable { return &stripeTable{stripes: make([]sync.RWMutex, n)} })
}
