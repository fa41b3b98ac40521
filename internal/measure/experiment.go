package measure

import (
	"runtime"
)

// VnodesDefault are the vnode counts of document 002's experiment.
var VnodesDefault = []int{100, 300, 500, 1000, 2000, 5000}

// VnodesPoint is one point of document 002's curve: the standard deviation of the
// per-shard counts with Vnodes points per shard, averaged over several key sets.
type VnodesPoint struct {
	Vnodes    int     `json:"vnodes"`
	Stddev    float64 `json:"stddev"`     // in keys, as document 002 reports it
	StddevPct float64 `json:"stddev_pct"` // in % of the mean count
}

// VnodesCurve runs document 002's experiment: for each seed, keys random UUIDs placed on a
// ring of shards shards with each vnode count; it returns the deviation averaged over the
// seeds for each count. newRing builds the ring.
func VnodesCurve(newRing func(shards, vnodes int) (Locator, error), shards int, vnodes []int, keys, seeds int) ([]VnodesPoint, error) {
	points := make([]VnodesPoint, len(vnodes))
	for i, v := range vnodes {
		points[i].Vnodes = v
	}
	rings := make([]Locator, len(vnodes))
	for i, v := range vnodes {
		r, err := newRing(shards, v)
		if err != nil {
			return nil, err
		}
		rings[i] = r
	}
	for seed := range seeds {
		ks := UUIDs(uint64(seed)+1, keys)
		for i, r := range rings {
			b := BalanceOf(Loads(Placement(r, ks), shards))
			points[i].StddevPct += b.StddevPct / float64(seeds)
		}
	}
	mean := float64(keys) / float64(shards)
	for i := range points {
		points[i].Stddev = points[i].StddevPct * mean / 100
	}
	return points, nil
}

// HeapBytes returns the heap bytes that the value build returns keeps reachable: the growth
// of the live heap across the call, each side measured after a full collection, so garbage
// made while building does not count. The runtime frees a few hundred bytes of its own now
// and then, so it builds three times and returns the median growth, with the last value.
// It is exact only while no other goroutine allocates.
func HeapBytes[T any](build func() (T, error)) (T, int64, error) {
	var v T
	var sizes []float64
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var err error
		v, err = build()
		if err != nil {
			return v, 0, err
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(v)
		sizes = append(sizes, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)))
	}
	return v, int64(Median(sizes)), nil
}
