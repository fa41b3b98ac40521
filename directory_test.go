package shard

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// pinnedJump is a Directory over Jump with two keys of the contract's allocation check
// pinned to shard 0, which every size has.
func pinnedJump(n int) (Sharder, error) {
	j, err := NewJump(n)
	if err != nil {
		return nil, err
	}
	d := NewDirectory(j, nil)
	for _, owner := range []string{"", "user:1000", "\xff\xfe\xfd"} {
		if err := d.Pin(owner, 0); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func TestDirectoryContract(t *testing.T) {
	checkContract(t, contract{
		name:          "directory(jump)",
		newSharder:    pinnedJump,
		sizes:         []int{1, 2, 7, 10, 64, 1000},
		tooMany:       above(maxJump),
		resizeIsFresh: true, // the same pins over a stateless rule
		minimalGrow:   true, // pinned keys stay, the rest moves as jump moves them
		minimalShrink: true,
	})
}

// Without entries a Directory places every key exactly as its fallback places the key's
// owner: as the fallback itself, or as ByPrefix / ByHashTag of it.
func TestDirectoryUnpinnedIsFallback(t *testing.T) {
	keys := append(randomKeys(21, 3000, 12), adversarialKeys()...)
	keys = append(keys, "1-A1", "1-A1-C1", "{u1}.a", "{u1}.b")
	for _, tc := range wrapped {
		p, err := NewPartitions(7, 1024)
		require.NoError(t, err)
		d := NewDirectory(p, tc.owner)
		want := tc.wrap(p)
		for _, k := range keys {
			require.Equalf(t, want.Locate(k), d.Locate(k), "%s: Locate(%.40q)", tc.name, k)
		}
	}
}

var wrapped = []struct {
	name  string
	owner func(string) string
	wrap  func(Sharder) Sharder
}{
	{"key", nil, func(s Sharder) Sharder { return s }},
	{"prefix", PrefixOwner, func(s Sharder) Sharder { return ByPrefix(s) }},
	{"hashtag", HashTag, func(s Sharder) Sharder { return ByHashTag(s) }},
}

func TestDirectoryPin(t *testing.T) {
	j, err := NewJump(10)
	require.NoError(t, err)
	d := NewDirectory(j, PrefixOwner)
	rule := ByPrefix(j)
	user1 := []string{"1", "1-A1", "1-A2", "1-A1-C1"}
	home := rule.Locate("1")
	pin := (home + 3) % 10
	require.NoError(t, d.Pin("1", pin))
	for _, k := range user1 {
		require.Equalf(t, pin, d.Locate(k), "Locate(%q) after Pin(1, %d)", k, pin)
	}
	for _, k := range randomKeys(22, 500, 8) {
		if PrefixOwner(k) != "1" {
			require.Equal(t, rule.Locate(k), d.Locate(k), "an unpinned owner moved")
		}
	}
	got, ok := d.Pinned("1")
	require.True(t, ok)
	require.Equal(t, pin, got)
	_, ok = d.Pinned("2")
	require.False(t, ok)
	require.Equal(t, 1, d.Len())

	require.NoError(t, d.Pin("1", home), "repinning moves the entry")
	require.Equal(t, home, d.Locate("1-A1"))
	require.True(t, d.Unpin("1"))
	require.False(t, d.Unpin("1"), "a second Unpin finds nothing")
	require.Zero(t, d.Len())
	require.Equal(t, home, d.Locate("1-A2"))

	require.NoError(t, d.Pin("2", 4))
	before := placement(d, user1)
	for _, c := range []struct {
		owner string
		shard int
		want  error
		msg   string
	}{
		{"1", -1, ErrShard, `shard: directory: pin owner "1" to shard -1: allowed range is [0, 10)`},
		{"1", 10, ErrShard, `shard: directory: pin owner "1" to shard 10: allowed range is [0, 10)`},
		{"1-A1", 3, ErrDirectory, `shard: directory: pin owner "1-A1": that key's owner is "1": pin the owner`},
		{strings.Repeat("x", MaxOwnerLen+1), 3, ErrDirectory, "65537 bytes, longer than 65536"},
	} {
		err := d.Pin(c.owner, c.shard)
		require.ErrorIs(t, err, c.want)
		require.ErrorContains(t, err, c.msg)
		require.Equal(t, 1, d.Len(), "a failed Pin changed the entries")
		require.Equal(t, before, placement(d, user1), "a failed Pin changed the placement")
	}
	require.NoError(t, d.Pin(strings.Repeat("x", MaxOwnerLen), 3), "an owner of MaxOwnerLen bytes")
}

func TestDirectoryResize(t *testing.T) {
	j, err := NewJump(10)
	require.NoError(t, err)
	d := NewDirectory(j, nil)
	require.NoError(t, d.Pin("zeta", 7))
	require.NoError(t, d.Pin("alpha", 8))
	require.NoError(t, d.Pin("beta", 2))
	keys := randomKeys(23, 300, 8)
	before := placement(d, keys)

	err = d.Resize(7)
	require.ErrorIs(t, err, ErrShard)
	require.EqualError(t, err, `shard: directory: resize to 7 shards: owner "alpha" is pinned to shard 8 (owners pinned to shards >= 7: 2): unpin or repin them first: shard out of range`)
	require.Equal(t, 10, d.Shards())
	require.Equal(t, before, placement(d, keys))

	require.ErrorContains(t, d.Resize(8), `owner "alpha" is pinned to shard 8 (owners pinned to shards >= 8: 1)`)
	require.ErrorIs(t, d.Resize(0), ErrShardCount, "the fallback's own error for a bad count")
	require.NoError(t, d.Resize(9))
	require.Equal(t, 9, d.Shards())
	require.Equal(t, 8, d.Locate("alpha"))
	require.NoError(t, d.Pin("alpha", 1))
	require.NoError(t, d.Resize(8))
	require.Equal(t, 7, d.Locate("zeta"))
	require.Equal(t, 1, d.Locate("alpha"))
}

func TestDirectoryAllocs(t *testing.T) {
	j, err := NewJump(100)
	require.NoError(t, err)
	for _, tc := range wrapped {
		d := NewDirectory(j, tc.owner)
		keys := []string{"", "user:1000", "1-A1", "{u1}.a", strings.Repeat("x", 4096)}
		for _, k := range keys {
			require.Zerof(t, testing.AllocsPerRun(100, func() { _ = d.Locate(k) }), "%s: empty directory: Locate(%.20q) allocates", tc.name, k)
		}
		entries := map[string]int{}
		for i := range 20000 {
			entries["owner:"+strconv.Itoa(i)] = i % 100
		}
		for _, k := range keys[:3] {
			if tc.owner == nil || tc.owner(k) == k {
				entries[k] = 5
			}
		}
		require.NoError(t, d.Load(maps.All(entries)))
		for _, k := range append(keys, "owner:17", "owner:19999", "owner:20000") {
			require.Zerof(t, testing.AllocsPerRun(100, func() { _ = d.Locate(k) }), "%s: Locate(%.20q) allocates", tc.name, k)
			require.Zerof(t, testing.AllocsPerRun(100, func() { _, _ = d.Pinned(k) }), "%s: Pinned(%.20q) allocates", tc.name, k)
		}
	}
}

// checkEntries compares d's entries, listed in order, with want.
func checkEntries(t *testing.T, d *Directory, want map[string]int) {
	t.Helper()
	require.Equal(t, len(want), d.Len())
	var owners []string
	for owner, shard := range d.Entries() {
		require.Equalf(t, want[owner], shard, "entry of %q", owner)
		owners = append(owners, owner)
	}
	require.Equal(t, slices.Sorted(maps.Keys(want)), owners, "Entries is not the owners in increasing order")
	for owner, shard := range want {
		got, ok := d.Pinned(owner)
		require.True(t, ok)
		require.Equal(t, shard, got)
	}
}

// rows stands for a database table of (owner, shard) rows.
type row struct {
	Owner string
	Shard int
}

func rowsOf(rows []row) func(yield func(string, int) bool) {
	return func(yield func(string, int) bool) {
		for _, r := range rows {
			if !yield(r.Owner, r.Shard) {
				return
			}
		}
	}
}

func TestDirectoryLoad(t *testing.T) {
	j, err := NewJump(50)
	require.NoError(t, err)
	d := NewDirectory(j, PrefixOwner)
	r := rand.New(rand.NewPCG(24, 25))
	want := map[string]int{}
	var rows []row
	for i := range 5000 {
		owner := strconv.Itoa(r.IntN(1 << 30))
		if _, dup := want[owner]; dup || i == 0 {
			owner = fmt.Sprint("u", i)
		}
		want[owner] = r.IntN(50)
		rows = append(rows, row{owner, want[owner]})
	}
	require.NoError(t, d.Load(rowsOf(rows)))
	checkEntries(t, d, want)

	// Entries -> rows -> Load is the identity.
	var saved []row
	for owner, shard := range d.Entries() {
		saved = append(saved, row{owner, shard})
	}
	e := NewDirectory(j, PrefixOwner)
	require.NoError(t, e.Load(rowsOf(saved)))
	checkEntries(t, e, want)

	for _, c := range []struct {
		rows []row
		want error
		msg  string
	}{
		{[]row{{"a", 1}, {"b", 2}, {"a", 3}}, ErrDirectory, `shard: directory: load: owner "a" given twice`},
		{[]row{{"a", 1}, {"b", 50}}, ErrShard, `shard: directory: load: entry 1: owner "b" to shard 50: allowed range is [0, 50)`},
		{[]row{{"a", 1}, {"b", 2}, {"c-1", 3}}, ErrDirectory, `shard: directory: load: entry 2: owner "c-1": that key's owner is "c": pin the owner`},
	} {
		err := d.Load(rowsOf(c.rows))
		require.ErrorIs(t, err, c.want)
		require.EqualError(t, err, c.msg+": "+c.want.Error())
		checkEntries(t, d, want)
	}
	require.NoError(t, d.Load(rowsOf(nil)))
	require.Zero(t, d.Len())
}

func TestDirectoryText(t *testing.T) {
	j, err := NewJump(10)
	require.NoError(t, err)
	d := NewDirectory(j, nil)
	entries := map[string]int{"user:42": 0, "1": 4, "": 9, "with space": 3, "日本語": 2, "\xff\x00\n": 1}
	require.NoError(t, d.Load(maps.All(entries)))
	text, err := d.MarshalText()
	require.NoError(t, err)
	checkRegress(t, "regress/directory.txt", string(text))

	e := NewDirectory(j, nil)
	require.NoError(t, e.UnmarshalText(text))
	checkEntries(t, e, entries)
	again, err := e.MarshalText()
	require.NoError(t, err)
	require.Equal(t, text, again)

	const h = "directory entries=2\n"
	for _, c := range []struct{ text, want string }{
		{"", `line 1: "": want "directory entries=N"`},
		{"partitions=3\n", "line 1"},
		{"directory entries=3\n\"a\" 1\n\"b\" 2\n", "line 1: directory entries=3, but 2 entries follow"},
		{h + "\"a\" 1\n\"b\" 10\n", `line 3: owner "b" to shard 10: allowed range is [0, 10)`},
		{h + "\"a\" 1\n\"b\" 01\n", `line 3: owner "b": shard "01": want a shard number in decimal`},
		{h + "\"a\" 1\n\"b\" -1\n", `line 3: owner "b": shard "-1"`},
		{h + "\"a\" 1\n\"b\" +1\n", `line 3: owner "b": shard "+1"`},
		{h + "\"a\" 1\n\"b\" 1 \n", `line 3: owner "b": shard "1 "`},
		{h + "\"b\" 1\n\"a\" 1\n", `line 3: key "a" after "b": keys must be in increasing byte order, each once`},
		{h + "\"a\" 1\n\"a\" 2\n", `line 3: key "a" after "a"`},
		{h + "\"a\" 1\nb 2\n", `line 3: "b 2": want a quoted key`},
		{h + "\"a\" 1\n\"b\" 2\n\n", "line 4: blank line at the end"},
		{h + "\"a\" 1\n\"b 2\n", "line 3: \"\\\"b 2\": the key is not a valid Go string literal"},
	} {
		err := e.UnmarshalText([]byte(c.text))
		require.ErrorIsf(t, err, ErrDirectory, "%q", c.text)
		require.ErrorContainsf(t, err, "shard: directory: text "+c.want, "%q", c.text)
		checkEntries(t, e, entries)
	}
}

func FuzzDirectoryUnmarshalText(f *testing.F) {
	f.Add([]byte("directory entries=2\n\"1\" 4\n\"user:42\" 0\n"))
	f.Add([]byte("directory entries=1\n\"\\xff\" 9"))
	f.Add([]byte("directory entries=0\n"))
	f.Add([]byte("directory entries=1\n\"a-b\" 1\n"))
	j, err := NewJump(10)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, text []byte) {
		d := NewDirectory(j, PrefixOwner)
		require.NoError(t, d.Pin("x", 1))
		if err := d.UnmarshalText(text); err != nil {
			require.ErrorIs(t, err, ErrDirectory)
			require.Truef(t, strings.HasPrefix(err.Error(), "shard: directory: text line "), "%v", err)
			got, ok := d.Pinned("x")
			require.True(t, ok && got == 1 && d.Len() == 1, "a failed UnmarshalText changed the entries")
			return
		}
		for owner, shard := range d.Entries() {
			require.True(t, shard >= 0 && shard < 10)
			require.Equal(t, owner, PrefixOwner(owner))
		}
		out, err := d.MarshalText()
		require.NoError(t, err)
		e := NewDirectory(j, PrefixOwner)
		require.NoError(t, e.UnmarshalText(out), "MarshalText output %q does not load", out)
		require.Equal(t, maps.Collect(d.Entries()), maps.Collect(e.Entries()))
		again, err := e.MarshalText()
		require.NoError(t, err)
		require.Equal(t, out, again, "MarshalText is not canonical")
	})
}

func TestDirectoryClone(t *testing.T) {
	j10, err := NewJump(10)
	require.NoError(t, err)
	d := NewDirectory(j10, PrefixOwner)
	require.NoError(t, d.Pin("1", 9))
	require.NoError(t, d.Pin("2", 3))

	j10b, err := NewJump(10)
	require.NoError(t, err)
	c, err := d.Clone(j10b)
	require.NoError(t, err)
	require.NoError(t, c.Pin("3", 0))
	require.True(t, c.Unpin("1"))
	require.Equal(t, map[string]int{"1": 9, "2": 3}, maps.Collect(d.Entries()), "a change of the clone shows in the original")
	require.Equal(t, map[string]int{"2": 3, "3": 0}, maps.Collect(c.Entries()))
	require.Equal(t, d.Locate("2-x"), c.Locate("2-x"))
	require.Equal(t, 3, c.Locate("2-x"))

	j5, err := NewJump(5)
	require.NoError(t, err)
	_, err = d.Clone(j5)
	require.ErrorIs(t, err, ErrShard)
	require.ErrorContains(t, err, `shard: directory: clone to 5 shards: owner "1" is pinned to shard 9`)
	_, err = d.Clone(nil)
	require.ErrorIs(t, err, ErrDirectory)
}

func TestDirectoryZeroValue(t *testing.T) {
	var d Directory
	require.Zero(t, d.Shards())
	require.Zero(t, d.Locate("x"))
	require.Zero(t, d.Len())
	require.False(t, d.Unpin("x"))
	_, ok := d.Pinned("x")
	require.False(t, ok)
	require.Empty(t, maps.Collect(d.Entries()))
	text, err := d.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "directory entries=0\n", string(text))
	require.ErrorIs(t, d.Pin("x", 0), ErrDirectory)
	require.ErrorIs(t, d.Load(rowsOf(nil)), ErrDirectory)
	require.ErrorIs(t, d.UnmarshalText(text), ErrDirectory)
	require.ErrorIs(t, d.Resize(3), ErrShardCount)
	j, err := NewJump(2)
	require.NoError(t, err)
	c, err := d.Clone(j)
	require.NoError(t, err)
	require.NoError(t, c.Pin("x", 1))
	require.Equal(t, 1, c.Locate("x"))
	require.Panics(t, func() { NewDirectory(nil, nil) })
}

