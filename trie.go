package shard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/shardkit/shard/internal/keyhash"
)

// Trie places keys with the bit trie of the sharding lecture [003]: walk the bits of
// xxhash64(key) from the top down a binary tree; the leaf reached is the key's shard.
// Splitting a leaf moves about half of its keys, those whose next bit is 1, to a new shard and
// no other key; merging a leaf into its sibling leaf moves only the merged leaf's keys.
//
// Lookups do not walk the tree. As in extendible hashing (Fagin, Nievergelt, Pippenger and
// Strong, "Extendible hashing - a fast access method for dynamic files", ACM TODS 4(3),
// 1979), a flat directory of 2^D entries, indexed by the top D bits of the hash where D is
// the depth of the deepest leaf, names the shard of every prefix; a leaf of depth d fills
// 2^(D-d) consecutive entries. Locate is one hash, one shift and one load. The directory
// costs 4 bytes per entry: D is capped at [MaxTrieDepth] = 20 bits (4 MiB), so a trie has at
// most 2^20 shards, and a split that would make a leaf deeper than the cap fails.
//
// Shards are always numbered 0..Shards()-1, and the shape depends on the history:
//   - NewTrie(n), and Resize up, split the shallowest leaf, the leftmost (lowest Path) of
//     those, until there are n shards, so NewTrie(n) equals NewTrie(1) grown one at a time
//     and its leaves differ in depth by at most one.
//   - Split splits a chosen leaf; the new shard gets the next number.
//   - Resize down and Merge merge a leaf into its sibling leaf. Merging is refused with
//     [ErrSubtree] when the sibling is a subtree (the sharding lecture's [003] hard case,
//     which would remove other shards too).
//   - MarshalText and UnmarshalText carry the shape between processes.
//
// Every change rebuilds the directory, in O(2^D + n) time. After growth alone D is
// ceil(log2 n), so the directory has fewer than 2n entries; a chain of splits of one shard
// can make it 2^20 entries (4 MiB) with only 21 shards.
//
// Locate, LocateHash, Shards, Leaves and MarshalText are safe for concurrent use, also with
// the methods that change the trie (Resize, Split, Merge, UnmarshalText), which are
// serialized with one another; a lookup sees the shape before or after a change, never a
// mix. The zero Trie has one shard.
type Trie struct {
	mu   sync.Mutex // serializes changes of the shape
	snap atomic.Pointer[trieSnap]
}

// MaxTrieDepth is the deepest a Trie leaf can be, in bits of the key hash. It bounds the
// lookup directory at 2^20 int32 entries (4 MiB) and the shard count at 2^20 = 1048576.
const MaxTrieDepth = 20

// maxTrie is the most shards a Trie can have: every leaf at the depth cap.
const maxTrie = 1 << MaxTrieDepth

var (
	// ErrSubtree reports a merge whose sibling is a subtree, not a leaf: merging would have
	// to collapse the whole parent subtree into one leaf and remove other shards too.
	ErrSubtree = errors.New("sibling is a subtree")
	// ErrTrieDepth reports a split that would make a leaf deeper than MaxTrieDepth bits.
	ErrTrieDepth = errors.New("trie depth cap reached")
	// ErrTrieShape reports a malformed or inconsistent text form of a Trie.
	ErrTrieShape = errors.New("bad trie shape")
)

// Leaf is one leaf of a Trie: every key whose 64-bit hash begins with the Depth bits of Path
// belongs to Shard. Path holds those bits right-aligned, so Path < 1<<Depth; the root leaf of
// a one-shard trie has Depth 0 and Path 0.
type Leaf struct {
	Path  uint64
	Depth int
	Shard int
}

// start returns the first hash of l's range, its Path left-aligned in 64 bits, which orders
// the leaves of one trie in key-hash order.
func (l Leaf) start() uint64 {
	if l.Depth == 0 {
		return 0
	}
	return l.Path << (64 - l.Depth)
}

// bits returns l.Path as Depth binary digits, or "-" for the root.
func (l Leaf) bits() string {
	if l.Depth == 0 {
		return "-"
	}
	s := strconv.FormatUint(l.Path, 2)
	return strings.Repeat("0", l.Depth-len(s)) + s
}

