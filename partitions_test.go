package shard

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var redisGolden = flag.Bool("redis-golden", false, "TestRedisSlotLive rewrites testdata/redis/keyslot.txt from the live server's answers")

func TestPartitionsContract(t *testing.T) {
	checkContract(t, contract{
		name:          "partitions",
		newSharder:    func(n int) (Sharder, error) { return NewPartitions(n, 16384) },
		sizes:         []int{1, 2, 7, 10, 64, 1000},
		tooMany:       16385,
		resizeIsFresh: false, // the new shard takes a slice of every range, not a range of its own
		minimalGrow:   true,  // from a balanced table, partitions move only to the new shard
		minimalShrink: true,  // and only off the removed one
		batch:         true,
	})
}

func TestRedisClusterContract(t *testing.T) {
	if testing.Short() {
		t.Skip("the same code as TestPartitionsContract with another key hash; its 200 resizes are slow on a busy machine")
	}
	checkContract(t, contract{
		name:          "redis-cluster",
		newSharder:    func(n int) (Sharder, error) { return NewRedisCluster(n) },
		sizes:         []int{1, 3, 8, 100},
		tooMany:       16385,
		resizeIsFresh: false,
		minimalGrow:   true,
		minimalShrink: true,
		batch:         true,
	})
}

func TestNewPartitionsBadCount(t *testing.T) {
	for _, np := range []int{0, -1, maxPartitions + 1} {
		_, err := NewPartitions(1, np)
		require.ErrorIs(t, err, ErrPartitionCount)
		require.ErrorContains(t, err, "shard: partitions: "+strconv.Itoa(np)+" partitions")
	}
	_, err := NewPartitions(8, 7)
	require.ErrorIs(t, err, ErrShardCount)
	require.EqualError(t, err, "shard: partitions: 8 shards: allowed range is [1, 7]: shard count out of range")
	p, err := NewPartitions(maxPartitions, maxPartitions)
	require.NoError(t, err)
	require.Equal(t, maxPartitions-1, p.Owner(maxPartitions-1))
}

// ranges turns a table into the [first, last] runs of each owner, in partition order.
func ranges(table []int) [][3]int {
	var out [][3]int
	for first := 0; first < len(table); {
		last := first
		for last+1 < len(table) && table[last+1] == table[first] {
			last++
		}
		out = append(out, [3]int{first, last, table[first]})
		first = last + 1
	}
	return out
}

// readColumns reads the integer rows of a vector file in testdata, cols fields each.
func readColumns(t *testing.T, name string, cols int) [][]int {
	t.Helper()
	var rows [][]int
	for _, f := range readVectors(t, filepath.Join("testdata", name)) {
		require.Len(t, f, cols, "%s: %q", name, f)
		row := make([]int, cols)
		for i := range f {
			row[i] = atoi(t, f[i])
		}
		rows = append(rows, row)
	}
	return rows
}

// The slot ranges of real clusters made by redis-cli --cluster create (testdata/redis/gen.sh).
func TestRedisClusterCreateGolden(t *testing.T) {
	want := map[int][][3]int{}
	for _, r := range readColumns(t, "redis/cluster-create.txt", 4) {
		want[r[0]] = append(want[r[0]], [3]int{r[1], r[2], r[3]})
	}
	require.Len(t, want, 6)
	for n, w := range want {
		p, err := NewRedisCluster(n)
		require.NoError(t, err)
		require.Equalf(t, w, ranges(p.Table()), "NewRedisCluster(%d) slot ranges", n)
	}
}

// The splits redis-cli prints for up to 1000 masters, where its float32 cursor drifts from
// the exact split from 78 masters on (testdata/redis/gen.sh).
func TestRedisCLIPlanGolden(t *testing.T) {
	want := map[int][][3]int{}
	for _, r := range readColumns(t, "redis/cli-plan.txt", 4) {
		want[r[0]] = append(want[r[0]], [3]int{r[2], r[3], r[1]})
	}
	require.Contains(t, want, 78)
	require.Contains(t, want, 1000)
	for n, w := range want {
		p, err := NewPartitions(n, redisSlots)
		require.NoError(t, err)
		require.Equalf(t, w, ranges(p.Table()), "NewPartitions(%d, 16384) ranges", n)
	}
}

// checkSplit checks that table gives shard i the i-th contiguous range and every shard
// floor(P/n) or ceil(P/n) partitions.
func checkSplit(t *testing.T, table []int, n int) {
	t.Helper()
	np := len(table)
	r := ranges(table)
	require.Lenf(t, r, n, "P=%d n=%d: want one range per shard", np, n)
	for i, g := range r {
		size := g[1] - g[0] + 1
		if g[2] != i || (size != np/n && size != (np+n-1)/n) {
			t.Fatalf("P=%d n=%d: range %d is %d-%d on shard %d, want shard %d with %d or %d partitions",
				np, n, i, g[0], g[1], g[2], i, np/n, (np+n-1)/n)
		}
	}
}

func TestContiguousSplit(t *testing.T) {
	maxP := 300
	if quick() {
		maxP = 80
	}
	for np := 1; np <= maxP; np++ {
		for n := 1; n <= np; n++ {
			checkSplit(t, ints(contiguousSplit(np, n)), n)
		}
	}
	// 2688 and up: redis-cli's own split is uneven there, so the exact rule takes over.
	for _, n := range []int{1, 2, 3, 77, 78, 1000, 2687, 2688, 2989, 8191, 16383, 16384} {
		checkSplit(t, ints(contiguousSplit(redisSlots, n)), n)
	}
	for _, n := range []int{1, 3, 1000, 40000, 65535, 65536} {
		checkSplit(t, ints(contiguousSplit(maxPartitions, n)), n)
	}
	owner := make([]uint16, redisSlots)
	require.False(t, redisCLISplit(owner, 2688), "redis-cli's split of 16384 among 2688 is uneven")
	require.True(t, redisCLISplit(owner, 2687))
}

func ints(owner []uint16) []int {
	out := make([]int, len(owner))
	for i, s := range owner {
		out[i] = int(s)
	}
	return out
}

// minMoves is the brute-force minimum: over every choice of which shards end with
// ceil(P/n), the partitions that must leave shards above their final count.
func minMoves(table []int, n int) int {
	shards := n
	for _, s := range table {
		shards = max(shards, s+1)
	}
	counts := make([]int, shards)
	for _, s := range table {
		counts[s]++
	}
	q, r := len(table)/n, len(table)%n
	best := len(table) + 1
	for set := 0; set < 1<<n; set++ {
		if bits.OnesCount(uint(set)) != r {
			continue
		}
		moves := 0
		for s, c := range counts {
			quota := 0
			if s < n {
				quota = q + (set >> s & 1)
			}
			moves += max(0, c-quota)
		}
		best = min(best, moves)
	}
	return best
}

func TestPlanResizeMinimal(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for range 400 {
		np := 1 + r.IntN(40)
		n0 := 1 + r.IntN(min(np, 8))
		p, err := NewPartitions(n0, np)
		require.NoError(t, err)
		for range r.IntN(20) { // unbalance it by hand
			require.NoError(t, p.Move(r.IntN(np), r.IntN(n0)))
		}
		before := p.Table()
		n := 1 + r.IntN(min(np, 8))
		plan, err := p.PlanResize(n)
		require.NoError(t, err)
		require.Equalf(t, minMoves(before, n), len(plan), "table %v to %d shards: plan %v is not minimal", before, n, plan)

		after := slices.Clone(before)
		for i, m := range plan {
			require.Equal(t, before[m.Partition], m.From, "move %v: From is not the owner", m)
			require.NotEqual(t, m.From, m.To)
			require.True(t, m.To < n)
			require.Truef(t, i == 0 || plan[i-1].Partition < m.Partition, "plan %v not in increasing partition order", plan)
			after[m.Partition] = m.To
		}
		require.NoError(t, p.Resize(n))
		require.Equal(t, after, p.Table(), "Resize did not apply PlanResize's moves")
		require.Equal(t, n, p.Shards())
		counts := make([]int, n)
		for _, s := range after {
			counts[s]++
		}
		for s, c := range counts {
			require.Containsf(t, []int{np / n, (np + n - 1) / n}, c, "after resize of %v to %d, shard %d holds %d", before, n, s, c)
		}
		again, err := p.PlanResize(n)
		require.NoError(t, err)
		require.Empty(t, again, "a balanced table needs no moves")
	}
}

func TestPartitionsResizeRemovesShards(t *testing.T) {
	p, err := NewPartitions(4, 12)
	require.NoError(t, err)
	require.Equal(t, []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}, p.Table())
	plan, err := p.PlanResize(3)
	require.NoError(t, err)
	// Shard 3's partitions go to the remaining ones; nothing else moves.
	require.Equal(t, []PartitionMove{{9, 3, 0}, {10, 3, 1}, {11, 3, 2}}, plan)
	require.NoError(t, p.Resize(3))
	require.Equal(t, []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2}, p.Table())
	require.NoError(t, p.Resize(1))
	require.Equal(t, slices.Repeat([]int{0}, 12), p.Table())
}

func TestPartitionsMove(t *testing.T) {
	p, err := NewPartitions(3, 6)
	require.NoError(t, err)
	require.NoError(t, p.Move(0, 2))
	require.NoError(t, p.Move(1, 2))
	require.Equal(t, []int{2, 2, 1, 1, 2, 2}, p.Table(), "shard 0 drained")
	require.Equal(t, 3, p.Shards())

	for _, part := range []int{-1, 6} {
		err := p.Move(part, 0)
		require.ErrorIs(t, err, ErrPartition)
		require.ErrorContains(t, err, fmt.Sprintf("shard: partitions: move partition %d: allowed range is [0, 6)", part))
	}
	for _, to := range []int{-1, 3} {
		err := p.Move(0, to)
		require.ErrorIs(t, err, ErrShard)
		require.ErrorContains(t, err, fmt.Sprintf("to shard %d: allowed range is [0, 3)", to))
	}
	require.Equal(t, []int{2, 2, 1, 1, 2, 2}, p.Table(), "failed moves changed the table")

	// Resize rebalances a drained shard back with the fewest moves.
	require.NoError(t, p.Resize(3))
	require.Equal(t, []int{2, 2, 1, 1, 0, 0}, p.Table())
}

func TestPartitionsOwnerAndTable(t *testing.T) {
	p, err := NewPartitions(2, 4)
	require.NoError(t, err)
	require.Equal(t, 4, p.NumPartitions())
	for i, want := range []int{0, 0, 1, 1} {
		require.Equal(t, want, p.Owner(i))
	}
	tab := p.Table()
	tab[0] = 1
	require.Equal(t, 0, p.Owner(0), "Table must return a copy")
	require.PanicsWithValue(t, "shard: Partitions.Owner(4): partition out of range [0, 4)", func() { p.Owner(4) })
	require.PanicsWithValue(t, "shard: Partitions.Owner(-1): partition out of range [0, 4)", func() { p.Owner(-1) })
	for _, k := range randomKeys(6, 200, 8) {
		require.Equal(t, p.Owner(p.Partition(k)), p.Locate(k))
	}
}

func TestPartitionsZeroValue(t *testing.T) {
	var p Partitions
	require.Zero(t, p.Shards())
	require.Zero(t, p.NumPartitions())
	require.Nil(t, p.Table())
	require.ErrorIs(t, p.Resize(1), ErrPartitionTable)
	require.ErrorIs(t, p.Move(0, 0), ErrPartitionTable)
	_, err := p.PlanResize(1)
	require.ErrorIs(t, err, ErrPartitionTable)
	_, err = p.MarshalText()
	require.ErrorIs(t, err, ErrPartitionTable)

	require.NoError(t, p.UnmarshalText([]byte("hash=redis partitions=16384 shards=2\n0-8191 0\n8192-16383 1\n")))
	require.Equal(t, 2, p.Shards())
	require.Equal(t, RedisSlot("foo"), p.Partition("foo"))
	require.Equal(t, 1, p.Locate("foo"), "slot 12182 is on shard 1")
}

func TestPartitionsText(t *testing.T) {
	p, err := NewRedisCluster(3)
	require.NoError(t, err)
	text, err := p.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "hash=redis partitions=16384 shards=3\n0-5460 0\n5461-10922 1\n10923-16383 2\n", string(text))

	require.NoError(t, p.Move(5461, 0))
	require.NoError(t, p.Move(16383, 1))
	text, err = p.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "hash=redis partitions=16384 shards=3\n0-5461 0\n5462-10922 1\n10923-16382 2\n16383 1\n", string(text))

	q, err := NewRedisCluster(5)
	require.NoError(t, err)
	require.NoError(t, q.UnmarshalText(text))
	require.Equal(t, p.Table(), q.Table())
	require.Equal(t, 3, q.Shards())

	// Accepted variants: no final newline, "a-a", split runs, an empty shard.
	require.NoError(t, q.UnmarshalText([]byte("hash=redis partitions=16384 shards=4\n0-0 3\n1-99 3\n100-16383 1")))
	require.Equal(t, 4, q.Shards())
	require.Equal(t, 3, q.Owner(0))
	require.Equal(t, 1, q.Owner(16383))
}

