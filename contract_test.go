package shard

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file holds the checks every Sharder must pass, so each strategy's test states only
// what is its own: its golden vectors and which movement guarantees it makes.

var (
	update = flag.Bool("update", false, "rewrite the regress files in testdata instead of comparing with them")
	long   = flag.Bool("long", false, "run the longest cross-checks in full (minutes)")
)

// checkRegress compares got with testdata/name. Regress files pin what this library
// computes, so that no change of placement goes unnoticed: a difference fails the test, and
// only a deliberate run with -update rewrites the file. (Vectors from reference
// implementations are never rewritten by -update.)
func checkRegress(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to create it", t.Name())
	require.Equal(t, string(want), got,
		"placement changed: if on purpose, rerun with -update and say so in the commit message")
}

// quick reports whether a test should run its smaller case: with -short, and under the race
// detector, whose 5-20x slowdown buys nothing in single-goroutine arithmetic. Plain go test
// runs the full cases.
func quick() bool { return testing.Short() || raceEnabled }

// randomKeys returns count random keys of length n, seeded so every run sees the same ones.
func randomKeys(seed uint64, count, n int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:"
	keys := make([]string, count)
	b := make([]byte, n)
	for i := range keys {
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		keys[i] = string(b)
	}
	return keys
}

// adversarialKeys are keys that break careless code: empty, NUL bytes, invalid UTF-8, high
// bytes (which Java reads as negative), hash-tag and prefix look-alikes, and a very long key.
func adversarialKeys() []string {
	return []string{
		"", "\x00", "\x00\x00\x00\x00", "\xff", "\xff\xfe\xfd", "\x80\x81\x82\x83\x84\x85\x86\x87\x88",
		"\xc3\x28", "\xed\xa0\x80", "日本語", "a\x00b", "{", "}", "{}", "{}{}", "-", "--", "1-", "-1",
		"18446744073709551616-x", strings.Repeat("k", 1<<16), strings.Repeat("\xff", 1000),
	}
}

// contract says which guarantees a strategy makes beyond the common ones.
type contract struct {
	name string
	// newSharder builds the strategy with n shards.
	newSharder func(n int) (Sharder, error)
	// sizes are shard counts to check; the largest valid one should be near the strategy's
	// maximum when that is small (first-byte SHA-1).
	sizes []int
	// tooMany is a count above the strategy's maximum (see above), or 0 if only memory
	// limits it.
	tooMany int
	// resizeIsFresh: after Resize(n) the sharder places every key as a new one with n
	// shards does (true for every stateless strategy; not for history-dependent ones).
	resizeIsFresh bool
	// growOnlyToNew: on n -> n+1 keys move only to the new shard.
	growOnlyToNew bool
	// minimalGrow: growOnlyToNew, and about 1/(n+1) of the keys move (binomial bound). Rings
	// and the trie set only growOnlyToNew: their new shard's share is that of its arc or
	// leaf, which their own tests bound.
	minimalGrow bool
	// minimalShrink: on n+1 -> n only the removed shard's keys move.
	minimalShrink bool
	// batch: the strategy implements BatchLocator (every strategy's LocateBatch results are
	// checked either way, through the package's LocateBatch).
	batch bool
}

