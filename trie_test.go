package shard

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No reference implementation of this exact scheme (xxhash64 top bits, shallowest-leftmost
// splitting, new shard on the 1 half) exists to take golden vectors from: the tests below
// check it against a slow leaf scan and its movement rules, and the regress files pin it.

// The trie grows and shrinks minimally, but a growth step takes about half of ONE leaf (a
// share of 2^-floor(log2 n) of all keys, up to 1/(n+1)*2), not 1/(n+1) from every shard, so
// minimalGrow does not hold; TestTrieGrowMovement checks the trie's own rule instead.
func TestTrieContract(t *testing.T) {
	checkContract(t, contract{
		name:          "trie",
		newSharder:    func(n int) (Sharder, error) { return NewTrie(n) },
		sizes:         []int{1, 2, 3, 7, 10, 64, 1000},
		tooMany:       maxTrie + 1,
		resizeIsFresh: true,
		growOnlyToNew: true,
		minimalShrink: true,
		batch:         true,
	})
}

// refLocate is the obvious lookup: scan the leaves for the one whose path prefixes h.
func refLocate(leaves []Leaf, h uint64) int {
	for _, l := range leaves {
		if l.Depth == 0 || h>>(64-l.Depth) == l.Path {
			return l.Shard
		}
	}
	return -1
}

// checkTrie cross-checks the directory against refLocate and the shape's invariants.
func checkTrie(t *testing.T, tr *Trie, keys []string) {
	t.Helper()
	leaves := tr.Leaves()
	require.Len(t, leaves, tr.Shards())
	text, err := tr.MarshalText()
	require.NoError(t, err)
	_, err = parseTrie(string(text)) // tiles the hash space, shards 0..n-1
	require.NoErrorf(t, err, "invalid shape:\n%s", text)
	for _, k := range keys {
		h := keyhash.XXH64(k)
		require.Equalf(t, refLocate(leaves, h), tr.Locate(k), "Locate(%q) with shape\n%s", k, text)
	}
	// The first and last hash of every leaf.
	for _, l := range leaves {
		lo := l.start()
		hi := lo | (math.MaxUint64 >> l.Depth)
		if l.Depth == 0 {
			hi = math.MaxUint64
		}
		for _, h := range []uint64{lo, hi} {
			if got := tr.LocateHash(h); got != l.Shard { // not require: this runs 2^21 times in TestTrieMax
				t.Fatalf("LocateHash(%#x) = %d, want %d of leaf %s", h, got, l.Shard, l.bits())
			}
		}
	}
}

func TestTrieZeroValue(t *testing.T) {
	var tr Trie
	require.Equal(t, 1, tr.Shards())
	require.Equal(t, 0, tr.Locate("x"))
	require.Equal(t, []Leaf{{}}, tr.Leaves())
	text, err := tr.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "- 0\n", string(text))
	require.NoError(t, tr.Resize(3))
	fresh, err := NewTrie(3)
	require.NoError(t, err)
	require.Equal(t, fresh.Leaves(), tr.Leaves())
}

// NewTrie(n) is NewTrie(1) grown one shard at a time; its leaves differ in depth by at most
// one; and shrinking by Resize retraces the same shapes backwards.
func TestTrieGrowthHistory(t *testing.T) {
	const top = 300
	tr, err := NewTrie(1)
	require.NoError(t, err)
	shapes := [][]Leaf{nil, tr.Leaves()}
	for n := 2; n <= top; n++ {
		require.NoError(t, tr.Resize(n))
		fresh, err := NewTrie(n)
		require.NoError(t, err)
		require.Equalf(t, fresh.Leaves(), tr.Leaves(), "NewTrie(%d) differs from growing one by one", n)
		depths := map[int]bool{}
		for _, l := range tr.Leaves() {
			depths[l.Depth] = true
		}
		k := 0
		for 1<<(k+1) <= n {
			k++
		}
		for d := range depths {
			require.Truef(t, d == k || d == k+1, "NewTrie(%d) has a leaf at depth %d, want %d or %d", n, d, k, k+1)
		}
		shapes = append(shapes, tr.Leaves())
	}
	// Shrinking undoes the last split each time (see Resize), so it never fails here.
	for n := top - 1; n >= 1; n-- {
		require.NoError(t, tr.Resize(n))
		require.Equalf(t, shapes[n], tr.Leaves(), "Resize(%d) from above differs from growing", n)
	}
	// Big jumps agree with single steps.
	require.NoError(t, tr.Resize(top))
	require.Equal(t, shapes[top], tr.Leaves())
	require.NoError(t, tr.Resize(5))
	require.Equal(t, shapes[5], tr.Leaves())
}

