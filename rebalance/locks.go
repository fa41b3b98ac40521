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

// lockTables maps a migration ID to the locks its live Migration values share. It holds
// weak pointers, and a cleanup deletes an ID's entry once no value of it is reachable, so
// it holds at most one entry per ID that a live Migration uses, not one per ID ever made.
var lockTables = struct {
	sync.Mutex
	byID map[string]weak.Pointer[stripeTable]
}{byID: map[string]weak.Pointer[stripeTable]{}}

// lockTable returns the locks of migration id, made with n stripes if no live Migration of
// id has them; otherwise the existing ones, whatever their number of stripes.
func lockTable(id string, n int) *stripeTable {
	lockTables.Lock()
	defer lockTables.Unlock()
	if l := lockTables.byID[id].Value(); l != nil {
		return l
	}
	l := &stripeTable{stripes: make([]sync.RWMutex, n)}
	wp := weak.Make(l)
	lockTables.byID[id] = wp
	// The cleanup holds wp, which does not keep l alive; it deletes the entry only if no
	// newer table of id replaced it meanwhile.
	runtime.AddCleanup(l, func(id string) {
		lockTables.Lock()
		defer lockTables.Unlock()
		if lockTables.byID[id] == wp {
			delete(lockTables.byID, id)
		}
	}, id)
	return l
}
