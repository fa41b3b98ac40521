package compat

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/shardkit/shard/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocated runs f and returns the bytes it allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxErrorLen is the longest error a preset returns for hostile text: the prefix, a line
// number, the message and excerpts of at most maxExcerpt bytes.
const maxErrorLen = 600

// hostileVariants returns config with a long run of fill written into each line in turn: at
// its end, and in place of its last word.
func hostileVariants(config []byte, fill []byte) [][]byte {
	lines := bytes.SplitAfter(config, []byte("\n"))
	var out [][]byte
	for i, l := range lines {
		body := bytes.TrimRight(l, "\r\n")
		end := l[len(body):]
		for _, changed := range [][]byte{
			append(append(bytes.Clone(body), fill...), end...),
			append(append(bytes.Clone(body[:bytes.LastIndexAny(body, " :\t,\"=")+1]), fill...), end...),
		} {
			v := bytes.Join(lines[:i], nil)
			v = append(v, changed...)
			out = append(out, append(v, bytes.Join(lines[i+1:], nil)...))
		}
	}
	return out
}

// TestHostileConfigs gives every preset its own configurations with a long run of bytes in
// each line in turn, and whole texts of one long line: each is placed or refused with a short
// error that quotes an excerpt, in memory proportional to the text. (A 100 MB line of NULs
// made a twemproxy error of 400 MB.)
func TestHostileConfigs(t *testing.T) {
	const long = 256 << 10
	worst := map[string]float64{}
	for _, p := range Presets() {
		ext := map[string]string{"twemproxy": "yml", "libmemcached": "conf", "spymemcached": "conf", "hashring": "json",
			"nginx": "conf", "haproxy": "cfg", "goredis": "json", "jedis": "json", "grpc": "json", "vitess": "json",
			"pymemcache": "json", "uhashring": "json", "python-memcache": "json", "redis-shard": "json"}[p.System]
		require.NotEmpty(t, ext, p.System)
		placed, refused := configFiles(t, p.System, ext)
		inputs := [][]byte{bytes.Repeat([]byte{0}, long), bytes.Repeat([]byte("x"), long), bytes.Repeat([]byte("a "), long/2)}
		for _, path := range append(placed[:min(2, len(placed))], refused[:min(1, len(refused))]...) {
			config, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, fill := range [][]byte{bytes.Repeat([]byte("x"), long), bytes.Repeat([]byte{0}, long), bytes.Repeat([]byte("9"), long)} {
				inputs = append(inputs, hostileVariants(config, fill)...)
			}
		}
		for _, in := range inputs {
			var err error
			got := allocated(func() { _, err = p.New(in, "") })
			ratio := float64(got) / float64(len(in))
			worst[p.System] = max(worst[p.System], ratio)
			assert.LessOrEqualf(t, got, uint64(64*len(in)+4<<20), "%s: %d bytes of text: bytes allocated", p.System, len(in))
			if err == nil {
				continue
			}
			var ce *ConfigError
			assert.Truef(t, errors.Is(err, ErrConfig) && errors.As(err, &ce), "%s: %v is no ConfigError", p.System, err)
			if !assert.LessOrEqualf(t, len(err.Error()), maxErrorLen, "%s: error of %d bytes: %.200s", p.System, len(err.Error()), err) {
				break
			}
		}
	}
	t.Logf("most bytes allocated per byte of text: %v", worst)
}

// TestExcerpt: long arguments are cut to maxExcerpt bytes, short ones and other types kept,
// and messages made already are kept whole.
func TestExcerpt(t *testing.T) {
	long := strings.Repeat("x", 1000)
	err := configErr("test", 3, "%q %s %d %v %s", long, []byte(long), 7, errors.New("e"), sprintf("%s", long))
	want := fmt.Sprintf("compat: test: line 3: %q %s 7 e %s", long[:77]+"...", long[:77]+"...", long[:77]+"...")
	assert.Equal(t, want, err.Error())
	assert.Equal(t, "abc", excerpt("abc"))
}

// TestLineCounter: asked in order, the counter reads each byte once; asked out of order, it
// still answers right.
func TestLineCounter(t *testing.T) {
	text := []byte("a\nb\n\nc\nd")
	c := &lineCounter{text: text}
	want := []int{1, 1, 2, 2, 3, 4, 4, 5, 5, 5}
	for off := range len(text) + 1 {
		assert.Equal(t, want[off], c.at(int64(off)), "offset %d", off)
	}
	for _, off := range []int{3, 0, 8, 5, -1, 100} {
		assert.Equal(t, want[min(max(off, 0), len(text))], c.at(int64(off)), "offset %d", off)
	}
}

// haproxyMapSlow is HAProxy's own map-based table build (init_server_map and
// recalc_server_map, lb_map.c), which scans every server for every slot: the reference
// haproxyMap is checked against.
func haproxyMapSlow(dst []int32, lines []haproxyLine, nodes []pool.Node) []int32 {
	servers, node := haproxyServers(lines, nodes)
	g := 0
	for _, s := range servers {
		if s.weight > 0 {
			g = gcd(g, s.weight)
		}
	}
	total := 0
	for _, s := range servers {
		if s.takes {
			total += s.weight / g
		}
	}
	score := make([]int, len(servers))
	for range total {
		best, bestV := -1, 0
		for i, s := range servers {
			if !s.takes {
				continue
			}
			if total == 1 {
				best = i
				break
			}
			score[i] += s.weight / g
			if v := (score[i] + total) / total; best < 0 || v > bestV {
				best, bestV = i, v
			}
		}
		dst = append(dst, node[best])
		score[best] -= total
	}
	return dst
}

