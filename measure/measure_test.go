package measure

import (
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/shardkit/shard"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIdealMovedPct(t *testing.T) {
	assert.InDelta(t, 100.0/11, IdealMovedPct(10, 11), 1e-12, "grow by one: the new shard's share")
	assert.InDelta(t, 100.0/11, IdealMovedPct(11, 10), 1e-12, "shrink by one: the removed shard's share")
	assert.InDelta(t, 50, IdealMovedPct(10, 20), 1e-12, "doubling")
	assert.Zero(t, IdealMovedPct(7, 7))
}

func TestBalanceOf(t *testing.T) {
	b := BalanceOf([]int{10, 10, 10, 10})
	assert.Zero(t, b.StddevPct)
	assert.Equal(t, 1.0, b.MaxMean)
	b = BalanceOf([]int{5, 15})
	assert.InDelta(t, 50, b.StddevPct, 1e-12, "deviation 5 over mean 10")
	assert.InDelta(t, 1.5, b.MaxMean, 1e-12)
	assert.Equal(t, Balance{}, BalanceOf(nil))
	assert.Equal(t, Balance{}, BalanceOf([]int{0, 0}))
}

// modLocator spreads keys by their first byte, enough to check the plumbing.
type modLocator int

func (m modLocator) Locate(k string) int {
	if k == "" {
		return 0
	}
	return int(k[0]) % int(m)
}

type xxLocator uint64

func (m xxLocator) Locate(k string) int { return int(xxhash.Sum64String(k) % uint64(m)) }

func TestPlacementAndMoves(t *testing.T) {
	keys := Keys(1, 10000, 16)
	a := Placement(modLocator(4), keys)
	b := Placement(modLocator(8), keys)
	loads := Loads(a, 4)
	total := 0
	for _, l := range loads {
		total += l
	}
	require.Equal(t, len(keys), total)
	// From 4 to 8 a key stays iff its byte % 8 < 4: about half.
	assert.InDelta(t, 50, MovedPct(a, b), 3)
	assert.Zero(t, MovedPct(a, a))
}

func TestUUIDs(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	u := UUIDs(7, 1000)
	for _, s := range u {
		require.Regexp(t, re, s)
	}
	assert.Equal(t, u, UUIDs(7, 1000), "same seed, same keys")
	assert.NotEqual(t, u[0], UUIDs(8, 1)[0])
}

func TestKeys(t *testing.T) {
	k := Keys(3, 100, 16)
	require.Len(t, k, 100)
	for _, s := range k {
		require.Len(t, s, 16)
	}
	assert.Equal(t, k, Keys(3, 100, 16))
}

func TestReadKeys(t *testing.T) {
	keys, err := ReadKeys(strings.NewReader("a\r\n\nb\nc"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "", "b", "c"}, keys)

	_, err = ReadKeys(strings.NewReader(strings.Repeat("k", 1<<26+1)))
	require.ErrorContains(t, err, "reading keys: bufio.Scanner: token too long")
}

// RandomKeys is Keys one at a time, and stops when the loop does.
func TestRandomKeys(t *testing.T) {
	var got []string
	for k := range RandomKeys(9, 50, 12) {
		got = append(got, k)
	}
	assert.Equal(t, Keys(9, 50, 12), got)
	n := 0
	for range RandomKeys(9, 50, 12) {
		if n++; n == 3 {
			break
		}
	}
	assert.Equal(t, 3, n)
}

func TestScanKeysStops(t *testing.T) {
	n := 0
	for _, err := range ScanKeys(strings.NewReader("a\nb\nc\n")) {
		require.NoError(t, err)
		if n++; n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)
}

