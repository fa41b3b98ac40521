// Package measure is how this project measures a placement: seeded key sets, balance and
// movement statistics, allocation counts and an interleaved timing loop. The benchmarks,
// the comparison (shard compare, in cmd/shard) and the peer comparison share it, and it is
// public so that you can measure your own keys and strategies the same way. It sits above
// the strategies: nothing in package shard imports it. [002], the consistent-hash homework,
// is one of the sources package shard's documentation lists.
package measure

import (
	"bufio"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
)

// Locator is anything that maps a key to a shard: every shard.Sharder, and the adapters the
// peer comparison wraps other packages in.
type Locator interface {
	Locate(key string) int
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Keys returns count random keys of n bytes each from a 64-letter alphabet; the same seed
// gives the same keys.
func Keys(seed uint64, count, n int) []string {
	keys := make([]string, 0, count)
	for k := range RandomKeys(seed, count, n) {
		keys = append(keys, k)
	}
	return keys
}

// RandomKeys yields the keys Keys returns, one at a time, so that a long run over many keys
// needs no memory for them.
func RandomKeys(seed uint64, count, n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:"
		r := newRand(seed)
		b := make([]byte, n)
		for range count {
			for j := range b {
				b[j] = alphabet[r.Uint64()&63]
			}
			if !yield(string(b)) {
				return
			}
		}
	}
}

// UUIDs returns count random version-4 UUIDs in their 36-character text form, the keys of
// the consistent-hash homework's [002] experiment; the same seed gives the same UUIDs.
func UUIDs(seed uint64, count int) []string {
	const hex = "0123456789abcdef"
	r := newRand(seed)
	keys := make([]string, count)
	var b [36]byte
	for i := range keys {
		hi, lo := r.Uint64(), r.Uint64()
		hi = hi&^0xf000 | 0x4000     // version 4
		lo = lo&^(0xc<<60) | 0x8<<60 // variant 10xx
		var raw [16]byte
		for j := range 8 {
			raw[j] = byte(hi >> (56 - 8*j))
			raw[8+j] = byte(lo >> (56 - 8*j))
		}
		p := 0
		for j, c := range raw {
			if j == 4 || j == 6 || j == 8 || j == 10 {
				b[p] = '-'
				p++
			}
			b[p], b[p+1] = hex[c>>4], hex[c&15]
			p += 2
		}
		keys[i] = string(b[:])
	}
	return keys
}

// ReadKeys reads one key per line (a trailing "\r" is dropped); empty lines are keys too,
// except a last line that ends the input.
func ReadKeys(r io.Reader) ([]string, error) {
	var keys []string
	for k, err := range ScanKeys(r) {
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ScanKeys yields the keys of r as ReadKeys reads them, one at a time. A read error, or a
// line over 64 MiB, ends the sequence with a last pair whose error is not nil.
func ScanKeys(r io.Reader) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<26)
		for sc.Scan() {
			line := sc.Text()
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if !yield(line, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield("", fmt.Errorf("reading keys: %w", err))
		}
	}
}

// Placement returns the shard of every key.
func Placement(l Locator, keys []string) []int32 {
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[i] = int32(l.Locate(k))
	}
	return out
}

// Loads counts the keys on each of n shards.
func Loads(placement []int32, n int) []int {
	loads := make([]int, n)
	for _, s := range placement {
		loads[s]++
	}
	return loads
}

// Balance describes how evenly keys spread over shards.
type Balance struct {
	StddevPct float64 // population standard deviation of the per-shard counts, in % of the mean
	MaxMean   float64 // the fullest shard's count over the mean count
}

// BalanceOf returns the balance of per-shard counts.
func BalanceOf(loads []int) Balance {
	if len(loads) == 0 {
		return Balance{}
	}
	total, most := 0, 0
	for _, l := range loads {
		total += l
		most = max(most, l)
	}
	mean := float64(total) / float64(len(loads))
	if mean == 0 {
		return Balance{}
	}
	var ss float64
	for _, l := range loads {
		d := float64(l) - mean
		ss += d * d
	}
	return Balance{
		StddevPct: 100 * math.Sqrt(ss/float64(len(loads))) / mean,
		MaxMean:   float64(most) / mean,
	}
}

// HashStddevPct is the standard deviation, in % of the mean, that a perfect random hash
// shows when it throws keys keys onto n shards: each count is binomial(keys, 1/n), so its
// deviation is sqrt(keys*(1/n)*(1-1/n)), which over the mean keys/n is sqrt((n-1)/keys).
// No hash-based strategy can do better on average; only a table that counts keys can.
func HashStddevPct(n, keys int) float64 {
	if keys == 0 {
		return 0
	}
	return 100 * math.Sqrt(float64(n-1)/float64(keys))
}

// MovedPct returns the percentage of keys whose shard differs between two placements.
func MovedPct(before, after []int32) float64 {
	if len(before) == 0 {
		return 0
	}
	moved := 0
	for i := range before {
		if before[i] != after[i] {
			moved++
		}
	}
	return 100 * float64(moved) / float64(len(before))
}