// TestHAProxyMapMatchesHAProxy cross-checks the map-based table against HAProxy's own scan
// over random servers: weights, ids, servers that take no keys and members no line has. The
// table takes memory in proportion to its slots: 5000 servers of weights 1 to 256 took 47 s
// to build when every slot scanned every server.
func TestHAProxyMapMatchesHAProxy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 1 + r.IntN(40)
		var lines []haproxyLine
		var nodes []pool.Node
		for i := range n {
			l := haproxyLine{name: fmt.Sprint("s", i), weight: []int{1, 2, 3, 4, 6, 8, 12, 256, r.IntN(257)}[r.IntN(9)]}
			if r.IntN(5) == 0 {
				l.id = 1 + r.IntN(2*n)
			}
			lines = append(lines, l)
			if l.weight > 0 && r.IntN(6) != 0 {
				nodes = append(nodes, pool.Node{Name: l.name, Weight: l.weight})
			}
		}
		for i := range r.IntN(3) {
			nodes = append(nodes, pool.Node{Name: fmt.Sprint("extra", i), Weight: 1 + r.IntN(8)})
		}
		if len(nodes) == 0 {
			continue
		}
		want := haproxyMapSlow(nil, lines, nodes)
		got := haproxyMap(nil, lines, nodes)
		require.Equalf(t, want, got, "trial %d: lines %+v nodes %+v", trial, lines, nodes)
	}
	// 5000 servers of weights 1 to 256.
	var lines []haproxyLine
	var nodes []pool.Node
	for i := range 5000 {
		w := 1 + r.IntN(256)
		lines = append(lines, haproxyLine{name: fmt.Sprint("s", i), weight: w})
		nodes = append(nodes, pool.Node{Name: fmt.Sprint("s", i), Weight: w})
	}
	var table []int32
	got := allocated(func() { table = haproxyMap(nil, lines, nodes) })
	t.Logf("5000 servers: %d slots, %d bytes allocated", len(table), got)
	assert.LessOrEqual(t, got, uint64(12*len(table)+256*len(lines)+1<<20), "bytes allocated")
}

// TestPoolLimitLines: a server list whose points are more than a pool holds is refused with
// pool.ErrLimit at a line of the text, the line that lists the last server, not at line 0.
func TestPoolLimitLines(t *testing.T) {
	const n = 30000 // 160 points each: more than the 4194304 a pool holds
	var tw, lm, spy, hr strings.Builder
	tw.WriteString("p:\n  listen: 127.0.0.1:22121\n  hash: md5\n  distribution: ketama\n  servers:\n")
	lm.WriteString("behavior DISTRIBUTION CONSISTENT\nbehavior KETAMA_WEIGHTED 1\n")
	spy.WriteString("locator=CONSISTENT\nhash=KETAMA_HASH\nservers=")
	hr.WriteString("{\n\"servers\": [\n")
	for i := range n {
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)
		fmt.Fprintf(&tw, "   - %s:11211:1\n", addr)
		fmt.Fprintf(&lm, "server %s 11211 1\n", addr)
		if i > 0 {
			spy.WriteString(" ")
			hr.WriteString(",\n")
		}
		fmt.Fprintf(&spy, "%s:11211", addr)
		fmt.Fprintf(&hr, "%q", addr+":11211")
	}
	spy.WriteString("\n")
	hr.WriteString("\n]\n}\n")
	for _, c := range []struct {
		system, text string
		line         int
	}{
		{"twemproxy", tw.String(), 5 + n},
		{"libmemcached", lm.String(), 2 + n},
		{"spymemcached", spy.String(), 3},
		{"hashring", hr.String(), 2},
	} {
		_, err := presetOf(t, c.system).New([]byte(c.text), "")
		require.ErrorIsf(t, err, ErrConfig, c.system)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equalf(t, c.line, ce.Line, "%s: %v", c.system, err)
		if c.system != "hashring" { // hashring refuses the points itself, as the library's limit
			assert.ErrorIsf(t, err, pool.ErrLimit, c.system)
		}
		assert.LessOrEqual(t, len(err.Error()), maxErrorLen, c.system)
	}
}

// TestJSONLinesLinear: the JSON readers count lines as they go, over each byte a few times
// at most; they counted from the start for every token, so a 2 MB go-redis, Jedis or
// hashring configuration took 21-25 s (the bytes counted grew with the square of the text).
func TestJSONLinesLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString("{\n")
	for i := range 20000 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "  \"s%d\": \"10.0.%d.%d:6379\"", i, i/256%256, i%256)
	}
	b.WriteString("\n}\n")
	text := []byte(b.String())
	lines := &lineCounter{text: text}
	_, err := parseJSONLines("goredis", text, lines)
	require.NoError(t, err)
	assert.LessOrEqual(t, lines.scanned, 2*len(text), "bytes counted over for %d bytes of text", len(text))
	lines = &lineCounter{text: text}
	_, err = readJSONLines(text, lines)
	require.NoError(t, err)
	assert.LessOrEqual(t, lines.scanned, 2*len(text), "bytes counted over for %d bytes of text", len(text))
}
