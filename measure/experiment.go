package measure

import (
	"fmt"
	"runtime"

	"github.com/shardkit/shard"
)

// VnodesDefault are the vnode counts of the consistent-hash homework's [002] experiment.
var VnodesDefault = []int{100, 300, 500, 1000, 2000, 5000}

// VnodesPoint is one point of the consistent-hash homework's [002] curve: the standard
// deviation of the per-shard counts with Vnodes points per shard, averaged over several key
// sets.
type VnodesPoint struct {
	Vnodes    int     `json:"vnodes"`
	Stddev    float64 `json:"stddev"`     // in keys, as the homework [002] reports it
	StddevPct float64 `json:"stddev_pct"` // in % of the mean count
}

// VnodesCurve runs the consistent-hash homework's [002] experiment: for each of runs rounds,
// keys random UUIDs placed on a Murmur ring (MurmurToken positions, as NewMurmurRing) of
// shards shards with each vnode count; it returns the deviation averaged over the rounds for
// each count. Each round names its servers afresh, as the consistent-hash homework [002] names
// hosts, so the average is over different rings as well as different keys: with one fixed
// ring, its own uneven arcs would dominate every round.
func VnodesCurve(shards int, vnodes []int, keys, runs int) ([]VnodesPoint, error) {
	points := make([]VnodesPoint, len(vnodes))
	for i, v := range vnodes {
		points[i].Vnodes = v
	}
	for run := range runs {
		ks := UUIDs(uint64(run)+1, keys)
		for i, v := range vnodes {
			r, err := shard.NewRing(shards, shard.RingOptions{
				Hash:   murmurPosition,
				Vnodes: v,
				Name:   func(s, j int) string { return fmt.Sprintf("host%d.%d#%d", run, s, j) },
			})
			if err != nil {
				return nil, err
			}
			b := BalanceOf(Loads(Placement(r, ks), shards))
			points[i].StddevPct += b.StddevPct / float64(runs)
		}
	}
	mean := float64(keys) / float64(shards)
	for i := range points {
		points[i].Stddev = points[i].StddevPct * mean / 100
	}
	return points, nil
}

// murmurPosition orders Cassandra tokens as unsigned numbers, the ring's order: flipping the
// sign bit maps MinInt64..MaxInt64 onto 0..MaxUint64.
func murmurPosition(key string) uint64 {
	return uint64(shard.MurmurToken(key)) ^ 1<<63
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
