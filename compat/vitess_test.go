package compat

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

const vitessDir = vectorDir + "/vitess"

var vitessIntVindexes = []string{"hash", "numeric", "reverse_bits"}

// vitessValues returns the values a vindex's vectors are made of: ints.txt for the integer
// vindexes, keys.txt for the others.
func vitessValues(t testing.TB, vindex string) []string {
	if !slices.Contains(vitessIntVindexes, vindex) {
		return keys(t)
	}
	var out []string
	readLines(t, filepath.Join(vitessDir, "ints.txt"), func(line string) {
		if strings.HasPrefix(line, "#") {
			return
		}
		v, err := strconv.Unquote(line)
		require.NoError(t, err, line)
		out = append(out, v)
	})
	require.Len(t, out, 972)
	return out
}

// vitessUncoveredValue reports a unicode_loose value whose keyspace id this package does not
// compute: valid UTF-8 with, once trailing spaces are removed, a character at or above
// U+0530 or a combining mark.
func vitessUncoveredValue(vindex, v string) bool {
	if !strings.HasPrefix(vindex, "unicode_loose_") || !utf8.ValidString(v) {
		return false
	}
	return strings.IndexFunc(strings.TrimRight(v, " "), vitessUncoveredRune) >= 0
}

func vitessUncoveredRune(r rune) bool { return r >= 0x530 || unicode.In(r, unicode.Mn, unicode.Me) }

// Every keyspace id that Vitess's own vindexes gave (ksid-*.txt) is reproduced, or refused
// with ErrNoKeyspaceID where Vitess gives none; the unicode_loose vindexes' values with a
// character this package does not weigh are refused with ErrNotReproduced, never answered
// wrong.
func TestVitessKeyspaceIDs(t *testing.T) {
	total, none, uncovered := 0, 0, 0
	for _, vindex := range VitessVindexes {
		k, err := NewVitess(Vitess{Vindex: vindex, Shards: []string{"-"}})
		require.NoError(t, err)
		values := vitessValues(t, vindex)
		n := 0
		readLines(t, filepath.Join(vitessDir, "ksid-"+vindex+".txt"), func(line string) {
			if strings.HasPrefix(line, "#") {
				return
			}
			i, want, ok := strings.Cut(line, " ")
			require.True(t, ok, line)
			idx, err := strconv.Atoi(i)
			require.NoError(t, err)
			require.Equal(t, n, idx, "%s: values in order", vindex)
			n++
			v := values[idx]
			got, err := k.KeyspaceID(nil, v)
			switch {
			case vitessUncoveredValue(vindex, v):
				require.ErrorIs(t, err, ErrNotReproduced, "%s %q", vindex, v)
				require.NotEqual(t, "-", want, "%s %q: Vitess maps it", vindex, v)
				uncovered++
			case want == "-":
				require.ErrorIs(t, err, ErrNoKeyspaceID, "%s %q: got %x", vindex, v, got)
				none++
			default:
				require.NoError(t, err, "%s %q", vindex, v)
				require.Equal(t, want, hex.EncodeToString(got), "%s: value %d %q", vindex, idx, v)
			}
			total++
		})
		require.Equal(t, len(values), n, vindex)
	}
	t.Logf("%d keyspace ids: %d reproduced, %d without one in Vitess too, %d not reproduced and refused", total, total-none-uncovered, none, uncovered)
	require.Equal(t, 5*2000+3*972, total)
	require.Equal(t, 13+218+218, none)
	require.Equal(t, 2*775, uncovered)
}