func TestPartitionsUnmarshalTextErrors(t *testing.T) {
	p, err := NewPartitions(2, 10)
	require.NoError(t, err)
	before := p.Table()
	const h = "hash=xxh64 partitions=10 shards=2\n"
	for _, c := range []struct{ text, want string }{
		{"", "line 1: header \"\""},
		{"hash=xxh64 partitions=10\n0-9 0\n", "line 1: header"},
		{"hash=md5 partitions=10 shards=2\n0-9 0\n", "want hash=xxh64 or hash=redis"},
		{"hash=xxh64 partitions=0 shards=1\n", "want partitions=P with P in [1, 65536]"},
		{"hash=xxh64 partitions=65537 shards=1\n", "want partitions=P"},
		{"hash=xxh64 partitions=+10 shards=2\n0-9 0\n", "want partitions=P"},
		{"hash=xxh64 partitions=10 shards=0\n0-9 0\n", "want shards=N with N in [1, 10]"},
		{"hash=xxh64 partitions=10 shards=11\n0-9 0\n", "want shards=N with N in [1, 10]"},
		{"hash=redis partitions=10 shards=2\n0-9 0\n", "hash=redis needs partitions=16384, not 10"},
		{h, "table ends early: partitions 0-9 have no owner"},
		{h + "0-4 0\n", "table ends early: partitions 5-9 have no owner"},
		{h + "0-4 0\n6-9 1\n", "line 3: gap: partitions 5-5 have no owner"},
		{h + "0-5 0\n5-9 1\n", "line 3: range 5-9 overlaps partitions already given (next expected 6)"},
		{h + "0-4 0\n9-5 1\n", "line 3: range 9-5 is backwards"},
		{h + "0-10 0\n", "line 2: range 0-10: partitions end at 9"},
		{h + "0-9 0\n10 1\n", "line 3: range 10-10: partitions end at 9"},
		{h + "0-9 2\n", "line 2: shard 2: allowed range is [0, 2)"},
		{h + "0-9  0\n", "line 2"},
		{h + "0-9\n", "line 2"},
		{h + "-9 0\n", "line 2"},
		{h + "0--9 0\n", "line 2"},
		{h + "0-9 -1\n", "line 2"},
		{h + "0-9 0\r\n", "line 2"},
		{h + "0-9 0\n\n", "blank line"},
		{h + "0-4 0\n\n5-9 1\n", "line 3"},
		{h + "0-9 0000001\n", "line 2"},
	} {
		err := p.UnmarshalText([]byte(c.text))
		require.ErrorIsf(t, err, ErrPartitionTable, "%q", c.text)
		require.ErrorContainsf(t, err, c.want, "%q", c.text)
		require.Truef(t, strings.HasPrefix(err.Error(), "shard: partitions: "), "%q: %v", c.text, err)
		require.Equal(t, before, p.Table(), "failed UnmarshalText changed the table")
	}
	for _, text := range []string{
		"hash=xxh64 partitions=11 shards=2\n0-10 0\n",
		"hash=redis partitions=16384 shards=2\n0-16383 0\n",
	} {
		err := p.UnmarshalText([]byte(text))
		require.ErrorIs(t, err, ErrPartitionCount)
		require.ErrorContains(t, err, "this Partitions has hash=xxh64 partitions=10")
	}
	require.Equal(t, before, p.Table())
}