// IdealMovedPct is the fewest keys, in %, that any placement keeping every shard equally
// loaded must move when from shards become to: growing, the new shards must end up holding
// (to-from)/to of all keys; shrinking, the removed shards held (from-to)/from of them.
func IdealMovedPct(from, to int) float64 {
	switch {
	case to > from:
		return 100 * float64(to-from) / float64(to)
	case from > to:
		return 100 * float64(from-to) / float64(from)
	}
	return 0
}

// Sink keeps the timing loops' results alive, so the compiler cannot drop the lookups.
var Sink int

// AllocsPerLocate returns the average number of allocations of one Locate over keys (the
// first 1000 of them at most), or 0 for no keys.
func AllocsPerLocate(l Locator, keys []string) float64 {
	keys = keys[:min(len(keys), 1000)]
	if len(keys) == 0 {
		return 0
	}
	i := 0
	return testing.AllocsPerRun(len(keys), func() {
		Sink += l.Locate(keys[i%len(keys)])
		i++
	})
}

// AllocsPerBatchKey returns the average number of allocations per key of b.LocateBatch over
// keys (the first 1000 of them at most) into a buffer of its own, or 0 for no keys.
func AllocsPerBatchKey(b shard.BatchLocator, keys []string) float64 {
	keys = keys[:min(len(keys), 1000)]
	if len(keys) == 0 {
		return 0
	}
	dst := make([]int, len(keys))
	return testing.AllocsPerRun(10, func() { b.LocateBatch(keys, dst) }) / float64(len(keys))
}

// A Pass looks up every key once and returns the sum of the shards, which the timing loop
// keeps so that the compiler cannot drop the lookups.
type Pass func(keys []string) int

// LocatePass is a loop of l.Locate over the keys.
func LocatePass(l Locator) Pass {
	return func(keys []string) int {
		sum := 0
		for _, k := range keys {
			sum += l.Locate(k)
		}
		return sum
	}
}

// BatchPass places the keys with b.LocateBatch, size keys per call (at least 1), into one
// buffer that it allocates now, not while it is timed.
func BatchPass(b shard.BatchLocator, size int) Pass {
	dst := make([]int, max(size, 1))
	return func(keys []string) int {
		sum := 0
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), len(dst))]
			b.LocateBatch(chunk, dst)
			for _, s := range dst[:len(chunk)] {
				sum += s
			}
			keys = keys[len(chunk):]
		}
		return sum
	}
}

// ParallelPass runs LocatePass(l) over all the keys in each of g goroutines at once, with
// GOMAXPROCS set to g for the pass (and restored after it): g lookups per key. In RacePasses
// its ns per key is therefore the time of g lookups made side by side, and g*1000 over it is
// the throughput in millions of lookups per second.
func ParallelPass(l Locator, g int) Pass {
	loop := LocatePass(l)
	return func(keys []string) int {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(g))
		sums := make([]int, g)
		var wg sync.WaitGroup
		for i := range sums {
			wg.Go(func() { sums[i] = loop(keys) })
		}
		wg.Wait()
		sum := 0
		for _, s := range sums {
			sum += s
		}
		return sum
	}
}

// timePass runs p over the keys reps times and returns the elapsed time.
func timePass(p Pass, keys []string, reps int) time.Duration {
	sum := 0
	start := time.Now()
	for range reps {
		sum += p(keys)
	}
	d := time.Since(start)
	Sink += sum
	return d
}

// Race times every locator on the same keys and returns each one's nanoseconds per lookup:
// RacePasses of a LocatePass each. Every lookup goes through one interface call.
func Race(ls []Locator, keys []string, rounds int, minDur time.Duration) []float64 {
	passes := make([]Pass, len(ls))
	for i, l := range ls {
		passes[i] = LocatePass(l)
	}
	return RacePasses(passes, keys, rounds, minDur)
}

// RacePasses times every pass on the same keys and returns each one's nanoseconds per key:
// the lower quartile of rounds short measurements, each at least minDur long. Rounds
// interleave the passes (and rotate which goes first), so a burst of load on a shared
// machine hits all of them alike instead of whichever ran then. Interference from other
// work only ever adds time, so a low quantile of many short runs estimates the undisturbed
// cost far more steadily than one long run or the median; the quartile, not the minimum,
// so that one lucky run does not decide.
func RacePasses(passes []Pass, keys []string, rounds int, minDur time.Duration) []float64 {
	reps := make([]int, len(passes))
	for i, p := range passes {
		reps[i] = 1
		for {
			if d := timePass(p, keys, reps[i]); d >= minDur || reps[i] > 1<<30 {
				break
			} else if d < minDur/16 {
				reps[i] *= 16
			} else {
				reps[i] = int(float64(reps[i])*float64(minDur)/float64(d)) + 1
			}
		}
	}
	samples := make([][]float64, len(passes))
	for r := range rounds {
		for j := range passes {
			i := (j + r) % len(passes)
			d := timePass(passes[i], keys, reps[i])
			samples[i] = append(samples[i], float64(d.Nanoseconds())/float64(reps[i]*len(keys)))
		}
	}
	out := make([]float64, len(passes))
	for i, s := range samples {
		out[i] = Quantile(s, 0.25)
	}
	return out
}

// Quantile returns the q-quantile of xs (0 the least, 1 the greatest), interpolating
// between neighbours, or NaN for no xs.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(pos)
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

// Median returns the median of xs (the mean of the middle two for an even count), or NaN.
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }
