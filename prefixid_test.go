package shard

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// colocated are the strategies the co-location wrappers are tested over. A strategy merged
// later adds one line here.
var colocated = []struct {
	name          string
	newSharder    func(n int) (Sharder, error)
	maxShards     int // 0: none below what memory allows
	resizeIsFresh bool
}{
	{"modulo", func(n int) (Sharder, error) { return NewModulo(n) }, 0, true},
	{"first-byte-sha1", func(n int) (Sharder, error) { return NewFirstByteSHA1(n) }, maxFirstByte, true},
	{"jump", func(n int) (Sharder, error) { return NewJump(n) }, 0, true},
	{"rendezvous", func(n int) (Sharder, error) { return NewRendezvous(n) }, 0, true},
	{"jedis-ring", func(n int) (Sharder, error) { return NewJedisRing(n) }, 0, true},
	{"murmur-ring", func(n int) (Sharder, error) { return NewMurmurRing(n, 64) }, 0, true},
	{"trie", func(n int) (Sharder, error) { return NewTrie(n) }, 0, true},
	{"partitions", func(n int) (Sharder, error) { return NewPartitions(n, 1024) }, 0, false},
	{"redis-cluster", func(n int) (Sharder, error) { return NewRedisCluster(n) }, 0, false},
}

// wrappers are the ways a key can name the record it belongs to.
var wrappers = []struct {
	name string
	wrap func(Sharder) Sharder
}{
	{"prefix", func(s Sharder) Sharder { return ByPrefix(s) }},
	{"hashtag", func(s Sharder) Sharder { return ByHashTag(s) }},
}

// resizes are the shard counts the co-location tests walk through, in this order.
var resizes = []int{4, 5, 8, 1, 2, 3, 7, 10, 16, 6, 4}

// TestIDAllocatorGolden compares the allocator with PostgreSQL identity columns set up as the
// ID-features article [001] sets up SQL Server's IDENTITY(k, n): see
// testdata/prefixid/identity.sh.
func TestIDAllocatorGolden(t *testing.T) {
	rows := readVectors(t, "testdata/prefixid/identity.txt")
	for _, f := range rows {
		// "k n last: id id ...": the IDs that follow last in partition k of n.
		line := strings.Join(f, " ")
		require.Truef(t, len(f) >= 4 && strings.HasSuffix(f[2], ":"), "line %q", line)
		k64, err := strconv.ParseInt(f[0], 10, 64)
		require.NoError(t, err, line)
		n64, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err, line)
		if n64 > math.MaxInt { // partitions of 2^63-1: not an int on 32-bit platforms
			continue
		}
		k, n := int(k64), int(n64)
		last, err := strconv.ParseUint(strings.TrimSuffix(f[2], ":"), 10, 64)
		require.NoError(t, err, line)
		a, err := ResumeIDAllocator(k, n, last)
		require.NoError(t, err, line)
		for _, want := range f[3:] {
			got, err := a.Next()
			if want == "END" {
				require.ErrorIsf(t, err, ErrIDSpace, "%s: Next after %d", line, a.Last())
				continue
			}
			require.NoErrorf(t, err, "%s: Next after %d", line, a.Last())
			require.Equalf(t, want, strconv.FormatUint(got, 10), "%s: Next after %d", line, last)
			require.Equal(t, got, a.Last())
			last = got
		}
	}
	require.Greater(t, len(rows), 10)
}

func TestIDAllocatorPartition(t *testing.T) {
	for _, n := range []int{1, 2, 4, 5, 7, 1000} {
		m, err := NewModulo(n)
		require.NoError(t, err)
		for k := range min(n, 10) {
			a, err := NewIDAllocator(k, n)
			require.NoError(t, err)
			require.Zero(t, a.Last())
			prev := uint64(0)
			for range 50 {
				id, err := a.Next()
				require.NoError(t, err)
				require.Equalf(t, k, m.LocateID(id), "partition %d of %d issued %d", k, n, id)
				want := prev + uint64(n) // IDENTITY(k, n): step n, from k, or from n for k == 0
				if prev == 0 && k > 0 {
					want = uint64(k)
				}
				require.Equalf(t, want, id, "partition %d of %d after %d", k, n, prev)
				require.Equal(t, id, a.Last())
				prev = id
			}
		}
	}
}

func TestIDAllocatorErrors(t *testing.T) {
	for _, c := range []struct {
		k, n int
		last uint64
		want error
	}{
		{0, 0, 0, ErrShardCount},
		{0, -1, 0, ErrShardCount},
		{0, math.MinInt, 0, ErrShardCount},
		{-1, 4, 0, ErrIDPartition},
		{4, 4, 0, ErrIDPartition},
		{math.MaxInt, 4, 0, ErrIDPartition},
		{1, 4, 4, ErrIDPartition},       // 4 belongs to partition 0
		{0, 4, 6, ErrIDPartition},       // 6 to partition 2
		{1, 1, 0, ErrIDPartition},       // one partition: only k == 0
		{0, 4, 1 << 63, ErrIDPartition}, // above MaxID, though 2^63 % 4 == 0
		{0, 1, math.MaxUint64, ErrIDPartition},
	} {
		a, err := ResumeIDAllocator(c.k, c.n, c.last)
		require.ErrorIsf(t, err, c.want, "ResumeIDAllocator(%d, %d, %d)", c.k, c.n, c.last)
		require.Nil(t, a)
		assert.True(t, strings.HasPrefix(err.Error(), "shard: id allocator: "), err.Error())
		named := []int{c.k, c.n}
		if c.want == ErrShardCount {
			named = named[1:] // the count alone is wrong: the error names it
		}
		for _, v := range named {
			assert.Containsf(t, err.Error(), fmt.Sprint(v), "error %q does not name %d", err, v)
		}
		if c.last == 0 {
			_, err := NewIDAllocator(c.k, c.n)
			require.ErrorIsf(t, err, c.want, "NewIDAllocator(%d, %d)", c.k, c.n)
		}
	}
}

// At the top of the ID space Next fails, every time, and leaves the allocator as it was.
func TestIDAllocatorExhausted(t *testing.T) {
	for _, c := range []struct{ k, n int }{{0, 1}, {0, 4}, {3, 4}, {7, 10}, {1, math.MaxInt}, {0, math.MaxInt}} {
		// The top ID of partition k: the largest ID <= MaxID that is k mod n.
		top := uint64(MaxID) - (uint64(MaxID)-uint64(c.k))%uint64(c.n)
		last := uint64(0) // when top is the partition's first ID
		if top > uint64(c.n) {
			last = top - uint64(c.n)
		}
		a, err := ResumeIDAllocator(c.k, c.n, last)
		require.NoError(t, err)
		id, err := a.Next()
		require.NoError(t, err)
		require.Equalf(t, top, id, "partition %d of %d after %d", c.k, c.n, last)
		for range 3 {
			_, err := a.Next()
			require.ErrorIsf(t, err, ErrIDSpace, "partition %d of %d after %d", c.k, c.n, top)
			require.Contains(t, err.Error(), "shard: id allocator: ")
			require.Equal(t, top, a.Last())
		}
	}
}

func TestIDAllocatorZero(t *testing.T) {
	var a IDAllocator
	_, err := a.Next()
	require.ErrorIs(t, err, ErrIDPartition)
	require.Zero(t, a.Last())
}

