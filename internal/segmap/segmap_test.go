package segmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// check compares m with the model entry by entry, through every method that reads.
func check(t *testing.T, m *Map[int32], model map[string]int32, absent []string) {
	t.Helper()
	require.Equal(t, len(model), m.Len())
	for k, v := range model {
		got, ok := m.Get(k)
		if !ok || got != v {
			t.Fatalf("Get(%q) = %d, %v; want %d, true", k, got, ok, v)
		}
	}
	for _, k := range absent {
		if _, in := model[k]; in {
			continue
		}
		if got, ok := m.Get(k); ok {
			t.Fatalf("Get(%q) = %d, true; want absent", k, got)
		}
	}
	require.Equal(t, model, maps.Collect(m.All()))
	keys := slices.Sorted(maps.Keys(model))
	var sorted []string
	for k, v := range m.Sorted() {
		require.Equal(t, model[k], v)
		sorted = append(sorted, k)
	}
	require.Equal(t, keys, sorted, "Sorted is not in increasing key order")
}

// Random sets and deletes, cross-checked against a Go map after each step; every earlier
// version must still hold its own entries (the segments are shared, never modified).
func TestAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"", "\x00", "a", "ab", "b", "日本語", strings.Repeat("k", 300)}
	for i := range 3000 {
		keys = append(keys, "owner-"+strconv.Itoa(i))
	}
	m := New[int32]()
	model := map[string]int32{}
	type version struct {
		m     *Map[int32]
		model map[string]int32
	}
	var versions []version
	for step := range 12000 {
		k := keys[r.IntN(len(keys))]
		if r.IntN(4) == 0 {
			next, ok := m.Delete(k)
			_, want := model[k]
			require.Equalf(t, want, ok, "step %d: Delete(%q)", step, k)
			if !ok {
				require.Same(t, m, next, "Delete of an absent key must return the same map")
			}
			m = next
			delete(model, k)
		} else {
			v := int32(r.IntN(5))
			next := m.Set(k, v)
			if old, in := model[k]; in && old == v {
				require.Same(t, m, next, "Set of an unchanged value must return the same map")
			}
			m = next
			model[k] = v
		}
		if step%500 == 0 {
			check(t, m, model, keys[:50])
			versions = append(versions, version{m, maps.Clone(model)})
		}
	}
	check(t, m, model, keys)
	for _, v := range versions {
		check(t, v.m, v.model, keys[:100])
	}
}

// Growing one Set at a time regroups the segments as Build would, so no segment grows
// without bound.
func TestSegmentsGrow(t *testing.T) {
	m := New[int32]()
	n := 9000
	for i := range n {
		m = m.Set(strconv.Itoa(i), int32(i))
		require.LessOrEqual(t, m.Len(), 2*targetLen*m.Segments(), "more than twice the target per segment")
	}
	require.Equal(t, n, m.Len())
	require.Equal(t, 16, m.Segments(), "9000 entries: want 16 segments of 562 on average, as Build makes")
	for i := range n {
		v, ok := m.Get(strconv.Itoa(i))
		require.True(t, ok)
		require.Equal(t, int32(i), v)
	}
	built, err := Build(m.All())
	require.NoError(t, err)
	require.Equal(t, m.Segments(), built.Segments())
	require.Equal(t, []int{1, 1, 1, 2, 2, 4}, []int{segmentsFor(0), segmentsFor(1), segmentsFor(targetLen), segmentsFor(targetLen + 1), segmentsFor(2 * targetLen), segmentsFor(2*targetLen + 1)})
}

func TestBuild(t *testing.T) {
	_, err := Build(func(yield func(string, int32) bool) {
		for _, k := range []string{"a", "b", "a"} {
			if !yield(k, 1) {
				return
			}
		}
	})
	require.EqualError(t, err, `"a" given twice`)

	m, err := Build(maps.All(map[string]int32{}))
	require.NoError(t, err)
	require.Zero(t, m.Len())
	_, ok := m.Get("")
	require.False(t, ok)

	var nilMap *Map[int32]
	require.Zero(t, nilMap.Len())
	_, ok = nilMap.Get("x")
	require.False(t, ok)
	next, ok := nilMap.Delete("x")
	require.False(t, ok)
	require.Nil(t, next)
	require.Equal(t, 1, nilMap.Set("x", 1).Len())
}