// The first growth steps, spelled out: the shallowest leftmost leaf splits and the new shard
// takes its 1 half.
func TestTrieGrowthShape(t *testing.T) {
	want := map[int]string{
		1: "- 0\n",
		2: "0 0\n1 1\n",
		3: "00 0\n01 2\n1 1\n",
		4: "00 0\n01 2\n10 1\n11 3\n",
		5: "000 0\n001 4\n01 2\n10 1\n11 3\n",
		6: "000 0\n001 4\n010 2\n011 5\n10 1\n11 3\n",
	}
	for n, w := range want {
		tr, err := NewTrie(n)
		require.NoError(t, err)
		text, err := tr.MarshalText()
		require.NoError(t, err)
		require.Equalf(t, w, string(text), "NewTrie(%d)", n)
	}
}

// Growing n -> n+1 moves keys only from the split leaf, all to shard n, about half of them;
// shrinking back moves only shard n's keys, all to the shard they came from.
func TestTrieGrowMovement(t *testing.T) {
	keys := randomKeys(11, 20000, 16)
	top := 33
	if quick() {
		top = 20
	}
	for n := 1; n < top; n++ {
		tr, err := NewTrie(n)
		require.NoError(t, err)
		leaves := tr.Leaves()
		// The leaf that splits: the shallowest, then the lowest path.
		victim := slices.MinFunc(leaves, func(a, b Leaf) int {
			if a.Depth != b.Depth {
				return a.Depth - b.Depth
			}
			return compareU64(a.Path, b.Path)
		})
		before := placement(tr, keys)
		require.NoError(t, tr.Resize(n+1))
		grown := placement(tr, keys)
		inLeaf, moved := 0, 0
		for i := range keys {
			if before[i] == victim.Shard {
				inLeaf++
			}
			if before[i] != grown[i] {
				moved++
				// Plain ifs, not require: this runs for every moved key.
				if before[i] != victim.Shard || grown[i] != n {
					t.Fatalf("%d -> %d moved %q from shard %d to %d, want from the split shard %d to the new shard", n, n+1, keys[i], before[i], grown[i], victim.Shard)
				}
			}
		}
		// The leaf holds Binomial(K, 2^-d) keys, and each of them moves when its next hash
		// bit is 1: Binomial(inLeaf, 1/2). Allow six standard deviations for both.
		p := math.Ldexp(1, -victim.Depth)
		mean := p * float64(len(keys))
		require.InDeltaf(t, mean, float64(inLeaf), 6*math.Sqrt(mean*(1-p))+1, "%d shards: split leaf %s holds %d of %d keys", n, victim.bits(), inLeaf, len(keys))
		half := float64(inLeaf) / 2
		require.InDeltaf(t, half, float64(moved), 6*math.Sqrt(half/2)+1, "%d -> %d moved %d of the split leaf's %d keys", n, n+1, moved, inLeaf)

		require.NoError(t, tr.Resize(n))
		for i, s := range placement(tr, keys) {
			if s != grown[i] && (grown[i] != n || s != victim.Shard) {
				t.Fatalf("%d -> %d moved %q from shard %d to %d, want only from the removed shard to its sibling %d", n+1, n, keys[i], grown[i], s, victim.Shard)
			}
		}
		require.Equal(t, before, placement(tr, keys))
	}
}