func checkContract(t *testing.T, c contract) {
	t.Helper()
	nkeys := 20000
	if quick() { // every check below is per key or scales its bound with the key count
		nkeys = 5000
	}
	keys := append(randomKeys(1, nkeys, 16), adversarialKeys()...)

	t.Run("range and determinism", func(t *testing.T) {
		for _, n := range c.sizes {
			a, err := c.newSharder(n)
			require.NoError(t, err)
			b, err := c.newSharder(n)
			require.NoError(t, err)
			require.Equal(t, n, a.Shards())
			for _, k := range keys { // not require: its arguments cost more than Locate
				got := a.Locate(k)
				if got < 0 || got >= n {
					t.Fatalf("%s(%d).Locate(%.40q) = %d, want in [0, %d)", c.name, n, k, got, n)
				}
				if again, other := a.Locate(k), b.Locate(k); again != got || other != got {
					t.Fatalf("%s(%d).Locate(%.40q) = %d, then %d, and %d on a second instance", c.name, n, k, got, again, other)
				}
			}
		}
	})

	t.Run("bad counts", func(t *testing.T) {
		bad := []int{0, -1, math.MinInt}
		if c.tooMany > 0 {
			bad = append(bad, c.tooMany, math.MaxInt)
		}
		for _, n := range bad {
			_, err := c.newSharder(n)
			require.ErrorIsf(t, err, ErrShardCount, "%s(%d)", c.name, n)
			assert.Containsf(t, err.Error(), "shard: ", "error %q lacks the package prefix", err)
			assert.Containsf(t, err.Error(), fmt.Sprint(n), "error %q does not name the value", err)
		}
		s, err := c.newSharder(c.sizes[0])
		require.NoError(t, err)
		before := placement(s, keys)
		for _, n := range bad {
			require.ErrorIs(t, s.Resize(n), ErrShardCount)
			require.Equal(t, c.sizes[0], s.Shards(), "failed Resize(%d) changed Shards", n)
			require.Equal(t, before, placement(s, keys), "failed Resize(%d) changed placement", n)
		}
	})

	t.Run("batch equals Locate", func(t *testing.T) {
		for _, n := range c.sizes {
			s, err := c.newSharder(n)
			require.NoError(t, err)
			_, isBatch := s.(BatchLocator)
			require.Equal(t, c.batch, isBatch, "%s implements BatchLocator", c.name)
			want := placement(s, keys)
			// Every length from 0 to 9, to reach each batch remainder, then all keys; dst one
			// longer than needed, its last entry left alone.
			for _, size := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, len(keys)} {
				dst := make([]int, size+1)
				dst[size] = -7
				LocateBatch(s, keys[:size], dst)
				require.Equalf(t, want[:size], dst[:size], "%s(%d): LocateBatch of %d keys", c.name, n, size)
				require.Equal(t, -7, dst[size], "LocateBatch wrote past len(keys)")
			}
			dst := make([]int, len(keys))
			allocs := testing.AllocsPerRun(10, func() { LocateBatch(s, keys[:100], dst) })
			require.Zerof(t, allocs, "%s(%d).LocateBatch allocates", c.name, n)
			require.PanicsWithValue(t, "shard: LocateBatch: 3 keys but room for 2 shards in dst",
				func() { LocateBatch(s, keys[:3], dst[:2]) })
		}
	})

	t.Run("no allocations", func(t *testing.T) {
		for _, n := range c.sizes {
			s, err := c.newSharder(n)
			require.NoError(t, err)
			for _, k := range []string{"", "user:1000", strings.Repeat("x", 4096)} {
				allocs := testing.AllocsPerRun(100, func() { _ = s.Locate(k) })
				require.Zerof(t, allocs, "%s(%d).Locate(%.20q) allocates", c.name, n, k)
			}
		}
	})

	if c.resizeIsFresh {
		t.Run("resize equals fresh", func(t *testing.T) {
			s, err := c.newSharder(c.sizes[0])
			require.NoError(t, err)
			for _, n := range append(c.sizes[1:], c.sizes[0]) {
				require.NoError(t, s.Resize(n))
				fresh, err := c.newSharder(n)
				require.NoError(t, err)
				require.Equalf(t, placement(fresh, keys), placement(s, keys), "%s: Resize(%d) differs from a new sharder", c.name, n)
			}
		})
	}

	t.Run("movement", func(t *testing.T) {
		for _, n := range c.sizes {
			if c.tooMany > 0 && n+1 >= c.tooMany {
				continue
			}
			s, err := c.newSharder(n)
			require.NoError(t, err)
			before := placement(s, keys)
			require.NoError(t, s.Resize(n+1))
			grown := placement(s, keys)
			moved := countMoves(t, c.name, n, keys, before, grown, c.minimalGrow || c.growOnlyToNew)
			if c.minimalGrow {
				// Moves are binomial(len(keys), 1/(n+1)); allow six standard deviations.
				p := 1 / float64(n+1)
				mean := p * float64(len(keys))
				sd := math.Sqrt(mean * (1 - p))
				require.InDeltaf(t, mean, float64(moved), 6*sd+1, "%s: %d -> %d moved %d of %d keys", c.name, n, n+1, moved, len(keys))
			}
			require.NoError(t, s.Resize(n))
			shrunk := placement(s, keys)
			for i := range keys {
				if c.minimalShrink && grown[i] != shrunk[i] {
					require.Equalf(t, n, grown[i], "%s: %d -> %d moved %q off shard %d, which stays", c.name, n+1, n, keys[i], grown[i])
				}
			}
		}
	})

	t.Run("concurrent resize", func(t *testing.T) {
		s, err := c.newSharder(c.sizes[0])
		require.NoError(t, err)
		largest := 0
		for _, n := range c.sizes {
			largest = max(largest, n)
		}
		const readers = 4
		var (
			stop    atomic.Bool
			wg      sync.WaitGroup
			started sync.WaitGroup // every reader has looked up once
			lookups [readers]atomic.Int64
			mu      sync.Mutex
			errs    []error
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		started.Add(readers)
		for g := range readers {
			wg.Go(func() {
				var batch [16]int
				for i := 0; !stop.Load(); i++ {
					k := keys[(i*7+g)%len(keys)]
					got := s.Locate(k)
					if i%8 == 0 { // and now and then a batch, which loads the table once
						from := (i * 7) % (len(keys) - len(batch))
						LocateBatch(s, keys[from:from+len(batch)], batch[:])
						if lo, hi := slices.Min(batch[:]), slices.Max(batch[:]); lo < 0 || hi >= largest {
							fail(fmt.Errorf("LocateBatch gave shards from %d to %d during resizes", lo, hi))
						}
					}
					if i == 0 {
						started.Done()
					}
					// The count changes under the lookup, so check against the largest
					// count this test ever sets.
					if got < 0 || got >= largest {
						fail(fmt.Errorf("Locate(%q) = %d during resizes", k, got))
					}
					lookups[g].Add(1)
					// Yield, so that the resizer and the other readers run promptly: on two
					// cores, four readers that never yield starve the resizer for a
					// scheduler time slice at each of its waits.
					runtime.Gosched()
				}
			})
		}
		// The readers run before, during and after the resizes: the race detector then sees
		// lookups that nothing orders with Resize's writes, however the scheduler runs them.
		started.Wait()
		resizes := 200
		if raceEnabled { // that needs a few interleavings, not many
			resizes = 40
		}
		for i := range resizes {
			if err := s.Resize(c.sizes[i%len(c.sizes)]); err != nil {
				fail(err)
				break
			}
		}
		for g := range lookups {
			for n := lookups[g].Load(); lookups[g].Load() == n; {
				runtime.Gosched()
			}
		}
		stop.Store(true)
		wg.Wait()
		for _, err := range errs {
			t.Error(err)
		}
	})
}

