package compat

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedisShardVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "redis-shard", "redis-shard", "json", nil)
	require.Equal(t, 15, files)
	require.Equal(t, 12*822+3*2000, placements)
	require.Equal(t, placements, presetOf(t, "redis-shard").Checked, "the preset's Checked")
}

func TestRedisShardRefused(t *testing.T) {
	require.Equal(t, 5, checkRefusedIn(t, "redis-shard", "redis-shard", "json"))
}

// The two edges of redis-shard's bisect that the vectors seldom reach: a key whose hash
// equals a point goes to the next point (the point's own name, as a key, is such a key), and
// a key above the largest point goes to that point's server, never around to the smallest.
// The reference is computed here from the points themselves.
func TestRedisShardEdges(t *testing.T) {
	names := []string{"node1", "node2", "node3", "node4"}
	for _, method := range []string{"crc32", "md5", "sha1"} {
		p, err := NewRedisShard(RedisShard{Servers: names, HashMethod: method})
		require.NoError(t, err)
		h := redisShardHashes[method]
		type point struct {
			pos  uint64
			node string
		}
		var points []point
		for _, n := range names {
			for i := range redisShardReplicas {
				points = append(points, point{h.str(n + ":" + strconv.Itoa(i)), n})
			}
		}
		slices.SortStableFunc(points, func(a, b point) int { return cmp.Compare(a.pos, b.pos) })
		owner := func(pos uint64) string { // bisect_right, clamped; the later write wins a position
			i, _ := slices.BinarySearchFunc(points, pos+1, func(p point, x uint64) int { return cmp.Compare(p.pos, x) })
			if pos == math.MaxUint64 || i == len(points) {
				i = len(points) - 1
			}
			for i+1 < len(points) && points[i+1].pos == points[i].pos {
				i++
			}
			return points[i].node
		}
		for _, n := range names {
			for i := range redisShardReplicas {
				k := n + ":" + strconv.Itoa(i)
				require.Equalf(t, owner(h.str(k)), p.Locate(k), "%s: key %q, at a point", method, k)
			}
		}
		above := 0
		for i := 0; above < 20; i++ {
			k := "k" + strconv.Itoa(i)
			if h.str(k) > points[len(points)-1].pos {
				above++
				require.Equalf(t, points[len(points)-1].node, p.Locate(k), "%s: key %q above every point", method, k)
			}
		}
	}
}

// The hash tag of a str key, as get_server_name's regular expression takes it.
func TestRedisShardHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"foo": "foo", "a{foo}": "foo", "{foo}d": "foo", "d{foo}e": "foo", "{a}{b}": "b", "{a}}": "a}",
		"{{a}": "a", "{}": "", "x{}y": "", "{": "{", "}{": "}{", "x\n{a}": "x\n{a}", "{a}\n{b}": "a",
		"{a\n}": "{a\n}", "é{ü}": "ü", "": "",
	} {
		require.Equalf(t, want, RedisShardHashTag(key), "RedisShardHashTag(%q)", key)
	}
}

// Latin-1 keys are copied on the stack: no allocation under any hash method.
func TestRedisShardAllocs(t *testing.T) {
	for _, method := range []string{"crc32", "md5", "sha1"} {
		p, err := NewRedisShard(RedisShard{Servers: []string{"a", "b", "c"}, HashMethod: method})
		require.NoError(t, err)
		checkZeroAllocs(t, p)
		for _, k := range []string{"é{ü}", "clé", strings.Repeat("é", 500), "中文"} {
			require.Zerof(t, testing.AllocsPerRun(100, func() { _ = p.Locate(k) }), "%s: Locate(%.20q) allocates", method, k)
		}
	}
}