func TestTrieSplit(t *testing.T) {
	keys := randomKeys(12, 4000, 12)
	tr, err := NewTrie(3) // 00:0 01:2 1:1
	require.NoError(t, err)
	before := placement(tr, keys)
	got, err := tr.Split(1) // 1 -> 10:1 11:3
	require.NoError(t, err)
	require.Equal(t, 3, got)
	require.Equal(t, []Leaf{{0, 2, 0}, {1, 2, 2}, {2, 2, 1}, {3, 2, 3}}, tr.Leaves())
	for i, s := range placement(tr, keys) {
		if s != before[i] {
			require.Equalf(t, 1, before[i], "Split(1) moved %q off shard %d", keys[i], before[i])
			require.Equal(t, 3, s)
		}
	}
	checkTrie(t, tr, keys)

	// Errors leave the trie as it was.
	same := func() { t.Helper(); require.Equal(t, []Leaf{{0, 2, 0}, {1, 2, 2}, {2, 2, 1}, {3, 2, 3}}, tr.Leaves()) }
	for _, s := range []int{-1, 4, math.MaxInt, math.MinInt} {
		_, err := tr.Split(s)
		require.ErrorIs(t, err, ErrShard)
		assert.Contains(t, err.Error(), fmt.Sprintf("shard: trie: split shard %d: allowed range is [0, 4)", s))
		same()
	}

	// A chain of splits stops at the depth cap.
	deep, err := NewTrie(1)
	require.NoError(t, err)
	for d := 1; d <= MaxTrieDepth; d++ {
		_, err := deep.Split(0)
		require.NoError(t, err)
	}
	require.Equal(t, MaxTrieDepth+1, deep.Shards())
	_, err = deep.Split(0)
	require.ErrorIs(t, err, ErrTrieDepth)
	require.EqualError(t, err, "shard: trie: cannot split shard 0: its leaf 00000000000000000000 is at the depth cap of 20 bits: trie depth cap reached")
	require.Equal(t, MaxTrieDepth+1, deep.Shards())
	checkTrie(t, deep, keys)
	// The shallow shards can still split.
	_, err = deep.Split(1)
	require.NoError(t, err)
	checkTrie(t, deep, keys)
}

func TestTrieMerge(t *testing.T) {
	keys := randomKeys(13, 4000, 12)
	tr, err := NewTrie(4) // 00:0 01:2 10:1 11:3
	require.NoError(t, err)
	before := placement(tr, keys)

	// Merging the highest shard is Resize down.
	require.NoError(t, tr.Merge(3))
	require.Equal(t, []Leaf{{0, 2, 0}, {1, 2, 2}, {1, 1, 1}}, tr.Leaves())
	for i, s := range placement(tr, keys) {
		if before[i] == 3 {
			require.Equal(t, 1, s)
		} else {
			require.Equal(t, before[i], s)
		}
	}

	// Merging another shard: its keys go to the sibling, and the highest shard takes its
	// number.
	require.NoError(t, tr.Resize(4))
	require.NoError(t, tr.Merge(0)) // 00:0 merges into 01:2; shard 3 (11) becomes 0
	require.Equal(t, []Leaf{{0, 1, 2}, {2, 2, 1}, {3, 2, 0}}, tr.Leaves())
	for i, s := range placement(tr, keys) {
		switch before[i] {
		case 0:
			require.Equal(t, 2, s, "merged shard's keys go to the sibling")
		case 3:
			require.Equal(t, 0, s, "the highest shard is renumbered")
		default:
			require.Equal(t, before[i], s)
		}
	}
	checkTrie(t, tr, keys)

	// The sibling is the highest shard: the merged leaf takes the freed number.
	tr, err = NewTrie(4)
	require.NoError(t, err)
	require.NoError(t, tr.Merge(1)) // 10:1 merges into 11:3, which becomes 1
	require.Equal(t, []Leaf{{0, 2, 0}, {1, 2, 2}, {1, 1, 1}}, tr.Leaves())

	// Errors.
	require.ErrorIs(t, tr.Merge(3), ErrShard)
	require.ErrorIs(t, tr.Merge(-1), ErrShard)
	one, err := NewTrie(1)
	require.NoError(t, err)
	err = one.Merge(0)
	require.ErrorIs(t, err, ErrShardCount)
	require.Contains(t, err.Error(), "shard: trie: cannot merge shard 0, the only one")
	require.Equal(t, 1, one.Shards())
}