func TestHashStddevPct(t *testing.T) {
	assert.InDelta(t, 100*math.Sqrt(9.0/1e6), HashStddevPct(10, 1e6), 1e-12)
	// xxhash % 8 is as good as a uniform random assignment: its deviation should be near
	// the derived floor (a chi distribution with 7 degrees of freedom, well within 2x).
	keys := Keys(5, 100000, 16)
	got := BalanceOf(Loads(Placement(xxLocator(8), keys), 8)).StddevPct
	floor := HashStddevPct(8, len(keys))
	assert.True(t, got > floor/3 && got < floor*2, "stddev %.3f%%, floor %.3f%%", got, floor)
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, Median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, Median([]float64{4, 1, 2, 3}))
	assert.True(t, math.IsNaN(Median(nil)))
	assert.Equal(t, 1.0, Quantile([]float64{4, 1, 3, 2, 5}, 0))
	assert.Equal(t, 2.0, Quantile([]float64{4, 1, 3, 2, 5}, 0.25))
	assert.Equal(t, 1.75, Quantile([]float64{4, 1, 3, 2}, 0.25))
	assert.Equal(t, 5.0, Quantile([]float64{4, 1, 3, 2, 5}, 1))
}

func TestRace(t *testing.T) {
	ns := Race([]Locator{modLocator(3), modLocator(5)}, Keys(1, 64, 8), 3, 0)
	require.Len(t, ns, 2)
	for _, v := range ns {
		assert.Greater(t, v, 0.0)
	}
}

// BatchPass must place the keys as LocatePass does, whatever the chunk size.
func TestBatchPass(t *testing.T) {
	j, err := shard.NewJump(100)
	require.NoError(t, err)
	keys := Keys(2, 1001, 8)
	want := LocatePass(j)(keys)
	for _, size := range []int{0, 1, 3, 256, 5000} {
		assert.Equal(t, want, BatchPass(j, size)(keys), "chunks of %d", size)
	}
	assert.Zero(t, AllocsPerBatchKey(j, keys))
	ns := RacePasses([]Pass{LocatePass(j), BatchPass(j, 64)}, keys, 3, 0)
	require.Len(t, ns, 2)
	assert.Positive(t, ns[0])
	assert.Positive(t, ns[1])
}

func TestParallelPass(t *testing.T) {
	keys := Keys(4, 300, 8)
	before := runtime.GOMAXPROCS(0)
	want := LocatePass(xxLocator(7))(keys)
	for _, g := range []int{1, 2, 3} {
		assert.Equal(t, g*want, ParallelPass(xxLocator(7), g)(keys), "%d goroutines", g)
		assert.Equal(t, before, runtime.GOMAXPROCS(0), "GOMAXPROCS not restored")
	}
}

func TestHeapBytes(t *testing.T) {
	v, n, err := HeapBytes(func() ([]byte, error) { return make([]byte, 1<<20), nil })
	require.NoError(t, err)
	require.Len(t, v, 1<<20)
	assert.InDelta(t, 1<<20, n, 4<<10)
}

func TestTable(t *testing.T) {
	var tb Table
	tb.Header = []string{"name", "ns"}
	tb.Add("jump", "12.5")
	tb.Add("x")
	var b strings.Builder
	_, err := tb.WriteTo(&b)
	require.NoError(t, err)
	assert.Equal(t, "| name |   ns |\n| ---- | ---: |\n| jump | 12.5 |\n| x    |      |\n", b.String())
}

func TestHeapBytesSmall(t *testing.T) {
	_, n, err := HeapBytes(func() ([]*[4]uint64, error) {
		s := make([]*[4]uint64, 100)
		for i := range s {
			s[i] = new([4]uint64)
		}
		return s, nil
	})
	require.NoError(t, err)
	slice := 896 // 100 pointers of 8 bytes in the 896-byte size class
	if strconv.IntSize == 32 {
		slice = 416 // of 4 bytes, in the 416-byte class
	}
	assert.InDelta(t, slice+100*32, n, 256)
}

func TestAllocsPerLocate(t *testing.T) {
	keys := Keys(1, 10, 8)
	assert.Zero(t, AllocsPerLocate(modLocator(3), keys))
	assert.Zero(t, AllocsPerLocate(modLocator(3), nil))
	assert.Equal(t, 1.0, AllocsPerLocate(allocLocator{}, keys))
}

// allocLocator allocates once per lookup.
type allocLocator struct{}

var allocSink []byte

func (allocLocator) Locate(k string) int {
	allocSink = make([]byte, len(k)+1)
	return 0
}