func FuzzPartitionsUnmarshalText(f *testing.F) {
	f.Add([]byte("hash=xxh64 partitions=10 shards=2\n0-4 0\n5-9 1\n"))
	f.Add([]byte("hash=xxh64 partitions=3 shards=3\n0 2\n1-1 0\n2 2"))
	f.Add([]byte("hash=redis partitions=16384 shards=3\n0-5460 0\n5461-10922 1\n10923-16383 2\n"))
	f.Add([]byte("hash=xxh64 partitions=10 shards=2\n0-4 0\n4-9 1\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		var p Partitions
		var err error
		// Memory follows the text, besides the table a header may announce: 2^16 partitions.
		if got := allocated(func() { err = p.UnmarshalText(text) }); got > uint64(64*len(text)+1<<20) {
			t.Fatalf("%d bytes of text: %d bytes allocated", len(text), got)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrPartitionTable)
			require.Zero(t, p.Shards())
			return
		}
		n := p.Shards()
		for i, s := range p.Table() {
			require.Truef(t, s >= 0 && s < n, "partition %d on shard %d of %d", i, s, n)
		}
		out, err := p.MarshalText()
		require.NoError(t, err)
		var q Partitions
		require.NoError(t, q.UnmarshalText(out), "MarshalText output %q does not load", out)
		require.Equal(t, p.Table(), q.Table())
		require.Equal(t, n, q.Shards())
		again, err := q.MarshalText()
		require.NoError(t, err)
		require.Equal(t, out, again, "MarshalText is not canonical")
		require.NoError(t, p.UnmarshalText(out), "reloading into the same Partitions")
	})
}

// slowPartition is floor(XXH64(key) * P / 2^64) in big integers.
func slowPartition(key string, np int) int {
	x := new(big.Int).SetUint64(keyhash.XXH64(key))
	x.Mul(x, big.NewInt(int64(np)))
	x.Rsh(x, 64)
	return int(x.Int64())
}

func FuzzPartitionsLocate(f *testing.F) {
	for _, k := range adversarialKeys()[:12] {
		f.Add(k, uint16(16383), uint16(2))
	}
	f.Add("{user1000}.following", uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, key string, np, n uint16) {
		partitions := 1 + int(np)
		shards := 1 + int(n)%partitions
		p, err := NewPartitions(shards, partitions)
		require.NoError(t, err)
		part := p.Partition(key)
		require.Equal(t, slowPartition(key, partitions), part)
		got := p.Locate(key)
		require.True(t, got >= 0 && got < shards)
		require.Equal(t, p.Table()[part], got)

		r, err := NewRedisCluster(1 + int(n)%redisSlots)
		require.NoError(t, err)
		require.Equal(t, RedisSlot(key), r.Partition(key))
		require.Equal(t, r.Owner(RedisSlot(key)), r.Locate(key))
	})
}

func TestPartitionsRegress(t *testing.T) {
	var b strings.Builder
	keys := append(randomKeys(8, 10, 12), adversarialKeys()[:12]...)
	for _, c := range [][2]int{{1, 1}, {3, 7}, {5, 1024}, {10, 16384}} {
		p, err := NewPartitions(c[0], c[1])
		require.NoError(t, err)
		for _, k := range keys {
			fmt.Fprintf(&b, "%d %d %q %d %d\n", c[0], c[1], k, p.Partition(k), p.Locate(k))
		}
	}
	// Resize depends on history: pin the tables a sequence of resizes leaves.
	p, err := NewPartitions(3, 40)
	require.NoError(t, err)
	for _, n := range []int{4, 7, 2, 5, 40, 1} {
		require.NoError(t, p.Resize(n))
		text, err := p.MarshalText()
		require.NoError(t, err)
		b.Write(text)
	}
	checkRegress(t, "regress/partitions.txt", b.String())
}

func TestPartitionsAllocs(t *testing.T) {
	p, err := NewRedisCluster(10)
	require.NoError(t, err)
	for _, k := range []string{"", "{user1000}.following", strings.Repeat("x", 4096)} {
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = RedisSlot(k) }))
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = p.Partition(k) }))
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = p.Owner(p.Partition(k)) }))
	}
}