// subtreeTrie returns a trie whose highest shard's sibling is a subtree:
// 00:0 010:2 011:1 1:3.
func subtreeTrie(t *testing.T) *Trie {
	tr, err := NewTrie(2) // 0:0 1:1
	require.NoError(t, err)
	for _, s := range []int{0, 1, 2} { // 00:0 01:2 10:1 11:3, then 010:2 011:4
		_, err := tr.Split(s)
		require.NoError(t, err)
	}
	require.NoError(t, tr.Merge(1)) // 10:1 into 11:3; shard 4 (011) becomes 1
	require.Equal(t, []Leaf{{0, 2, 0}, {2, 3, 2}, {3, 3, 1}, {1, 1, 3}}, tr.Leaves())
	return tr
}

func TestTrieSubtree(t *testing.T) {
	tr := subtreeTrie(t)
	shape, err := tr.MarshalText()
	require.NoError(t, err)
	unchanged := func() {
		t.Helper()
		got, err := tr.MarshalText()
		require.NoError(t, err)
		require.Equal(t, string(shape), string(got))
	}

	err = tr.Resize(3)
	require.ErrorIs(t, err, ErrSubtree)
	require.EqualError(t, err, "shard: trie: cannot shrink to 3 shards: shard 3 (leaf 1) has as sibling the subtree 0 of shards [0 1 2], "+
		"not a leaf; merging would collapse the root with its 4 leaves into one leaf, removing 3 shards: sibling is a subtree")
	unchanged()
	require.ErrorIs(t, tr.Resize(1), ErrSubtree)
	unchanged()

	err = tr.Merge(0) // 00's sibling 01 is a subtree
	require.ErrorIs(t, err, ErrSubtree)
	require.EqualError(t, err, "shard: trie: cannot merge: shard 0 (leaf 00) has as sibling the subtree 01 of shards [1 2], "+
		"not a leaf; merging would collapse prefix 0 with its 3 leaves into one leaf, removing 2 shards: sibling is a subtree")
	unchanged()

	// Merging inside the subtree first makes the rest possible.
	require.NoError(t, tr.Merge(1)) // 011:1 into 010:2; shard 3 becomes 1
	require.Equal(t, []Leaf{{0, 2, 0}, {1, 2, 2}, {1, 1, 1}}, tr.Leaves())
	require.NoError(t, tr.Resize(1))
	checkTrie(t, tr, randomKeys(14, 500, 8))
}

// Any history of splits alone (Resize up and Split in any order) shrinks back by Resize
// through the same shapes in reverse, as the Resize doc argues.
func TestTrieSplitHistoryShrinks(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for range 50 {
		tr, err := NewTrie(1 + r.IntN(4))
		require.NoError(t, err)
		shapes := map[int][]Leaf{tr.Shards(): tr.Leaves()}
		for range 40 {
			if r.IntN(3) == 0 {
				require.NoError(t, tr.Resize(tr.Shards()+1+r.IntN(3)))
			} else if _, err := tr.Split(r.IntN(tr.Shards())); err != nil {
				require.ErrorIs(t, err, ErrTrieDepth)
			}
			shapes[tr.Shards()] = tr.Leaves()
		}
		for n := tr.Shards() - 1; n >= 1; n-- {
			require.NoError(t, tr.Resize(n))
			if want, ok := shapes[n]; ok {
				require.Equalf(t, want, tr.Leaves(), "Resize(%d) does not retrace the history", n)
			}
		}
	}
}