// trieSnap is one immutable shape: what Locate reads, published whole.
type trieSnap struct {
	shift uint    // 64 - max(D, 1); the directory always has at least two entries
	dir   []int32 // shard of each prefix of the top 64-shift hash bits
	byID  []Leaf  // byID[s] is the leaf of shard s
}

// rootSnap is the shape of the zero Trie: one leaf, shard 0.
var rootSnap = newTrieSnap([]Leaf{{}})

// newTrieSnap builds the directory of a valid shape; it owns leaves from now on.
func newTrieSnap(leaves []Leaf) *trieSnap {
	depth := 1 // a 2-entry directory lets Locate shift by 63 at most, never by 64
	for _, l := range leaves {
		depth = max(depth, l.Depth)
	}
	dir := make([]int32, 1<<depth)
	for _, l := range leaves {
		lo := l.Path << (depth - l.Depth)
		for i := lo; i < lo+1<<(depth-l.Depth); i++ {
			dir[i] = int32(l.Shard)
		}
	}
	return &trieSnap{shift: uint(64 - depth), dir: dir, byID: leaves}
}

func (t *Trie) load() *trieSnap {
	if s := t.snap.Load(); s != nil {
		return s
	}
	return rootSnap
}

// NewTrie returns a Trie with n shards, n in [1, 2^20], shaped as NewTrie(1) grown to n by
// Resize: all leaves at depth floor(log2 n) or one deeper.
func NewTrie(n int) (*Trie, error) {
	if err := checkCount("trie", n, maxTrie); err != nil {
		return nil, err
	}
	leaves, err := grow([]Leaf{{}}, n)
	if err != nil {
		return nil, err
	}
	t := &Trie{}
	t.snap.Store(newTrieSnap(leaves))
	return t, nil
}

// Locate returns the shard of key, in [0, Shards()): the leaf that the top bits of
// xxhash64(key) reach.
func (t *Trie) Locate(key string) int {
	return t.LocateHash(keyhash.XXH64(key))
}

// LocateHash returns the shard that owns the 64-bit key hash h, in [0, Shards()); Locate(k)
// is LocateHash(xxhash64(k)). It lets callers that already hold the hash skip rehashing.
func (t *Trie) LocateHash(h uint64) int {
	s := t.load()
	return int(s.dir[h>>(s.shift&63)])
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys).
func (t *Trie) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	s := t.load()
	for i, k := range keys {
		dst[i] = int(s.dir[keyhash.XXH64(k)>>(s.shift&63)])
	}
}

// Shards returns the current number of shards.
func (t *Trie) Shards() int {
	return len(t.load().byID)
}

// Leaves returns a new slice of the leaves in key-hash order: by Path, compared as if every
// Path were extended with zero bits to a common depth. Their hash ranges are consecutive and
// cover all 2^64 hashes; Leaves()[i].Shard for i in [0, Shards()) is a permutation of
// 0..Shards()-1. Rebalancing can plan moves leaf by leaf from it without walking keys.
func (t *Trie) Leaves() []Leaf {
	out := slices.Clone(t.load().byID)
	sortLeaves(out)
	return out
}

func sortLeaves(ls []Leaf) {
	slices.SortFunc(ls, func(a, b Leaf) int {
		if c := compareU64(a.start(), b.start()); c != 0 {
			return c
		}
		return a.Depth - b.Depth
	})
}

func compareU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Resize sets the number of shards to n, in [1, 2^20].
//
// Growing splits, once per new shard, the shallowest leaf (the leftmost of those): the new
// shard takes the half whose next hash bit is 1, so only that leaf's keys move, about half
// of them, all to the new shard.
//
// Shrinking removes the highest-numbered shard, once per shard, merging its leaf into its
// sibling leaf: only its keys move, all to the sibling's shard. It never fails when the
// trie was built by splits alone (NewTrie, Resize, Split; merges of the highest shard only
// undo splits), and it undoes those splits in reverse order: a split makes the new, highest
// shard the right half of a leaf whose left half stays a leaf until a later split, and every
// later split made a higher-numbered shard, which shrinking has merged back first. So a
// Resize down after Resize up restores the earlier shape exactly. After Merge of a shard
// other than the highest, or UnmarshalText of another shape, the highest shard's sibling can
// be a subtree: then Resize fails with an error wrapping ErrSubtree that names the shards of
// that subtree.
//
// On error the trie is unchanged.
func (t *Trie) Resize(n int) error {
	if err := checkCount("trie", n, maxTrie); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.load().byID
	var (
		leaves []Leaf
		err    error
	)
	switch {
	case n == len(cur):
		return nil
	case n > len(cur):
		leaves, err = grow(slices.Clone(cur), n)
	default:
		leaves, err = shrink(slices.Clone(cur), n)
	}
	if err != nil {
		return err
	}
	t.snap.Store(newTrieSnap(leaves))
	return nil
}