// assertUniform checks counts against an even spread with a chi-square statistic: for k
// buckets it has mean k-1 and variance 2(k-1), and five standard deviations above the mean
// is a failure that a fair spread shows with probability below 1e-4.
func assertUniform(t *testing.T, counts []int, what string) float64 {
	t.Helper()
	total := 0
	for _, c := range counts {
		total += c
	}
	mean := float64(total) / float64(len(counts))
	chi2 := 0.0
	for _, c := range counts {
		d := float64(c) - mean
		chi2 += d * d / mean
	}
	df := float64(len(counts) - 1)
	assert.LessOrEqualf(t, chi2, df+5*math.Sqrt(2*df), "%s: chi-square %.1f with %v degrees of freedom", what, chi2, df)
	return chi2
}

// readVectors returns the lines of a vector file in testdata that are neither blank nor
// comments (a '#' first), each split into its whitespace-separated fields.
func readVectors(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var rows [][]string
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, "#") {
			rows = append(rows, f)
		}
	}
	require.NotEmptyf(t, rows, "%s holds no vectors", path)
	return rows
}

// hexKey decodes a key that a vector file writes in hex, "-" standing for the empty key.
func hexKey(t *testing.T, field string) string {
	t.Helper()
	if field == "-" {
		return ""
	}
	b, err := hex.DecodeString(field)
	require.NoErrorf(t, err, "key %q is not hex", field)
	return string(b)
}

// atoi parses a decimal field of a vector file.
func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	require.NoError(t, err)
	return v
}

// countMoves returns how many keys changed shard between before and grown, their shards
// with n and with n+1 shards. With toNewOnly it fails the test unless every one of them
// moved to the new shard n.
func countMoves(t *testing.T, name string, n int, keys []string, before, grown []int, toNewOnly bool) int {
	t.Helper()
	moved := 0
	for i := range keys {
		if before[i] != grown[i] {
			moved++
			if toNewOnly && grown[i] != n {
				t.Fatalf("%s: %d -> %d moved %q to shard %d, not to the new shard", name, n, n+1, keys[i], grown[i])
			}
		}
	}
	return moved
}

func placement(s Sharder, keys []string) []int {
	out := make([]int, len(keys))
	for i, k := range keys {
		out[i] = s.Locate(k)
	}
	return out
}

// TestCheckCount pins the wording every strategy's count errors share.
func TestCheckCount(t *testing.T) {
	require.NoError(t, checkCount("jump", 1, 10))
	require.NoError(t, checkCount("jump", 10, 10))
	err := checkCount("jump", 11, 10)
	require.True(t, errors.Is(err, ErrShardCount))
	require.EqualError(t, err, "shard: jump: 11 shards: allowed range is [1, 10]: shard count out of range")
}

// above returns limit+1 as an int, or 0 where an int cannot hold it (on 32-bit platforms a
// limit of MaxInt32 is int's own maximum, and no count exceeds it).
func above(limit int64) int {
	if limit >= math.MaxInt {
		return 0
	}
	return int(limit + 1)
}
