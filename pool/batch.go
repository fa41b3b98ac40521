package pool

import "fmt"

// BatchLocator is implemented by pools that place many keys in one call faster than one
// Locate per key. LocateBatch sets dst[i] to the node of keys[i], exactly what Locate(keys[i])
// returns, for every i in [0, len(keys)), and leaves the rest of dst alone.
//
// Every key of one call sees the same membership: a change that runs concurrently takes
// effect before or after the whole batch. Like Locate, LocateBatch never allocates and takes
// no lock. It panics if len(dst) < len(keys): like an index out of range, that is a mistake
// in the calling code, not bad data.
type BatchLocator interface {
	LocateBatch(keys []string, dst []string)
}

// LocateBatch sets dst[i] to p.Locate(keys[i]) for every key, with p's own LocateBatch when p
// implements BatchLocator and one Locate per key otherwise (then each key sees the membership
// of the moment it is looked up). It panics if len(dst) < len(keys).
func LocateBatch(p Pool, keys []string, dst []string) {
	if b, ok := p.(BatchLocator); ok {
		b.LocateBatch(keys, dst)
		return
	}
	dst = batchDst(keys, dst)
	for i, k := range keys {
		dst[i] = p.Locate(k)
	}
}

// batchDst returns dst[:len(keys)], or panics if dst is shorter than keys.
func batchDst(keys, dst []string) []string {
	if len(dst) < len(keys) {
		panicShortBatch(len(keys), len(dst))
	}
	return dst[:len(keys)]
}

// panicShortBatch is out of line so that batchDst stays small enough to inline.
//
//go:noinline
func panicShortBatch(keys, dst int) {
	panic(fmt.Sprintf("pool: LocateBatch: %d keys but room for %d nodes in dst", keys, dst))
}