// grow splits the shallowest, then leftmost, leaf of leaves until there are n.
//
// Leaves wait in two queues, both in (Depth, Path) order: the given ones, sorted, and the
// halves made by splitting, which come out in that order because their parents did. So each
// split costs O(1) after one sort.
func grow(leaves []Leaf, n int) ([]Leaf, error) {
	byDepth := func(a, b Leaf) int {
		if a.Depth != b.Depth {
			return a.Depth - b.Depth
		}
		return compareU64(a.Path, b.Path)
	}
	old := slices.SortedFunc(slices.Values(leaves), byDepth)
	made := make([]Leaf, 0, 2*(n-len(leaves)))
	leaves = slices.Grow(leaves, n-len(leaves))
	for len(leaves) < n {
		var l Leaf
		if len(made) == 0 || len(old) > 0 && byDepth(old[0], made[0]) < 0 {
			l, old = old[0], old[1:]
		} else {
			l, made = made[0], made[1:]
		}
		left, right, err := split(l, len(leaves))
		if err != nil {
			return nil, err
		}
		leaves[l.Shard] = left
		leaves = append(leaves, right)
		made = append(made, left, right)
	}
	return leaves, nil
}

// split returns the halves of l: the left keeps l.Shard, the right goes to shard next.
func split(l Leaf, next int) (left, right Leaf, err error) {
	if l.Depth >= MaxTrieDepth {
		return Leaf{}, Leaf{}, fmt.Errorf("shard: trie: cannot split shard %d: its leaf %s is at the depth cap of %d bits: %w",
			l.Shard, l.bits(), MaxTrieDepth, ErrTrieDepth)
	}
	left = Leaf{Path: l.Path << 1, Depth: l.Depth + 1, Shard: l.Shard}
	right = Leaf{Path: l.Path<<1 | 1, Depth: l.Depth + 1, Shard: next}
	return left, right, nil
}

// shrink merges the highest shard into its sibling until n remain.
func shrink(leaves []Leaf, n int) ([]Leaf, error) {
	index := make(map[Leaf]int, len(leaves)) // {Path, Depth} -> shard
	for _, l := range leaves {
		index[Leaf{Path: l.Path, Depth: l.Depth}] = l.Shard
	}
	for len(leaves) > n {
		h := leaves[len(leaves)-1]
		sib, ok := index[Leaf{Path: h.Path ^ 1, Depth: h.Depth}]
		if !ok {
			return nil, fmt.Errorf("shard: trie: cannot shrink to %d shards: %w", n, subtreeError(leaves, h))
		}
		parent := Leaf{Path: h.Path >> 1, Depth: h.Depth - 1, Shard: sib}
		delete(index, Leaf{Path: h.Path, Depth: h.Depth})
		delete(index, Leaf{Path: h.Path ^ 1, Depth: h.Depth})
		index[Leaf{Path: parent.Path, Depth: parent.Depth}] = sib
		leaves[sib] = parent
		leaves = leaves[:len(leaves)-1]
	}
	return leaves, nil
}

// subtreeError says why l cannot merge: its sibling is a subtree, whose shards it names.
func subtreeError(leaves []Leaf, l Leaf) error {
	sib := Leaf{Path: l.Path ^ 1, Depth: l.Depth}
	var under []int
	for _, o := range leaves {
		if o.Depth > sib.Depth && o.Path>>(o.Depth-sib.Depth) == sib.Path {
			under = append(under, o.Shard)
		}
	}
	slices.Sort(under)
	parent := "the root"
	if l.Depth > 1 {
		parent = "prefix " + Leaf{Path: l.Path >> 1, Depth: l.Depth - 1}.bits()
	}
	return fmt.Errorf("shard %d (leaf %s) has as sibling the subtree %s of shards %v, not a leaf; "+
		"merging would collapse %s with its %d leaves into one leaf, removing %d shards: %w",
		l.Shard, l.bits(), sib.bits(), under, parent, len(under)+1, len(under), ErrSubtree)
}