// Many goroutines share one allocator: the IDs they get are unique, all of partition k, and
// exactly the first ones of its sequence (none skipped), also when the partition runs out.
func TestIDAllocatorConcurrent(t *testing.T) {
	const goroutines, each = 8, 2000
	for _, c := range []struct {
		k, n int
		last uint64
	}{
		{3, 4, 0},
		{0, 4, 0},
		{0, 1, 0},
		{5, 16, uint64(MaxID) - 10000*16 - 10}, // 10,000 IDs left: they run out mid-test
	} {
		a, err := ResumeIDAllocator(c.k, c.n, c.last)
		require.NoError(t, err)
		got := make([][]uint64, goroutines)
		start := make(chan struct{}) // start together, to make them contend
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				<-start
				for range each {
					id, err := a.Next()
					if err != nil {
						if !errors.Is(err, ErrIDSpace) {
							t.Error(err)
						}
						return
					}
					got[g] = append(got[g], id)
				}
			})
		}
		close(start)
		wg.Wait()
		var all []uint64
		for _, ids := range got {
			require.Truef(t, slices.IsSorted(ids), "one goroutine saw IDs out of order")
			all = append(all, ids...)
		}
		slices.Sort(all)
		want, err := ResumeIDAllocator(c.k, c.n, c.last)
		require.NoError(t, err)
		for i, id := range all {
			w, err := want.Next()
			require.NoError(t, err)
			require.Equalf(t, w, id, "partition %d of %d: ID #%d", c.k, c.n, i)
			require.Equal(t, uint64(c.k), id%uint64(c.n))
		}
		require.Equal(t, all[len(all)-1], a.Last())
		if c.last == 0 {
			require.Len(t, all, goroutines*each)
		} else {
			require.Len(t, all, 10000)
			_, err := want.Next()
			require.ErrorIs(t, err, ErrIDSpace, "the test hands out every ID left")
		}
	}
}

func TestParsePrefixID(t *testing.T) {
	for id, want := range map[string][2]string{
		"1-A1":      {"1", "A1"},
		"3-C1":      {"3", "C1"},
		"1-A1-C1":   {"1", "A1-C1"},
		"user-x":    {"user", "x"},
		"\xff-\x00": {"\xff", "\x00"},
		"{a}-b":     {"{a}", "b"},
	} {
		owner, local, err := ParsePrefixID(id)
		require.NoErrorf(t, err, "ParsePrefixID(%q)", id)
		assert.Equalf(t, want, [2]string{owner, local}, "ParsePrefixID(%q)", id)
		back, err := PrefixID(owner, local)
		require.NoError(t, err)
		assert.Equal(t, id, back)
	}
	for id, why := range map[string]string{
		"":        "no '-'",
		"1":       "no '-'",
		"A1":      "no '-'",
		"-":       "empty owner",
		"-A1":     "empty owner",
		"1-":      "empty local part",
		"1--A1":   "empty segment",
		"1-A1-":   "empty segment",
		"1-A1--C": "empty segment",
		"1-A1---": "empty segment",
	} {
		owner, local, err := ParsePrefixID(id)
		require.ErrorIsf(t, err, ErrPrefixID, "ParsePrefixID(%q)", id)
		assert.Containsf(t, err.Error(), why, "ParsePrefixID(%q)", id)
		assert.Containsf(t, err.Error(), strconv.Quote(id), "error does not name the ID")
		assert.True(t, strings.HasPrefix(err.Error(), "shard: "), err.Error())
		assert.Empty(t, owner+local)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _, _ = ParsePrefixID("1-A1-C1") }))
}

func TestPrefixID(t *testing.T) {
	for _, c := range [][3]string{
		{"1", "A1", "1-A1"},
		{"1-A1", "C1", "1-A1-C1"},
		{"1", "A1-C1", "1-A1-C1"},
		{"1-A1-C1", "R2", "1-A1-C1-R2"},
	} {
		id, err := PrefixID(c[0], c[1])
		require.NoError(t, err)
		assert.Equalf(t, c[2], id, "PrefixID(%q, %q)", c[0], c[1])
		owner, _, err := ParsePrefixID(id)
		require.NoError(t, err)
		assert.Equal(t, PrefixOwner(c[0]), owner, "the owner's root stays the owner")
	}
	for _, c := range [][2]string{{"", "A1"}, {"1", ""}, {"-1", "A1"}, {"1-", "A1"}, {"1", "-A1"}, {"1", "A1-"}, {"1--2", "A"}, {"1", "A--1"}} {
		id, err := PrefixID(c[0], c[1])
		require.ErrorIsf(t, err, ErrPrefixID, "PrefixID(%q, %q)", c[0], c[1])
		assert.Contains(t, err.Error(), "shard: PrefixID(")
		assert.Empty(t, id)
	}
	// The message stays short however long the input.
	_, err := PrefixID(strings.Repeat("x", 1<<16), "")
	require.Less(t, len(err.Error()), 400)
}