// A fixed-seed random walk of Split, Merge, Resize and UnmarshalText; after every step the
// directory agrees with the leaf scan, and a failed step changes nothing.
func TestTrieCrossCheck(t *testing.T) {
	keys := append(randomKeys(17, 500, 10), adversarialKeys()...)
	steps := 400
	if quick() {
		steps = 150
	}
	r := rand.New(rand.NewPCG(18, 19))
	tr, err := NewTrie(1)
	require.NoError(t, err)
	failures := map[string]int{}
	for i := range steps {
		before, err := tr.MarshalText()
		require.NoError(t, err)
		n := tr.Shards()
		var opErr error
		switch op := r.IntN(10); {
		case op < 4:
			_, opErr = tr.Split(r.IntN(n + 1)) // sometimes out of range
		case op < 7:
			opErr = tr.Merge(r.IntN(n + 1))
		case op < 9:
			opErr = tr.Resize(max(1, n+r.IntN(9)-4))
		default:
			other := &Trie{}
			require.NoError(t, other.UnmarshalText(before))
			require.Equal(t, tr.Leaves(), other.Leaves())
			tr = other
		}
		if opErr != nil {
			switch {
			case errors.Is(opErr, ErrShard):
				failures["unknown"]++
			case errors.Is(opErr, ErrSubtree):
				failures["subtree"]++
			case errors.Is(opErr, ErrTrieDepth):
				failures["depth"]++
			case errors.Is(opErr, ErrShardCount):
				failures["count"]++
			default:
				t.Fatalf("step %d: unexpected error %v", i, opErr)
			}
			after, err := tr.MarshalText()
			require.NoError(t, err)
			require.Equalf(t, string(before), string(after), "step %d: failed op (%v) changed the trie", i, opErr)
		}
		checkTrie(t, tr, keys)
	}
	// The walk reached the interesting cases.
	require.Positive(t, failures["subtree"], "failures: %v", failures)
	require.Positive(t, failures["unknown"], "failures: %v", failures)
}

func TestTrieMax(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 2^20-shard trie")
	}
	tr, err := NewTrie(maxTrie)
	require.NoError(t, err)
	leaves := tr.load().byID // not Leaves(): sorting 2^20 leaves is slow under -race
	seen := make([]bool, maxTrie)
	for _, l := range leaves {
		if l.Depth != MaxTrieDepth || seen[l.Path] || tr.LocateHash(l.start()) != l.Shard {
			t.Fatalf("leaf %v: want depth %d, a new path, and LocateHash(%#x) = %d", l, MaxTrieDepth, l.start(), l.Shard)
		}
		seen[l.Path] = true
	}
	_, err = tr.Split(0)
	require.ErrorIs(t, err, ErrTrieDepth)
	require.ErrorIs(t, tr.Resize(maxTrie+1), ErrShardCount)
	for _, k := range randomKeys(20, 10, 8) {
		require.Equal(t, refLocate(leaves, keyhash.XXH64(k)), tr.Locate(k))
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = tr.Locate("user:1") }))
}

func TestTrieMarshalRoundTrip(t *testing.T) {
	keys := randomKeys(21, 2000, 10)
	trees := []*Trie{subtreeTrie(t)}
	for _, n := range []int{1, 2, 3, 5, 8, 13, 100} {
		tr, err := NewTrie(n)
		require.NoError(t, err)
		trees = append(trees, tr)
	}
	for _, tr := range trees {
		text, err := tr.MarshalText()
		require.NoError(t, err)
		var back Trie
		require.NoError(t, back.UnmarshalText(text))
		require.Equal(t, tr.Leaves(), back.Leaves())
		require.Equal(t, placement(tr, keys), placement(&back, keys))
		again, err := back.MarshalText()
		require.NoError(t, err)
		require.Equal(t, string(text), string(again))

		// Lines in any order, without the final newline, describe the same shape.
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
		slices.Reverse(lines)
		var shuffled Trie
		require.NoError(t, shuffled.UnmarshalText([]byte(strings.Join(lines, "\n"))))
		require.Equal(t, tr.Leaves(), shuffled.Leaves())
	}
}

func TestTrieUnmarshalErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "empty text"},
		{"\n", `line 1 "": want "<bits> <shard>"`},
		{"- 0\n\n", `line 2 "": want "<bits> <shard>"`},
		{"0 0\n1 1\n\n", `line 3 "": want "<bits> <shard>"`},
		{"-0", `want "<bits> <shard>"`},
		{"- 0 ", `shard "0 ": want a decimal number`},
		{"-  0", `shard " 0": want a decimal number`},
		{" 0", "path of 0 bits"},
		{"- 0\r\n", `shard "0\r"`},
		{"2 0", `path has byte '2'`},
		{"0 0\n1 x", `line 2 "1 x": shard "x"`},
		{"- +0", `shard "+0"`},
		{"0 00\n1 1", "leading zeros"},
		{"- 1", "shard 1: with 1 leaves the shards must be 0..0"},
		{"0 0\n1 2", "shard 2: with 2 leaves the shards must be 0..1"},
		{"0 0\n1 0", `line 2 "1 0": shard 0 already on line 1`},
		{"0 0\n1 99999999", "leading zeros"}, // too many digits
		{"0 0\n0 1", "leaf 0 (line 2) overlaps leaf 0 (line 1)"},
		{"- 0\n0 1", "leaf 0 (line 2) overlaps leaf - (line 1)"},
		{"0 0\n01 1\n1 2", "leaf 01 (line 2) overlaps leaf 0 (line 1)"},
		{"0 0", "no leaf covers prefix 1"},
		{"1 0", "no leaf covers prefix 0"},
		{"00 0\n11 1", "no leaf covers prefix 01"},
		{"000 0\n1 1", "no leaf covers prefix 001"},
		{strings.Repeat("0", 21) + " 0", "path of 21 bits: want 1 to 20 binary digits"},
	} {
		tr, err := NewTrie(3)
		require.NoError(t, err)
		err = tr.UnmarshalText([]byte(c.text))
		require.ErrorIsf(t, err, ErrTrieShape, "UnmarshalText(%q)", c.text)
		assert.Containsf(t, err.Error(), c.want, "UnmarshalText(%q)", c.text)
		assert.Truef(t, strings.HasPrefix(err.Error(), "shard: trie: "), "error %q lacks the prefix", err)
		require.Equal(t, 3, tr.Shards(), "failed UnmarshalText changed the trie")
	}
	// 20 bits deep is allowed.
	var tr Trie
	var b strings.Builder
	for d := 1; d <= MaxTrieDepth; d++ {
		fmt.Fprintf(&b, "%s1 %d\n", strings.Repeat("0", d-1), d)
	}
	fmt.Fprintf(&b, "%s 0\n", strings.Repeat("0", MaxTrieDepth))
	require.NoError(t, tr.UnmarshalText([]byte(b.String())))
	require.Equal(t, MaxTrieDepth+1, tr.Shards())
}

func TestTrieConcurrent(t *testing.T) {
	tr, err := NewTrie(4)
	require.NoError(t, err)
	keys := randomKeys(22, 500, 8)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if s := tr.Locate(keys[i%len(keys)]); s < 0 || s >= 64 {
					t.Errorf("Locate = %d", s)
					return
				}
				if i%50 == 0 {
					ls := tr.Leaves()
					if _, err := tr.MarshalText(); err != nil || len(ls) == 0 {
						t.Errorf("Leaves %v, MarshalText %v", ls, err)
						return
					}
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(23, 24))
	for range 300 {
		n := tr.Shards()
		switch r.IntN(3) {
		case 0:
			if n < 60 {
				_, _ = tr.Split(r.IntN(n))
			}
		case 1:
			_ = tr.Merge(r.IntN(n))
		default:
			_ = tr.Resize(1 + r.IntN(60))
		}
	}
	close(stop)
	wg.Wait()
	checkTrie(t, tr, keys)
}

func TestTrieRegress(t *testing.T) {
	var place, shapes strings.Builder
	keys := append(randomKeys(25, 20, 12), adversarialKeys()[:12]...)
	for _, n := range []int{1, 2, 3, 5, 8, 13} {
		tr, err := NewTrie(n)
		require.NoError(t, err)
		for _, k := range keys {
			fmt.Fprintf(&place, "%d %q %d\n", n, k, tr.Locate(k))
		}
		text, err := tr.MarshalText()
		require.NoError(t, err)
		fmt.Fprintf(&shapes, "# %d shards\n%s", n, text)
	}
	checkRegress(t, "regress/trie.txt", place.String())
	checkRegress(t, "regress/trie-shape.txt", shapes.String())
}