func TestMatching(t *testing.T) {
	m, err := Build(maps.All(map[string]int32{"d": 5, "b": 7, "c": 9, "a": 1}))
	require.NoError(t, err)
	count, least := m.Matching(func(v int32) bool { return v >= 5 })
	require.Equal(t, 3, count)
	require.Equal(t, "b", least)
	count, least = m.Matching(func(v int32) bool { return v > 100 })
	require.Zero(t, count)
	require.Empty(t, least)
}

func TestGetAllocs(t *testing.T) {
	m := New[string]()
	for i := range 5000 {
		m = m.Set(fmt.Sprint("owner-", i), "node")
	}
	for _, k := range []string{"owner-17", "owner-4999", "absent", ""} {
		require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = m.Get(k) }), "Get(%q)", k)
	}
}

func appendInt(b []byte, v int32) []byte { return strconv.AppendInt(b, int64(v), 10) }

func parseInt(_ string, field []byte) (int32, error) {
	v, err := strconv.ParseInt(string(field), 10, 32)
	return int32(v), err
}

func TestText(t *testing.T) {
	m, err := Build(maps.All(map[string]int32{"b": 2, "a": 1, "with space": 3, "\xff\n": 4, "": 5}))
	require.NoError(t, err)
	text := AppendText(nil, m, appendInt)
	require.Equal(t, "directory entries=5\n\"\" 5\n\"a\" 1\n\"b\" 2\n\"with space\" 3\n\"\\xff\\n\" 4\n", string(text))
	back, err := ParseText(text, parseInt)
	require.NoError(t, err)
	require.Equal(t, maps.Collect(m.All()), maps.Collect(back.All()))
	empty, err := ParseText([]byte("directory entries=0"), parseInt)
	require.NoError(t, err)
	require.Zero(t, empty.Len())

	for _, c := range []struct{ text, want string }{
		{"", `line 1: "": want "directory entries=N"`},
		{"directory entries=01\n\"a\" 1\n", "line 1"},
		{"directory entries=-1\n", "line 1"},
		{"directory entries=2\n\"a\" 1\n", "line 1: directory entries=2, but 1 entries follow"},
		{"directory entries=0\n\"a\" 1\n", "line 1: directory entries=0, but 1 entries follow"},
		{"directory entries=1\n\"a\" 1\n\n", "line 3: blank line at the end"},
		{"directory entries=2\n\"a\" 1\n\n\"b\" 1\n", "line 3: \"\": want a quoted key"},
		{"directory entries=1\na 1\n", "line 2: \"a 1\": want a quoted key"},
		{"directory entries=1\n`a` 1\n", "line 2"},
		{"directory entries=1\n\"a 1\n", "line 2: \"\\\"a 1\": the key is not a valid Go string literal"},
		{"directory entries=1\n\"a\"1\n", "line 2: \"\\\"a\\\"1\": want one space after the key"},
		{"directory entries=1\n\"a\"  1\n", "line 2: strconv.ParseInt"},
		{"directory entries=1\n\"a\" 1\r\n", "line 2: strconv.ParseInt"},
		{"directory entries=2\n\"b\" 1\n\"a\" 1\n", "line 3: key \"a\" after \"b\": keys must be in increasing byte order, each once"},
		{"directory entries=2\n\"a\" 1\n\"a\" 2\n", "line 3: key \"a\" after \"a\""},
	} {
		_, err := ParseText([]byte(c.text), parseInt)
		require.ErrorContainsf(t, err, c.want, "%q", c.text)
	}
}

func FuzzParseText(f *testing.F) {
	f.Add([]byte("directory entries=2\n\"a\" 1\n\"b\" 2\n"))
	f.Add([]byte("directory entries=1\n\"\\xff\" -3"))
	f.Add([]byte("directory entries=0\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := ParseText(text, parseInt)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "line "), "error %q does not name the line", err)
			return
		}
		out := AppendText(nil, m, appendInt)
		back, err := ParseText(out, parseInt)
		require.NoError(t, err, "AppendText output %q does not parse", out)
		require.Equal(t, maps.Collect(m.All()), maps.Collect(back.All()))
		require.Equal(t, out, AppendText(nil, back, appendInt), "AppendText is not canonical")
	})
}