// slowCRC16 is CRC-16/XMODEM bit by bit, straight from its definition.
func slowCRC16(b string) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc ^= uint16(b[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slowHashTag restates the Redis Cluster specification's hash-tag rule independently of
// HashTag.
func slowHashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

func TestRedisSlotVectors(t *testing.T) {
	// The Redis Cluster specification: "the output of CRC16 for the string 123456789
	// is 0x31C3".
	require.Equal(t, uint16(0x31C3), slowCRC16("123456789"))
	require.Equal(t, 0x31C3, RedisSlot("123456789"))
	for _, c := range []struct {
		key  string
		want int
	}{
		{"", 0}, {"foo", 12182}, {"{user1000}.following", RedisSlot("user1000")},
		{"foo{}{bar}", RedisSlot("foo{}{bar}")}, {"foo{{bar}}zap", RedisSlot("{bar")},
		{"foo{bar}{zap}", RedisSlot("bar")},
	} {
		require.Equalf(t, c.want, RedisSlot(c.key), "RedisSlot(%q)", c.key)
	}
	for _, k := range append(redisSlotKeys(true), redisSlotKeys(false)...) {
		require.Equalf(t, int(slowCRC16(slowHashTag(k))&16383), RedisSlot(k), "RedisSlot(%.40q)", k)
		require.Equal(t, slowCRC16(k), crc16Bytewise(k))
	}
}

func FuzzRedisSlot(f *testing.F) {
	for _, k := range redisSlotKeys(true)[:40] {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want := int(slowCRC16(slowHashTag(key)) & 16383)
		require.Equalf(t, want, RedisSlot(key), "RedisSlot(%q)", key)
	})
}

// redisSlotKeys returns the keys checked against a real Redis: the short ones that go into
// the golden file, or the long ones that only the live test sends.
func redisSlotKeys(short bool) []string {
	if !short {
		return []string{
			strings.Repeat("k", 1<<16), strings.Repeat("\xff", 1000),
			"{" + strings.Repeat("t", 5000) + "}x", strings.Repeat("{", 3000) + "}",
			strings.Repeat("a", 3000) + "{b}", strings.Repeat("}{", 2000),
		}
	}
	keys := []string{
		"123456789", "foo", "bar", "hello", "somekey", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}", "}{", "{}{}", "{{}}", "{}}", "{{}",
		"{a", "a}", "{a}", "a{b}c{d}", "\x00{\x00}\x00", "{\xff}", "{\x00}", "{}x", "x{}", "{ }", "\x00",
	}
	for _, k := range adversarialKeys() {
		if len(k) <= 256 {
			keys = append(keys, k)
		}
	}
	keys = append(keys, randomKeys(9, 200, 10)...)
	// Binary keys with many braces, so that every hash-tag shape comes up.
	r := rand.New(rand.NewPCG(10, 11))
	for range 1000 {
		b := make([]byte, r.IntN(24))
		for j := range b {
			switch r.IntN(6) {
			case 0:
				b[j] = '{'
			case 1:
				b[j] = '}'
			default:
				b[j] = byte(r.Uint32())
			}
		}
		keys = append(keys, string(b))
	}
	return keys
}

// The CLUSTER KEYSLOT answers of a real Redis 7.0 server (TestRedisSlotLive -redis-golden).
func TestRedisSlotGolden(t *testing.T) {
	rows := readVectors(t, "testdata/redis/keyslot.txt")
	require.Len(t, rows, len(redisSlotKeys(true)))
	for _, f := range rows {
		require.Len(t, f, 2, "line %q", f)
		key := hexKey(t, f[0])
		require.Equalf(t, atoi(t, f[1]), RedisSlot(key), "RedisSlot(%q)", key)
	}
}

// TestRedisSlotLive asks a real redis-server in cluster mode for CLUSTER KEYSLOT. It skips
// when redis-server is not installed, except under CI=true, where CI installs it.
func TestRedisSlotLive(t *testing.T) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not on PATH under CI=true: install redis-server")
		}
		t.Skip("redis-server not on PATH")
	}
	conn := startRedis(t, path)

	short := redisSlotKeys(true)
	keys := append(slices.Clone(short), redisSlotKeys(false)...)
	for _, k := range keys {
		conn.send("CLUSTER", "KEYSLOT", k)
	}
	require.NoError(t, conn.w.Flush())
	slots := make([]int, len(keys))
	for i, k := range keys {
		slots[i], err = conn.readInt()
		require.NoError(t, err, "CLUSTER KEYSLOT %.40q", k)
		assert.Equalf(t, slots[i], RedisSlot(k), "RedisSlot(%.40q) differs from CLUSTER KEYSLOT", k)
	}
	if *redisGolden {
		conn.send("INFO", "server")
		require.NoError(t, conn.w.Flush())
		info, err := conn.readBulk()
		require.NoError(t, err)
		_, version, _ := strings.Cut(info, "redis_version:")
		version, _, _ = strings.Cut(version, "\r\n")
		var b strings.Builder
		fmt.Fprintf(&b, "# hex(key) slot: CLUSTER KEYSLOT of a real redis-server %s (- is the empty key)\n", version)
		for i, k := range short {
			h := hex.EncodeToString([]byte(k))
			if h == "" {
				h = "-"
			}
			fmt.Fprintf(&b, "%s %d\n", h, slots[i])
		}
		require.NoError(t, os.WriteFile("testdata/redis/keyslot.txt", []byte(b.String()), 0o644))
	}
}