// Lookups while another goroutine pins, unpins and reloads: every lookup sees the entry
// before or after a change, and every listing is one whole table, never part of two.
func TestDirectoryConcurrent(t *testing.T) {
	j, err := NewJump(8)
	require.NoError(t, err)
	d := NewDirectory(j, nil)
	owners := randomKeys(26, 200, 8)
	tableA, tableB := map[string]int{}, map[string]int{}
	for i, o := range owners {
		tableA[o] = 1
		if i%2 == 0 {
			tableB[o] = 2 // the other half falls back to jump in table B
		}
	}
	allowed := func(o string) [2]int {
		b, ok := tableB[o]
		if !ok {
			b = j.Locate(o)
		}
		return [2]int{tableA[o], b}
	}
	require.NoError(t, d.Load(maps.All(tableA)))

	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for g := range 3 {
		wg.Go(func() {
			for i := g; !stop.Load(); i++ {
				o := owners[i%len(owners)]
				if want, got := allowed(o), d.Locate(o); got != want[0] && got != want[1] {
					fail(fmt.Errorf("Locate(%q) = %d, want %d or %d", o, got, want[0], want[1]))
					return
				}
				if i%50 == 0 {
					if got := maps.Collect(d.Entries()); !maps.Equal(got, tableA) && !maps.Equal(got, tableB) {
						fail(fmt.Errorf("Entries holds %d entries, neither table A nor B", len(got)))
						return
					}
				}
				runtime.Gosched()
			}
		})
	}
	changes := 200
	if raceEnabled {
		changes = 40
	}
	for i := range changes {
		if i%2 == 0 {
			require.NoError(t, d.Load(maps.All(tableB)))
		} else {
			require.NoError(t, d.Load(maps.All(tableA)))
		}
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}

	// Single pins race with lookups too: each owner is pinned to 3 and unpinned again.
	stop.Store(false)
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			o := owners[i%len(owners)]
			if got := d.Locate(o); got != tableA[o] && got != 3 {
				fail(fmt.Errorf("Locate(%q) = %d during pins, want %d or 3", o, got, tableA[o]))
				return
			}
			runtime.Gosched()
		}
	})
	for _, o := range owners[:changes] {
		require.NoError(t, d.Pin(o, 3))
		require.NoError(t, d.Pin(o, tableA[o]))
	}
	stop.Store(true)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
}