// Every shard that Vitess resolved: each configuration's vectors through the preset.
func TestVitessVectors(t *testing.T) {
	p := presetOf(t, "vitess")
	paths, err := filepath.Glob(filepath.Join(vitessDir, "*.json"))
	require.NoError(t, err)
	files, placed, none, uncovered := 0, 0, 0, 0
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		if strings.Contains(name, "refused-") {
			continue
		}
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		pl, err := p.New(config, "")
		require.NoError(t, err, name)
		k := pl.(*VitessKeyspace)
		values := vitessValues(t, k.Vindex())
		var servers []string
		want := map[int]string{}
		readLines(t, strings.TrimSuffix(path, ".json")+".txt", func(line string) {
			if rest, ok := strings.CutPrefix(line, "# servers: "); ok {
				servers = parseServersLine(t, rest)
			} else if !strings.HasPrefix(line, "#") {
				i, s, _ := strings.Cut(line, " ")
				idx, err := strconv.Atoi(i)
				require.NoError(t, err)
				want[idx] = s
			}
		})
		require.Equal(t, servers, names(pl.Nodes()), name)
		require.Len(t, want, len(values), name)
		for i, value := range values {
			got, err := k.Shard(value)
			switch {
			case vitessUncoveredValue(k.Vindex(), value):
				require.ErrorIs(t, err, ErrNotReproduced, "%s: %q", name, value)
				require.Equal(t, "", k.Locate(value))
				uncovered++
			case want[i] == "-":
				require.ErrorIs(t, err, ErrNoKeyspaceID, "%s: %q gave %q", name, value, got)
				require.Equal(t, "", k.Locate(value))
				none++
			default:
				s, err2 := strconv.Atoi(want[i])
				require.NoError(t, err2)
				require.NoError(t, err, "%s: %q", name, value)
				require.Equal(t, servers[s], got, "%s: value %d %q", name, i, value)
				require.Equal(t, got, k.Locate(value))
				placed++
			}
		}
		files++
	}
	t.Logf("%d configurations: %d placements reproduced, %d values without a shard in Vitess too, %d not reproduced and refused", files, placed, none, uncovered)
	require.Equal(t, 42, files)
	require.Equal(t, 59382, placed)
	require.Equal(t, placed, presetOf(t, "vitess").Checked, "the preset's Checked")
	require.Equal(t, 12*13+6*218, none)
	require.Equal(t, 6*775, uncovered)
}

func names(nodes []pool.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func TestVitessRefused(t *testing.T) {
	require.Equal(t, 17, checkRefusedIn(t, "vitess", "vitess", "json"))
}

// The weights compiled in are those recorded from Vitess, and cover what
// vitessUncoveredRune says.
func TestVitessWeights(t *testing.T) {
	n, covered := 0, 0
	readLines(t, filepath.Join(vitessDir, "weights.txt"), func(line string) {
		if strings.HasPrefix(line, "#") {
			return
		}
		c, w, ok := strings.Cut(line, " ")
		require.True(t, ok)
		r, err := strconv.ParseUint(c, 16, 32)
		require.NoError(t, err)
		require.Equal(t, uint64(n), r, "characters in order")
		switch w {
		case "x":
			require.Equal(t, vitessUncovered, vitessWeights[r], "%U", r)
		case "-":
			require.Equal(t, "", vitessWeights[r], "%U", r)
		default:
			b, err := hex.DecodeString(w)
			require.NoError(t, err)
			require.Equal(t, string(b), vitessWeights[r], "%U", r)
		}
		require.Equal(t, vitessUncoveredRune(rune(r)), w == "x", "%U", r)
		if w != "x" {
			covered++
		}
		n++
	})
	require.Equal(t, len(vitessWeights), n)
	require.Equal(t, 1209, covered)
}

// vitessSlowShard is GetShardForKeyspaceID over OrderAndCheckPartitions' order, the obvious
// way: the first shard in key range order whose range contains id, comparing normalized
// bounds.
func vitessSlowShard(t *testing.T, shards []string, id []byte) string {
	var list []vitessShard
	for i, name := range shards {
		s, err := vitessShardOf(name)
		require.NoError(t, err)
		s.index = i
		list = append(list, s)
	}
	slices.SortStableFunc(list, func(a, b vitessShard) int {
		if c := vitessStartCompare(a, b); c != 0 {
			return c
		}
		return vitessEndCompare(a, b)
	})
	norm := string(bytes.TrimRight(id, "\x00"))
	for _, s := range list {
		start, end := vitessNorm(s.start), vitessNorm(s.end)
		if vitessComplete(s) || (start == "" || norm >= start) && (end == "" || norm < end) {
			return shards[s.index]
		}
	}
	t.Fatalf("no shard of %v holds %x", shards, id)
	return ""
}

// ShardOf agrees with the slow scan on edge and random ids, for every committed shard list.
func TestVitessShardOfAgreesWithScan(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(vitessDir, "xxhash-*.json"))
	require.NoError(t, err)
	ids := [][]byte{nil, {0}, {0x80}, {0x80, 0}, {0x7f, 0xff}, {0x80, 0x80}, {0x80, 0x7f, 0xff}, {0xff}, bytes.Repeat([]byte{0xff}, 20), {0x55, 0x55}, bytes.Repeat([]byte{0x55}, 10), bytes.Repeat([]byte{0x55}, 11)}
	for i := range 3000 {
		ids = append(ids, []byte(fmt.Sprintf("%08x", uint64(i)*2654435761)))
		ids = append(ids, binaryBE(uint64(i)*0x9e3779b97f4a7c15))
	}
	for _, path := range paths {
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		cfg, err := ParseVitess(config)
		require.NoError(t, err)
		k, err := NewVitess(cfg)
		require.NoError(t, err)
		for _, id := range ids {
			require.Equal(t, vitessSlowShard(t, cfg.Shards, id), k.ShardOf(id), "%s: %x", filepath.Base(path), id)
		}
	}
}

