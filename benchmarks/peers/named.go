package main

import (
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
	rendezvous "github.com/dgryski/go-rendezvous"
	"github.com/golang/groupcache/consistenthash"
	"github.com/serialx/hashring"

	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

// The tables of named members: the replicas of a key (our pools' AppendN against the peers'
// "closest n members"), and what building a pool of many members costs in time and memory.

// built is one buraksezer/consistent ring and what its New cost.
type built struct {
	c     *consistent.Consistent
	took  time.Duration
	bytes int64 // heap kept
}

// buraksezerRings holds the rings built so far, by member count: its New takes minutes
// with 10^4 members, so every table shares one ring of each size.
var buraksezerRings = map[int]*built{}

// buraksezerAt returns buraksezer/consistent with n members node-00000, ..., xxhash, the
// default 20 points per member and load bound 1.25, and max(271, 2n+1) partitions: more
// members than partitions/1.25 make it panic.
func buraksezerAt(n int) (*consistent.Consistent, error) {
	if b, ok := buraksezerRings[n]; ok {
		return b.c, nil
	}
	ms := make([]consistent.Member, n)
	for i, name := range nodeNames(n) {
		ms[i] = member(name)
	}
	var c *consistent.Consistent
	took, bytes := timeBuild(func() { // names made above: not charged to it
		c = consistent.New(ms, consistent.Config{
			Hasher:         xxHasher{},
			PartitionCount: max(consistent.DefaultPartitionCount, 2*n+1),
		})
	}, func() any { return c })
	buraksezerRings[n] = &built{c, took, bytes}
	return c, nil
}

// timeBuild runs build once and returns how long it took and how much the heap grew by
// keeping what kept returns afterwards (each read after a GC).
func timeBuild(build func(), kept func() any) (time.Duration, int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	build()
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept())
	return took, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// poolOf returns our pool of n members node-00000, ... of weight 1, made by newPool.
func poolOf(n int, newPool func([]pool.Node) (pool.Pool, error)) (pool.Pool, error) {
	nodes := make([]pool.Node, n)
	for i, name := range nodeNames(n) {
		nodes[i] = pool.Node{Name: name}
	}
	return newPool(nodes)
}

// ourPools are the pools of the replicas and build tables, with the options of the main
// table (vnodes points per node for the ring).
func ourPools(vnodes int) []struct {
	name string
	new  func([]pool.Node) (pool.Pool, error)
} {
	return []struct {
		name string
		new  func([]pool.Node) (pool.Pool, error)
	}{
		{"ours/pool-ring", func(n []pool.Node) (pool.Pool, error) { return pool.NewRing(n, pool.RingOptions{Vnodes: vnodes}) }},
		{"ours/pool-rendezvous", func(n []pool.Node) (pool.Pool, error) { return pool.NewRendezvous(n, pool.RendezvousOptions{}) }},
		{"ours/pool-maglev", func(n []pool.Node) (pool.Pool, error) { return pool.NewMaglev(n, pool.MaglevOptions{}) }},
		{"ours/pool-memento", func(n []pool.Node) (pool.Pool, error) { return pool.NewMemento(n) }},
		{"ours/pool-multi-probe", func(n []pool.Node) (pool.Pool, error) { return pool.NewMultiProbe(n, pool.MultiProbeOptions{}) }},
		{"ours/pool-modula", func(n []pool.Node) (pool.Pool, error) { return pool.NewModula(n, pool.ModulaOptions{}) }},
	}
}

// The replicas contestants find a key's first three distinct members behind the Locator
// interface that the races time, and return the third member's index.

// ourReplicas calls AppendN with room in dst, as a caller that keeps its buffer does.
type ourReplicas struct {
	p   pool.Pool
	dst []string
}

func (r *ourReplicas) Locate(k string) int {
	r.dst = r.p.AppendN(r.dst[:0], k, 3)
	return nodeIndex(r.dst[2])
}

type buraksezerReplicas struct{ c *consistent.Consistent }

func (b *buraksezerReplicas) Locate(k string) int {
	m, err := b.c.GetClosestN(bytesOf(k), 3)
	if err != nil {
		return 0
	}
	return nodeIndex(m[2].String())
}

type serialxReplicas struct{ r *hashring.HashRing }

func (s *serialxReplicas) Locate(k string) int {
	m, _ := s.r.GetNodes(k, 3)
	if len(m) < 3 {
		return 0
	}
	return nodeIndex(m[2])
}

// replicasTable races, at each member count of c.replicas, the first three distinct members
// of a key: our pools' AppendN(dst, key, 3) with room in dst against buraksezer/consistent's
// GetClosestN(key, 3) and serialx/hashring's GetNodes(key, 3), on the same members and keys.
func replicasTable(w io.Writer, c config, timingKeys []string, ts timings, allocs map[string]float64) error {
	fmt.Fprintf(w, "\nthe first 3 distinct members of a key (replicas): ours AppendN(dst, key, 3) with room in dst, buraksezer/consistent GetClosestN(key, 3), serialx/hashring GetNodes(key, 3); one race per count, on as many of the keys as the slowest can look up in %v; rings: %d points per member (buraksezer: its default 20)\n\n", replicaPass, c.vnodes)
	var t measure.Table
	t.Header = []string{"implementation", "members", "keys", "ns/op", "allocs/op", "buraksezer / ours"}
	for _, n := range c.replicas {
		var live []measure.Locator
		var names []string
		for _, p := range ourPools(c.vnodes) {
			if p.name == "ours/pool-rendezvous" && n > 1000 || p.name == "ours/pool-multi-probe" {
				continue // O(n) and O(k log n) per replica: not contenders here
			}
			if p.name == "ours/pool-ring" && n*c.vnodes > 1<<22 {
				continue
			}
			pl, err := poolOf(n, p.new)
			if err != nil {
				return fmt.Errorf("%s with %d members: %w", p.name, n, err)
			}
			live, names = append(live, &ourReplicas{p: pl, dst: make([]string, 0, 3)}), append(names, p.name+" AppendN")
		}
		if n <= c.burakMax {
			bc, err := buraksezerAt(n)
			if err != nil {
				return err
			}
			live, names = append(live, &buraksezerReplicas{bc}), append(names, "buraksezer/consistent+xxhash GetClosestN")
		}
		if n <= 1000 { // 6 s to build with 10^4 members
			weights := make(map[string]int, n)
			for _, name := range nodeNames(n) {
				weights[name] = c.vnodes
			}
			live, names = append(live, &serialxReplicas{hashring.NewWithWeights(weights)}), append(names, "serialx/hashring GetNodes")
		}
		keys := replicaKeys(live, timingKeys)
		nsAll := measure.Race(live, keys, c.rounds, c.minDur)
		burak := 0.0
		for i, name := range names {
			ts[timing{"replicas", name, n}] = nsAll[i]
			if name == "buraksezer/consistent+xxhash GetClosestN" {
				burak = nsAll[i]
			}
		}
		for i, name := range names {
			a := measure.AllocsPerLocate(live[i], keys)
			ratio := ""
			if name[:5] == "ours/" {
				allocs[name] = max(allocs[name], a)
				if burak > 0 {
					ratio = fmt.Sprintf("%.1fx", burak/nsAll[i])
				}
			}
			t.Add(name, strconv.Itoa(n), strconv.Itoa(len(keys)), fmt.Sprintf("%.1f", nsAll[i]), fmt.Sprintf("%.0f", a), ratio)
		}
	}
	_, err := t.WriteTo(w)
	return err
}

// replicaPass is about the longest one contestant's pass over the keys may take in the
// replicas table: buraksezer/consistent's GetClosestN sorts every member for each key
// (0.6 ms a key with 1000 members), so a pass over all the timing keys would take minutes.
const replicaPass = 50 * time.Millisecond

// With few keys, ours' tables stay in cache: their times at 1000 members and more are
// lower here than over all the timing keys (BenchmarkPoolAppendN in package pool has
// those); the ratios to buraksezer are large enough that this does not decide them.
//
// replicaKeys returns the first keys, a power of two from 16 up to all of them, that the
// slowest of ls looks up in about replicaPass, judged by the median of 5 lookups each.
func replicaKeys(ls []measure.Locator, keys []string) []string {
	slowest := time.Duration(0)
	for _, l := range ls {
		var ds []float64
		for i := range 5 {
			start := time.Now()
			l.Locate(keys[i%len(keys)])
			ds = append(ds, float64(time.Since(start)))
		}
		slowest = max(slowest, time.Duration(measure.Median(ds)))
	}
	n := 16
	for n*2 <= len(keys) && time.Duration(n*2)*slowest <= replicaPass {
		n *= 2
	}
	return keys[:min(n, len(keys))]
}

// buildTable builds every pool of ours and every peer that names its members with c.build
// members, once each, and prints the time it took and the heap the result keeps per member.
func buildTable(w io.Writer, c config) error {
	n := c.build
	fmt.Fprintf(w, "\nbuilding with %d members, once each: time, and the heap the result keeps per member (after a GC; rings: %d points per member, buraksezer: 20)\n\n", n, c.vnodes)
	var t measure.Table
	t.Header = []string{"implementation", "build ms", "bytes per member"}
	add := func(name string, took time.Duration, bytes int64) {
		t.Add(name, fmt.Sprintf("%.1f", float64(took)/1e6), fmt.Sprintf("%.0f", float64(bytes)/float64(n)))
	}
	for _, p := range ourPools(c.vnodes) {
		if p.name == "ours/pool-ring" && n*c.vnodes > 1<<22 {
			continue
		}
		nodes := make([]pool.Node, n)
		for i, name := range nodeNames(n) {
			nodes[i] = pool.Node{Name: name}
		}
		var pl pool.Pool
		var err error
		took, bytes := timeBuild(func() { pl, err = p.new(nodes) }, func() any { return pl })
		if err != nil {
			return fmt.Errorf("%s with %d members: %w", p.name, n, err)
		}
		add(p.name, took, bytes)
	}
	names := nodeNames(n)
	if n <= c.burakMax {
		if _, err := buraksezerAt(n); err != nil {
			return err
		}
		b := buraksezerRings[n]
		add("buraksezer/consistent+xxhash", b.took, b.bytes)
	}
	var gr *rendezvous.Rendezvous
	took, bytes := timeBuild(func() { gr = rendezvous.New(names, xxhash.Sum64String) }, func() any { return gr })
	add("dgryski/go-rendezvous+xxhash", took, bytes)
	var sr *hashring.HashRing
	weights := make(map[string]int, n)
	for _, name := range names {
		weights[name] = c.vnodes
	}
	took, bytes = timeBuild(func() { sr = hashring.NewWithWeights(weights) }, func() any { return sr })
	add("serialx/hashring", took, bytes)
	var gm *consistenthash.Map
	took, bytes = timeBuild(func() {
		gm = consistenthash.New(c.vnodes, crc32.ChecksumIEEE)
		gm.Add(names...)
	}, func() any { return gm })
	add("golang/groupcache/consistenthash", took, bytes)
	_, err := t.WriteTo(w)
	return err
}
