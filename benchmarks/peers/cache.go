package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

// The cache table: what a lookup costs when its table is not in the processor's caches, for
// the lookups whose table grows with the members: pool.Ring (160 points a member by default,
// about 22 bytes each with its index), pool.Maglev (2-byte slots, at least 100 a member),
// buraksezer/consistent (2n+1 partitions, 20 points a member) and names[xxhash % n], at each
// -cache member count, in two states of the caches:
//
//   - warm: one implementation alone, over the timing keys again and again: a service whose
//     lookups keep to a working set that stays cached;
//   - cold: batches of distinct keys, each batch right after reading 64 MiB, which evicts
//     the caches: a lookup among other work, as a cache tier or a proxy makes them.
//
// The scale table's interleaved rounds fall between the two. The last row is the floor of a
// cold lookup that reads memory at all: one load from memory, measured by a chase through a
// random cycle of 64 MiB, where each load waits for the one before.

const (
	sweepBytes  = 64 << 20 // more than this machine's caches: see the doc above
	coldBatch   = 256      // lookups timed after each sweep, each of a key not used before
	coldBatches = 101
)

// cacheTable prints the cache table.
func cacheTable(w io.Writer, c config, timingKeys []string, ts timings) error {
	fmt.Fprintf(w, "\nns per lookup by cache state (warm: alone over %d keys, lower quartile of %d rounds; cold: median of %d batches of %d new keys, each after reading %d MiB; rings: %d points per member)\n\n",
		len(timingKeys), c.rounds, coldBatches, coldBatch, sweepBytes>>20, c.vnodes)
	var t measure.Table
	t.Header = []string{"implementation", "members", "warm ns", "cold ns", "cold / warm"}
	mem := randomCycle(sweepBytes / 4)
	coldKeys := measure.Keys(3, coldBatches*coldBatch, c.keylen)
	for _, n := range c.cache {
		names := nodeNames(n)
		ls := []measure.Locator{namesModulo(names)}
		labels := []string{"names[xxhash % n]"}
		if n <= c.burakMax {
			b, err := buraksezerAt(n)
			if err != nil {
				return err
			}
			ls, labels = append(ls, &buraksezer{b}), append(labels, "buraksezer/consistent+xxhash")
		}
		for _, p := range []struct {
			name string
			new  func([]pool.Node) (pool.Pool, error)
		}{
			{"ours/pool-ring", func(nodes []pool.Node) (pool.Pool, error) {
				return pool.NewRing(nodes, pool.RingOptions{Vnodes: c.vnodes})
			}},
			{"ours/pool-maglev", func(nodes []pool.Node) (pool.Pool, error) { return pool.NewMaglev(nodes, pool.MaglevOptions{}) }},
		} {
			pl, err := poolOf(n, p.new)
			if err != nil {
				return fmt.Errorf("%s with %d members: %w", p.name, n, err)
			}
			ls, labels = append(ls, &named{pl}), append(labels, p.name)
		}
		for i, l := range ls {
			warm := measure.Race([]measure.Locator{l}, timingKeys, c.rounds, c.minDur)[0]
			cold := coldLookups(l, coldKeys, mem)
			ts[timing{"warm", labels[i], n}], ts[timing{"cold", labels[i], n}] = warm, cold
			t.Add(labels[i], fmt.Sprint(n), fmt.Sprintf("%.1f", warm), fmt.Sprintf("%.1f", cold), fmt.Sprintf("%.1fx", cold/warm))
		}
	}
	t.Add("one load from memory", "", "", fmt.Sprintf("%.1f", memoryLoad(mem)), "")
	_, err := t.WriteTo(w)
	return err
}

// namesModulo is names[xxhash(key) % n], the floor of a lookup that returns a name.
type namesModulo []string

func (m namesModulo) Locate(k string) int { return nodeIndex(m[xxhash.Sum64String(k)%uint64(len(m))]) }

// randomCycle returns next, a random cyclic permutation of [0, words): following next from
// any index visits every index once before it comes back (Sattolo's algorithm).
func randomCycle(words int) []uint32 {
	next := make([]uint32, words)
	for i := range next {
		next[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for i := words - 1; i > 0; i-- {
		j := r.IntN(i) // j < i: the swap keeps one cycle
		next[i], next[j] = next[j], next[i]
	}
	return next
}

// sweep reads a word of every cache line of mem, which leaves mem and nothing else in the
// caches, and returns their sum.
func sweep(mem []uint32) uint32 {
	var sum uint32
	for i := 0; i < len(mem); i += 16 {
		sum += mem[i]
	}
	return sum
}

// coldLookups returns the median ns per lookup of l over batches of coldBatch keys of keys,
// each batch right after a sweep of mem.
func coldLookups(l measure.Locator, keys []string, mem []uint32) float64 {
	var ns []float64
	sink := 0
	for batch := range slices.Chunk(keys, coldBatch) {
		sink += int(sweep(mem))
		began := time.Now()
		for _, k := range batch {
			sink += l.Locate(k)
		}
		ns = append(ns, float64(time.Since(began).Nanoseconds())/float64(len(batch)))
	}
	if sink == -1 { // keeps the sweeps and the lookups
		fmt.Print("")
	}
	return measure.Median(ns)
}

// memoryLoad returns the ns of one load that misses every cache: a chase of 1<<20 steps
// through next, a random cycle, each load giving the next index.
func memoryLoad(next []uint32) float64 {
	const steps = 1 << 20
	at := uint32(0)
	began := time.Now()
	for range steps {
		at = next[at]
	}
	took := time.Since(began)
	if at == 1<<31 { // keeps the chase
		fmt.Print("")
	}
	return float64(took.Nanoseconds()) / steps
}