func binaryBE(n uint64) []byte {
	return []byte{byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

func TestVitessAllocatesNothing(t *testing.T) {
	for _, file := range []string{"hash-16.json", "xxhash-uneven-5.json", "numeric-4.json", "unicode_loose_md5-2.json", "unicode_loose_xxhash-4.json", "binary-4.json", "binary_md5-2.json", "reverse_bits-2.json"} {
		p := presetConfig(t, "vitess", file)
		dst := make([]string, 0, 3)
		for _, v := range []string{"", "42", "-7", "user:1000", strings.Repeat("x", 2048), "18446744073709551615", "Müller", strings.Repeat("Я", 682)} {
			require.Zerof(t, testing.AllocsPerRun(100, func() { _ = p.Locate(v) }), "%s: Locate(%.20q)", file, v)
			require.Zerof(t, testing.AllocsPerRun(100, func() { dst = p.AppendN(dst[:0], v, 3) }), "%s: AppendN(%.20q)", file, v)
		}
	}
	// Past 2048 bytes the unicode_loose weights are on the heap, and still right.
	k, err := NewVitess(Vitess{Vindex: "unicode_loose_md5", Shards: []string{"-80", "80-"}})
	require.NoError(t, err)
	long := strings.Repeat("Ab", 1500)
	a, err := k.KeyspaceID(nil, long)
	require.NoError(t, err)
	b, err := k.KeyspaceID(nil, strings.ToLower(long)+"   ")
	require.NoError(t, err)
	require.Equal(t, a, b, "case and trailing spaces are ignored")
}

// The unicode_loose collation as the weights make it: no case, no accents, trailing spaces
// ignored, ß as ss, L· as L; a combining mark or a character past U+052F refused.
func TestVitessUnicodeLoose(t *testing.T) {
	for _, vindex := range []string{"unicode_loose_md5", "unicode_loose_xxhash"} {
		k, err := NewVitess(Vitess{Vindex: vindex, Shards: []string{"-"}})
		require.NoError(t, err)
		id := func(v string) string {
			b, err := k.KeyspaceID(nil, v)
			require.NoError(t, err, v)
			return hex.EncodeToString(b)
		}
		for _, same := range [][]string{
			{"José", "jose", "JOSÉ  ", "jose\x00"},
			{"straße", "STRASSE"},
			{"L·lull", "Llull", "l\u0387lull"},
			{"Ŀlull", "ŀLULL", "Llull"}, // Ŀ weighs as L, as L· does
			{"Ёлка", "ёлка"},
			{"", "   ", "\x01"},
		} {
			for _, v := range same[1:] {
				require.Equal(t, id(same[0]), id(v), "%s: %q and %q", vindex, same[0], v)
			}
		}
		require.NotEqual(t, id("Llull"), id("L lull"), vindex)
		for _, v := range []string{"e\u0301", "日本", "🙂", "\u0530", "a\u0483"} {
			_, err := k.KeyspaceID(nil, v)
			require.ErrorIs(t, err, ErrNotReproduced, "%s: %q", vindex, v)
		}
		_, err = k.KeyspaceID(nil, "\xff")
		require.ErrorIs(t, err, ErrNoKeyspaceID, vindex)
	}
}

// AppendN gives the owner, then the next shards in key range order, wrapping, then the
// empty ones; changes are refused and change nothing.
func TestVitessAppendNAndChanges(t *testing.T) {
	k, err := NewVitess(Vitess{Vindex: "numeric", Shards: []string{"c0-", "80-8000", "-40", "8000-c0", "40-80"}})
	require.NoError(t, err)
	v := strconv.FormatUint(0xc1<<56, 10)
	require.Equal(t, "c0-", k.Locate(v))
	require.Equal(t, []string{"c0-", "-40", "40-80", "8000-c0", "80-8000"}, k.AppendN(nil, v, 9))
	require.Equal(t, []string{"40-80", "8000-c0"}, k.AppendN(nil, "4611686018427387904", 2))
	require.Empty(t, k.AppendN(nil, "-1", 3))
	require.Empty(t, k.AppendN(nil, "1", 0))
	require.ErrorIs(t, k.Add(pool.Node{Name: "x"}), ErrConfig)
	require.ErrorIs(t, k.Remove("c0-"), pool.ErrNode)
	require.ErrorIs(t, k.SetWeight("c0-", 2), pool.ErrWeight)
	require.Equal(t, "c0-", k.Locate(v))
	_, err = k.Shard("-1")
	require.ErrorIs(t, err, ErrNoKeyspaceID)
	require.Contains(t, err.Error(), `numeric: "-1"`)
}

func TestVitessErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`[]`, "line 1: want a JSON object"},
		{`{"vindex": "hash"}`, `want "shards"`},
		{`{"shards": ["-"]}`, `want "vindex"`},
		{`{"vindex": "lookup_hash", "shards": ["-"]}`, `vindex type "lookup_hash": not reproduced`},
		{`{"vindex": "hash", "vindex": "hash", "shards": ["-"]}`, `"vindex" is given twice`},
		{`{"vindex": "hash", "shards": ["-"], "keyspace": "ks"}`, `unknown member "keyspace"`},
		{"{\"vindex\": \"hash\",\n \"shards\": [\"-80\",\n \"80-\", 7]}", "line 3: a shard name must be a string"},
		{"{\"vindex\": \"hash\",\n \"shards\": [\"-80\",\n \"80-\",\n \"-80\"]}", `line 4: shard "-80" is listed twice`},
		{`{"vindex": "hash", "shards": ["-80", "80-00"]}`, "out of order keys: 80 is not strictly smaller than 00"},
		{`{"vindex": "hash", "shards": ["-00"]}`, "does not end with the max key"},
		{`{"vindex": "hash", "shards": ["00-80", "80-"]}`, "does not start with the min key"},
		{`{"vindex": "hash", "shards": ["-00", "00-"]}`, "a gap or an overlap"},
		{`{"vindex": "hash", "shards": ["a", "b"]}`, "have no key range"},
		{`{"vindex": "hash", "shards": ["-8é"]}`, "invalid character"},
		{`{"vindex": "hash", "shards": ["-80", "80-c0"]}`, "does not end with the max key"},
	} {
		_, err := presetOf(t, "vitess").New([]byte(c.text), "")
		require.ErrorIs(t, err, ErrConfig, c.text)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce))
		require.Contains(t, err.Error(), c.want, c.text)
		require.True(t, strings.HasPrefix(err.Error(), "compat: vitess: line "), err.Error())
	}
	_, err := NewVitess(Vitess{Vindex: "hash"})
	require.ErrorIs(t, err, ErrConfig)
	require.Equal(t, "compat: vitess: no shards", err.Error())
	_, err = presetOf(t, "vitess").New([]byte(`{}`), "other")
	require.ErrorIs(t, err, ErrConfig)
	// A single shard without a key range holds the keyspace (an unsharded keyspace's "0").
	k, err := NewVitess(Vitess{Vindex: "xxhash", Shards: []string{"main"}})
	require.NoError(t, err)
	require.Equal(t, "main", k.Locate("anything"))
}