// Keys without an owner route whole, as Redis routes keys without a hash tag.
func TestPrefixOwner(t *testing.T) {
	for key, want := range map[string]string{
		"1":         "1",
		"1-A1":      "1",
		"1-A1-C1":   "1",
		"1-":        "1",
		"1--":       "1",
		"plain":     "plain",
		"":          "",
		"-":         "-",
		"-1":        "-1",
		"--1":       "--1",
		"{u}-x":     "{u}",
		"\xff-\x00": "\xff",
	} {
		assert.Equalf(t, want, PrefixOwner(key), "PrefixOwner(%q)", key)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = PrefixOwner("1-A1-C1") }))
}

func TestWrappersContract(t *testing.T) {
	for _, s := range colocated {
		for _, w := range wrappers {
			t.Run(s.name+"/"+w.name, func(t *testing.T) {
				sizes := []int{1, 2, 7, 10, 64}
				tooMany := 0
				if s.maxShards > 0 {
					sizes = slices.DeleteFunc(sizes, func(n int) bool { return n > s.maxShards })
					tooMany = s.maxShards + 1
				}
				// The movement guarantees are the wrapped strategy's, tested with it: with
				// many keys sharing an owner, moves are not independent draws.
				checkContract(t, contract{
					name: w.name + "(" + s.name + ")",
					newSharder: func(n int) (Sharder, error) {
						inner, err := s.newSharder(n)
						if err != nil {
							return nil, err
						}
						return w.wrap(inner), nil
					},
					sizes:         sizes,
					tooMany:       tooMany,
					resizeIsFresh: s.resizeIsFresh,
				})
			})
		}
	}
}

// A user's row, articles and comments share a shard under every strategy, through every
// resize, and the wrappers place them where the strategy places the owner.
func TestByPrefixColocation(t *testing.T) {
	type user struct {
		id   string
		keys []string
	}
	var users []user
	for u := 1; u <= 300; u++ {
		uid := strconv.Itoa(u)
		keys := []string{uid}
		for a := range 3 {
			article, err := PrefixID(uid, "A"+strconv.Itoa(u*10+a))
			require.NoError(t, err)
			keys = append(keys, article)
			for c := range 2 {
				comment, err := PrefixID(article, "C"+strconv.Itoa(c))
				require.NoError(t, err)
				keys = append(keys, comment)
			}
		}
		users = append(users, user{uid, keys})
	}
	walkResizes(t, func(s Sharder) Sharder { return ByPrefix(s) }, func(t *testing.T, name string, inner, p Sharder, n int) {
		used := map[int]bool{}
		for _, u := range users {
			home := inner.Locate(u.id)
			used[home] = true
			for _, k := range u.keys {
				require.Equalf(t, home, p.Locate(k), "%s(%d): %q is not with its user %q", name, n, k, u.id)
			}
		}
		// Co-location must not come from putting everyone on one shard.
		require.Lenf(t, used, n, "%s(%d): 300 users on %d shards", name, n, len(used))
	})
}

// walkResizes wraps every colocated strategy with wrap, resizes the wrapper through resizes
// (skipping counts the strategy cannot take), and calls check after each resize with the
// strategy, the wrapper and the new count.
func walkResizes(t *testing.T, wrap func(Sharder) Sharder, check func(t *testing.T, name string, inner, outer Sharder, n int)) {
	for _, s := range colocated {
		t.Run(s.name, func(t *testing.T) {
			inner, err := s.newSharder(resizes[0])
			require.NoError(t, err)
			outer := wrap(inner)
			for _, n := range resizes {
				if s.maxShards > 0 && n > s.maxShards {
					continue
				}
				require.NoError(t, outer.Resize(n))
				require.Equal(t, n, inner.Shards())
				require.Equal(t, n, outer.Shards())
				check(t, s.name, inner, outer, n)
			}
		})
	}
}