// Split splits the leaf of shard in two and returns the new shard, numbered Shards() before
// the call: it takes the half whose next hash bit is 1, so about half of shard's keys move to
// it, and no other key moves. It fails, leaving the trie unchanged, with an error wrapping
// ErrShard if shard is not in [0, Shards()), or ErrTrieDepth if the leaf is already
// MaxTrieDepth bits deep.
func (t *Trie) Split(shard int) (newShard int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.load().byID
	if err := checkShard("split", shard, len(cur)); err != nil {
		return 0, err
	}
	left, right, err := split(cur[shard], len(cur))
	if err != nil {
		return 0, err
	}
	leaves := append(slices.Clone(cur), right)
	leaves[shard] = left
	t.snap.Store(newTrieSnap(leaves))
	return right.Shard, nil
}

// Merge removes shard by merging its leaf into its sibling leaf: shard's keys move to the
// sibling's shard, and no other key moves.
//
// Shards stay numbered 0..Shards()-1, so if shard is not the highest number n-1, shard n-1
// takes the freed number: its keys stay where they are but Locate now reports them as shard.
// Merge(Shards()-1) is Resize(Shards()-1).
//
// Merge fails, leaving the trie unchanged, with an error wrapping ErrShardCount if shard is
// the only one, ErrShard if it is not in [0, Shards()), or ErrSubtree if the sibling
// is a subtree; the error names that subtree and its shards, which merging would have to
// collapse.
func (t *Trie) Merge(shard int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.load().byID
	if err := checkShard("merge", shard, len(cur)); err != nil {
		return err
	}
	if len(cur) == 1 {
		return fmt.Errorf("shard: trie: cannot merge shard 0, the only one: 0 shards would remain, allowed range is [1, %d]: %w",
			maxTrie, ErrShardCount)
	}
	l := cur[shard]
	sib := -1
	for _, o := range cur {
		if o.Depth == l.Depth && o.Path == l.Path^1 {
			sib = o.Shard
		}
	}
	if sib < 0 {
		return fmt.Errorf("shard: trie: cannot merge: %w", subtreeError(cur, l))
	}
	leaves := slices.Clone(cur)
	leaves[sib] = Leaf{Path: l.Path >> 1, Depth: l.Depth - 1, Shard: sib}
	last := len(leaves) - 1
	if shard != last {
		leaves[shard] = leaves[last]
		leaves[shard].Shard = shard
	}
	t.snap.Store(newTrieSnap(leaves[:last]))
	return nil
}

func checkShard(op string, shard, n int) error {
	if shard >= 0 && shard < n {
		return nil
	}
	return fmt.Errorf("shard: trie: %s shard %d: allowed range is [0, %d): %w", op, shard, n, ErrShard)
}

// MarshalText returns the shape as text, one leaf per line in key-hash order (as Leaves):
// the Path as Depth binary digits, or "-" for the root of a one-shard trie, a space, and the
// shard number in decimal. A trie of three shards is
//
//	00 0
//	01 2
//	1 1
//
// Every line ends with "\n". The form is canonical: equal shapes give equal bytes. It never
// fails.
func (t *Trie) MarshalText() ([]byte, error) {
	var b []byte
	for _, l := range t.Leaves() {
		b = append(b, l.bits()...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(l.Shard), 10)
		b = append(b, '\n')
	}
	return b, nil
}

// UnmarshalText replaces the shape with the one text describes, in the form MarshalText
// writes. The lines may come in any order and the last "\n" may be missing; nothing else is
// accepted: no blank lines, comments, "\r", signs, leading zeros or extra spaces. The leaves
// must cover every hash exactly once (no prefix missing, none overlapping another or
// repeated), be at most MaxTrieDepth bits deep, and carry the shards 0..n-1 once each, where
// n is the number of lines.
//
// A bad shape is rejected with an error wrapping ErrTrieShape that names the line and the
// problem, and the trie is left unchanged.
func (t *Trie) UnmarshalText(text []byte) error {
	leaves, err := parseTrie(string(text))
	if err != nil {
		return err
	}
	snap := newTrieSnap(leaves)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.snap.Store(snap)
	return nil
}