var directorySink int

// BenchmarkDirectory measures lookups through a Directory next to its bare fallback, and
// what a million pinned owners cost: memory per entry (B/entry, the live heap the entries
// add) and the time and garbage of one Pin or Unpin.
//
//	go test -run '^$' -bench Directory -benchmem
func BenchmarkDirectory(b *testing.B) {
	const entries = 1 << 20
	if testing.Short() {
		b.Skip("builds a directory of a million owners")
	}
	j, err := NewJump(1000)
	require.NoError(b, err)
	owners := make([]string, entries)
	for i := range owners {
		owners[i] = "user:" + strconv.Itoa(i)
	}
	unpinned := randomKeys(27, 1<<14, 16)
	pinned := owners[:1<<14]

	empty := NewDirectory(j, nil)
	var full *Directory
	b.Run("op=load/entries=1M", func(b *testing.B) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for b.Loop() {
			full = NewDirectory(j, nil)
			err := full.Load(func(yield func(string, int) bool) {
				for i, o := range owners {
					if !yield(o, i%1000) {
						return
					}
				}
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/entries, "B/entry")
		b.ReportMetric(float64(full.pins.Load().Segments()), "segments")
	})
	locate := func(name string, s Sharder, keys []string) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				directorySink += s.Locate(keys[i&(len(keys)-1)])
			}
		})
	}
	locate("op=locate/sharder=jump", j, unpinned)
	locate("op=locate/sharder=directory/entries=0", empty, unpinned)
	locate("op=locate/sharder=directory/entries=1M/key=unpinned", full, unpinned)
	locate("op=locate/sharder=directory/entries=1M/key=pinned", full, pinned)

	b.Run("op=repin/entries=1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := full.Pin(owners[(i*7919)%entries], i%1000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=pin-new-then-unpin/entries=1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			owner := "new:" + strconv.Itoa(i&1023)
			if err := full.Pin(owner, 1); err != nil {
				b.Fatal(err)
			}
			full.Unpin(owner)
		}
	})
}