// Anything UnmarshalText accepts re-marshals to a canonical form that parses to the same
// shape, and routes like the leaf scan; anything it rejects wraps ErrTrieShape and changes
// nothing.
func FuzzTrieUnmarshalText(f *testing.F) {
	for _, n := range []int{1, 2, 3, 7} {
		tr, _ := NewTrie(n)
		text, _ := tr.MarshalText()
		f.Add(text)
	}
	f.Add([]byte("0 0\n01 1\n1 2"))
	f.Add([]byte("00 0\n11 1"))
	f.Add([]byte("1 1\n0 0"))
	f.Fuzz(func(t *testing.T, text []byte) {
		tr, err := NewTrie(3)
		require.NoError(t, err)
		// Memory follows the text: a leaf is a line.
		if got := allocated(func() { err = tr.UnmarshalText(text) }); got > uint64(256*len(text)+64<<10) {
			t.Fatalf("%d bytes of text: %d bytes allocated", len(text), got)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrTrieShape)
			require.Equal(t, 3, tr.Shards())
			return
		}
		canon, err := tr.MarshalText()
		require.NoError(t, err)
		require.Equal(t, strings.Count(string(canon), "\n"), tr.Shards())
		var back Trie
		require.NoError(t, back.UnmarshalText(canon))
		again, err := back.MarshalText()
		require.NoError(t, err)
		require.Equal(t, string(canon), string(again))
		leaves := tr.Leaves()
		for _, h := range []uint64{0, math.MaxUint64, keyhash.XXH64(string(text)), 1 << 63, 1<<63 - 1} {
			require.Equal(t, refLocate(leaves, h), tr.LocateHash(h))
			require.Equal(t, refLocate(leaves, h), back.LocateHash(h))
		}
	})
}

// Any sequence of operations leaves a trie whose Locate agrees with the leaf scan.
func FuzzTrieLocate(f *testing.F) {
	f.Add([]byte{0, 4, 8, 1}, "user:1")
	f.Add([]byte{2, 6, 0, 0, 0, 0, 5}, "")
	f.Add([]byte{0x22, 0x23, 0x40, 0x41}, "\xff\x00")
	f.Fuzz(func(t *testing.T, ops []byte, key string) {
		if len(ops) > 64 { // each op can rebuild a 4 MiB directory
			ops = ops[:64]
		}
		var tr Trie
		for _, op := range ops {
			n := tr.Shards()
			arg := int(op >> 2)
			switch op & 3 {
			case 0:
				_, _ = tr.Split(arg % n)
			case 1:
				_ = tr.Merge(arg % n)
			case 2:
				_ = tr.Resize(1 + arg)
			case 3:
				_, _ = tr.Split(arg) // maybe out of range
			}
		}
		got := tr.Locate(key)
		require.True(t, got >= 0 && got < tr.Shards())
		require.Equal(t, refLocate(tr.Leaves(), keyhash.XXH64(key)), got)
	})
}

var trieSink int

// BenchmarkTrieLocate compares Locate with Modulo.Locate and with the bare, inlined
// xxhash64(key) % n it builds on.
func BenchmarkTrieLocate(b *testing.B) {
	keys := randomKeys(26, 1<<12, 16)
	for _, n := range []int{10, 100, 1000} {
		tr, err := NewTrie(n)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("strategy=trie/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += tr.Locate(keys[i&(len(keys)-1)])
			}
			trieSink = s
		})
		m, err := NewModulo(n)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("strategy=modulo/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += m.Locate(keys[i&(len(keys)-1)])
			}
			trieSink = s
		})
		b.Run(fmt.Sprintf("strategy=xxhash-mod/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s, m := 0, uint64(n)
			for i := 0; b.Loop(); i++ {
				s += int(keyhash.XXH64(keys[i&(len(keys)-1)]) % m)
			}
			trieSink = s
		})
	}
}