func shapeError(format string, args ...any) error {
	return fmt.Errorf("shard: trie: "+format+": %w", append(args, ErrTrieShape)...)
}

// parseTrie parses and validates the text form; the result is indexed by shard.
func parseTrie(text string) ([]Leaf, error) {
	if text == "" {
		return nil, shapeError("empty text: want at least the root line %q", "- 0")
	}
	text = strings.TrimSuffix(text, "\n")
	count := strings.Count(text, "\n") + 1
	if count > maxTrie {
		return nil, shapeError("%d lines: at most %d leaves", count, maxTrie)
	}
	byID := make([]Leaf, count)
	lineOf := make([]int, count) // 1-based line of each shard, 0 if not seen yet
	for i := range count {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		l, err := parseLeaf(line, count)
		if err != nil {
			return nil, shapeError("line %d %q: %v", i+1, clip(line), err)
		}
		if prev := lineOf[l.Shard]; prev != 0 {
			return nil, shapeError("line %d %q: shard %d already on line %d", i+1, clip(line), l.Shard, prev)
		}
		lineOf[l.Shard] = i + 1
		byID[l.Shard] = l
	}
	// count lines carry count distinct shards in [0, count): all of 0..count-1.

	// The leaves must tile the hash space: in key-hash order each starts where the one
	// before it ends. Positions are counted in units of the deepest possible leaf.
	sorted := slices.Clone(byID)
	sortLeaves(sorted)
	var next uint64
	for i, l := range sorted {
		lo := l.Path << (MaxTrieDepth - l.Depth)
		switch {
		case lo < next:
			return nil, shapeError("leaf %s (line %d) overlaps leaf %s (line %d)",
				l.bits(), lineOf[l.Shard], sorted[i-1].bits(), lineOf[sorted[i-1].Shard])
		case lo > next:
			return nil, shapeError("no leaf covers prefix %s", gap(next, lo).bits())
		}
		next = lo + 1<<(MaxTrieDepth-l.Depth)
	}
	if next != maxTrie {
		return nil, shapeError("no leaf covers prefix %s", gap(next, maxTrie).bits())
	}
	return byID, nil
}

// gap returns the largest aligned prefix that starts at lo and ends by hi, in units of
// the deepest possible leaf (lo < hi <= 2^MaxTrieDepth).
func gap(lo, hi uint64) Leaf {
	d := 0
	for lo&(1<<(MaxTrieDepth-d)-1) != 0 || lo+1<<(MaxTrieDepth-d) > hi {
		d++
	}
	return Leaf{Path: lo >> (MaxTrieDepth - d), Depth: d}
}

// parseLeaf parses "<bits> <shard>" with shard < n.
func parseLeaf(line string, n int) (Leaf, error) {
	path, num, ok := strings.Cut(line, " ")
	if !ok {
		return Leaf{}, errors.New(`want "<bits> <shard>"`)
	}
	var l Leaf
	if path != "-" {
		if len(path) == 0 || len(path) > MaxTrieDepth {
			return Leaf{}, fmt.Errorf("path of %d bits: want 1 to %d binary digits, or - for the root", len(path), MaxTrieDepth)
		}
		for _, c := range []byte(path) {
			if c != '0' && c != '1' {
				q := fmt.Sprintf("%q", c)
				if c >= utf8.RuneSelf { // %q would show the rune U+00xx: 'ÿ' for the byte 0xff
					q = fmt.Sprintf(`'\x%02x'`, c)
				}
				return Leaf{}, fmt.Errorf("path has byte %s: want binary digits, or - for the root", q)
			}
			l.Path = l.Path<<1 | uint64(c-'0')
		}
		l.Depth = len(path)
	}
	if len(num) == 0 || len(num) > 7 || num[0] == '0' && len(num) > 1 {
		return Leaf{}, fmt.Errorf("shard %q: want a decimal number without leading zeros", clip(num))
	}
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return Leaf{}, fmt.Errorf("shard %q: want a decimal number", clip(num))
		}
		l.Shard = l.Shard*10 + int(c-'0')
	}
	if l.Shard >= n {
		return Leaf{}, fmt.Errorf("shard %d: with %d leaves the shards must be 0..%d", l.Shard, n, n-1)
	}
	return l, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