// Keys that share a hash tag share a shard; keys without a tag route whole.
func TestByHashTagColocation(t *testing.T) {
	walkResizes(t, func(s Sharder) Sharder { return ByHashTag(s) }, func(t *testing.T, name string, inner, h Sharder, n int) {
		for u := range 200 {
			tag := "user" + strconv.Itoa(u)
			home := inner.Locate(tag)
			for _, k := range []string{"{" + tag + "}", "{" + tag + "}.following", "{" + tag + "}.followers", "x{" + tag + "}y{z}"} {
				require.Equalf(t, home, h.Locate(k), "%s(%d): %q", name, n, k)
			}
		}
		for _, k := range []string{"plain", "", "foo{}{bar}", "{", "}{", "user1000.following"} {
			require.Equalf(t, inner.Locate(k), h.Locate(k), "%s(%d): %q has no tag", name, n, k)
		}
	})
}

// Keys without an owner go where the wrapped strategy puts the whole key.
func TestByPrefixUnprefixed(t *testing.T) {
	m, err := NewModulo(7)
	require.NoError(t, err)
	p := ByPrefix(m)
	for _, k := range append([]string{"plain", "-x", "--", "{user1000}.following"}, adversarialKeys()...) {
		if i := strings.IndexByte(k, '-'); i > 0 {
			continue
		}
		require.Equalf(t, m.Locate(k), p.Locate(k), "%.20q", k)
	}
	require.Equal(t, m.Locate("1"), p.Locate("1-"))
}

func TestWrappersNil(t *testing.T) {
	assert.PanicsWithValue(t, "shard: ByPrefix: nil Sharder", func() { ByPrefix(nil) })
	assert.PanicsWithValue(t, "shard: ByHashTag: nil Sharder", func() { ByHashTag(nil) })
}

func TestWrappersAllocs(t *testing.T) {
	m, err := NewModulo(10)
	require.NoError(t, err)
	p, h := ByPrefix(m), ByHashTag(m)
	for _, k := range []string{"1", "1-A1-C1", "{user1000}.following", "plain", strings.Repeat("7-", 2000)} {
		assert.Zerof(t, testing.AllocsPerRun(100, func() { _ = p.Locate(k) }), "ByPrefix.Locate(%.20q)", k)
		assert.Zerof(t, testing.AllocsPerRun(100, func() { _ = h.Locate(k) }), "ByHashTag.Locate(%.20q)", k)
	}
}

// TestPrefixIDRegress pins allocator sequences and where the wrappers put a few keys.
func TestPrefixIDRegress(t *testing.T) {
	var b strings.Builder
	for _, c := range [][2]int{{0, 4}, {1, 4}, {3, 4}, {0, 5}, {2, 5}, {0, 1}, {9, 10}} {
		a, err := NewIDAllocator(c[0], c[1])
		require.NoError(t, err)
		fmt.Fprintf(&b, "alloc %d of %d:", c[0], c[1])
		for range 6 {
			id, err := a.Next()
			require.NoError(t, err)
			fmt.Fprintf(&b, " %d", id)
		}
		b.WriteString("\n")
	}
	keys := []string{"1", "1-A1", "1-A1-C1", "3-C1", "1000-A9", "plain", "-x", "",
		"{user1000}.following", "{user1000}.followers", "user1000", "foo{}{bar}"}
	for _, n := range []int{4, 5, 8} {
		m, err := NewModulo(n)
		require.NoError(t, err)
		p, h := ByPrefix(m), ByHashTag(m)
		for _, k := range keys {
			fmt.Fprintf(&b, "modulo %d %q prefix %d hashtag %d\n", n, k, p.Locate(k), h.Locate(k))
		}
	}
	checkRegress(t, "regress/prefixid.txt", b.String())
}

// wellFormed is the obvious slow definition of a prefix ID: two or more segments, none empty.
func wellFormed(id string) bool {
	parts := strings.Split(id, "-")
	return len(parts) >= 2 && !slices.Contains(parts, "")
}