// FuzzVitess builds a keyspace from arbitrary text: refused with a short ConfigError, or every
// value has a member or none, ShardOf agrees with the scan, and the text costs memory in
// proportion.
func FuzzVitess(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join(vitessDir, "*.json"))
	require.NoError(f, err)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b, "42")
	}
	f.Fuzz(func(t *testing.T, config []byte, value string) {
		var pl pool.Pool
		var err error
		got := allocated(func() { pl, err = presetOf(t, "vitess").New(config, "") })
		if budget := uint64(64*len(config) + 1<<20); got > budget {
			t.Fatalf("%d bytes of text: %d bytes allocated", len(config), got)
		}
		if err != nil {
			var ce *ConfigError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || len(err.Error()) > maxErrorLen {
				t.Fatalf("error %v (%T)", err, err)
			}
			return
		}
		k := pl.(*VitessKeyspace)
		shards := names(k.Nodes())
		if s, err := k.Shard(value); err == nil {
			if !slices.Contains(shards, s) {
				t.Fatalf("Shard(%q) = %q, not one of %v", value, s, shards)
			}
			id, _ := k.KeyspaceID(nil, value)
			if slow := vitessSlowShard(t, shards, id); slow != s {
				t.Fatalf("Shard(%q) = %q, the scan says %q", value, s, slow)
			}
		} else if !errors.Is(err, ErrNoKeyspaceID) && !errors.Is(err, ErrNotReproduced) {
			t.Fatalf("Shard(%q): %v", value, err)
		}
		if id := []byte(value); !slices.Contains(shards, k.ShardOf(id)) || k.ShardOf(id) != vitessSlowShard(t, shards, id) {
			t.Fatalf("ShardOf(%x) = %q, the scan says %q", id, k.ShardOf(id), vitessSlowShard(t, shards, id))
		}
	})
}