// respConn is a minimal RESP2 client: commands as arrays of binary-safe bulk strings.
type respConn struct {
	r *bufio.Reader
	w *bufio.Writer
}

func (c *respConn) send(args ...string) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
	}
}

func (c *respConn) readLine() (byte, string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return 0, "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return 0, "", fmt.Errorf("empty RESP line")
	}
	if line[0] == '-' {
		return 0, "", fmt.Errorf("redis: %s", line[1:])
	}
	return line[0], line[1:], nil
}

func (c *respConn) readBulk() (string, error) {
	typ, s, err := c.readLine()
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(s)
	if typ != '$' || err != nil || n < 0 {
		return "", fmt.Errorf("want a bulk string reply, got %q", string(typ)+s)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

func (c *respConn) readInt() (int, error) {
	typ, s, err := c.readLine()
	if err != nil {
		return 0, err
	}
	if typ != ':' {
		return 0, fmt.Errorf("want an integer reply, got %q", string(typ)+s)
	}
	return strconv.Atoi(s)
}

// startRedis runs redis-server in cluster mode on a free port of 127.0.0.1 (its cluster bus
// on port+10000, also free) in a temporary directory, stops it when the test ends, and
// returns a connection to it.
func startRedis(t *testing.T, path string) *respConn {
	t.Helper()
	port := 0
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 <= 65535 {
			if bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000)); err == nil {
				bus.Close()
				port = p
			}
		}
		l.Close()
		if port != 0 {
			break
		}
	}
	require.NotZero(t, port, "no free port pair for redis-server")
	dir := t.TempDir()
	var out strings.Builder
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var c net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
	}
	require.NoError(t, err, "redis-server did not listen on %d: %s", port, &out)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	conn := &respConn{r: bufio.NewReader(c), w: bufio.NewWriter(c)}
	conn.send("PING")
	require.NoError(t, conn.w.Flush())
	typ, s, err := conn.readLine()
	require.NoError(t, err)
	require.Equal(t, "+PONG", string(typ)+s)
	return conn
}

var partitionsSink int

func BenchmarkPartitionsLocate(b *testing.B) {
	keys := randomKeys(12, 1<<14, 16)
	for _, n := range []int{10, 100, 1000} {
		p, err := NewPartitions(n, 16384)
		require.NoError(b, err)
		r, err := NewRedisCluster(n)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("strategy=xxh64-mod/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			m := uint64(n)
			for i := 0; b.Loop(); i++ {
				partitionsSink += int(keyhash.XXH64(keys[i&(len(keys)-1)]) % m)
			}
		})
		b.Run(fmt.Sprintf("strategy=partitions/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				partitionsSink += p.Locate(keys[i&(len(keys)-1)])
			}
		})
		b.Run(fmt.Sprintf("strategy=redis-cluster/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				partitionsSink += r.Locate(keys[i&(len(keys)-1)])
			}
		})
	}
}

// crc16Bytewise is the plain one-table CRC loop that RedisSlot's slicing-by-4 replaces.
func crc16Bytewise(b string) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc = crc<<8 ^ crc16Tables[0][byte(crc>>8)^b[i]]
	}
	return crc
}

func BenchmarkRedisSlot(b *testing.B) {
	for _, size := range []int{8, 16, 64} {
		keys := randomKeys(13, 1024, size)
		b.Run(fmt.Sprintf("crc=slicing4/bytes=%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				partitionsSink += RedisSlot(keys[i&1023])
			}
		})
		b.Run(fmt.Sprintf("crc=bytewise/bytes=%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				partitionsSink += int(crc16Bytewise(HashTag(keys[i&1023])) & 16383)
			}
		})
	}
}