func FuzzParsePrefixID(f *testing.F) {
	for _, s := range []string{"1-A1", "1-A1-C1", "-", "1-", "-1", "1--2", "", "x", "\xff-\x00"} {
		f.Add(s, "C1")
	}
	f.Fuzz(func(t *testing.T, id, local string) {
		owner, rest, err := ParsePrefixID(id)
		if wellFormed(id) != (err == nil) {
			t.Fatalf("ParsePrefixID(%q) error %v, want well-formed %v", id, err, wellFormed(id))
		}
		if err != nil {
			if !errors.Is(err, ErrPrefixID) {
				t.Fatalf("ParsePrefixID(%q) = %v, not ErrPrefixID", id, err)
			}
			return
		}
		if strings.Contains(owner, "-") || owner != PrefixOwner(id) {
			t.Fatalf("ParsePrefixID(%q) owner %q", id, owner)
		}
		if back, err := PrefixID(owner, rest); err != nil || back != id {
			t.Fatalf("PrefixID(ParsePrefixID(%q)) = %q, %v", id, back, err)
		}
		child, err := PrefixID(id, local)
		if (err == nil) != (local != "" && wellFormed(id+"-"+local)) {
			t.Fatalf("PrefixID(%q, %q) error %v", id, local, err)
		}
		if err == nil {
			if o, l, err := ParsePrefixID(child); err != nil || o != owner || l != rest+"-"+local {
				t.Fatalf("ParsePrefixID(%q) = %q, %q, %v", child, o, l, err)
			}
		}
	})
}

func FuzzByPrefix(f *testing.F) {
	for _, s := range []string{"1", "1-A1", "-x", "", "1-", "\xff-\x00-"} {
		f.Add(s, "A1", 5)
	}
	f.Fuzz(func(t *testing.T, key, local string, n int) {
		m, err := NewModulo(1 + int(uint(n)%1000))
		if err != nil {
			t.Fatal(err)
		}
		p := ByPrefix(m)
		got := p.Locate(key)
		if got < 0 || got >= m.Shards() || got != m.Locate(PrefixOwner(key)) {
			t.Fatalf("ByPrefix(modulo %d).Locate(%q) = %d", m.Shards(), key, got)
		}
		if id, err := PrefixID(key, local); err == nil && p.Locate(id) != got {
			t.Fatalf("%q is not with its owner %q", id, key)
		}
	})
}

func FuzzByHashTag(f *testing.F) {
	for _, s := range []string{"user1000", "{", "}", "", "a{b}c"} {
		f.Add("x", s, ".following", 5)
	}
	f.Fuzz(func(t *testing.T, before, tag, after string, n int) {
		m, err := NewModulo(1 + int(uint(n)%1000))
		if err != nil {
			t.Fatal(err)
		}
		h := ByHashTag(m)
		key := before + "{" + tag + "}" + after
		got := h.Locate(key)
		if got < 0 || got >= m.Shards() || got != m.Locate(HashTag(key)) {
			t.Fatalf("ByHashTag(modulo %d).Locate(%q) = %d", m.Shards(), key, got)
		}
		// With no brace before it and none inside it, a non-empty tag decides the shard.
		if tag != "" && !strings.ContainsAny(before, "{") && !strings.ContainsAny(tag, "}") && got != m.Locate(tag) {
			t.Fatalf("%q is not with its tag %q", key, tag)
		}
	})
}

var sinkInt int

func BenchmarkIDAllocatorNext(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		a, err := NewIDAllocator(3, 4)
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = a.Next()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		a, err := NewIDAllocator(3, 4)
		require.NoError(b, err)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = a.Next()
			}
		})
	})
}

// The wrappers' cost over the strategy they wrap: finding the owner or tag, and one call.
func BenchmarkWrappersLocate(b *testing.B) {
	m, err := NewModulo(10)
	require.NoError(b, err)
	for _, c := range []struct {
		name string
		s    Sharder
		key  string
	}{
		{"strategy=modulo", m, "1-A1-C1"},
		{"strategy=prefix(modulo)", ByPrefix(m), "1-A1-C1"},
		{"strategy=hashtag(modulo)", ByHashTag(m), "{user1000}.following"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkInt = c.s.Locate(c.key)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				s := 0
				for pb.Next() {
					s += c.s.Locate(c.key)
				}
				sinkInt = s
			})
		})
	}
}
