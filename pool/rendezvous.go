package pool

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
)

// Rendezvous places a key on the node with the best score for it, weighted rendezvous
// hashing (highest random weight: Thaler and Ravishankar 1998; weights by the logarithmic
// method of Schindelhauer and Schomaker, "Weighted Distributed Hash Tables", SPAA 2005).
//
// For a key and a node, u in (0, 1) comes from a 64-bit score s = Score(Hash(key),
// NodeHash(name)): u = (floor(s / 2^12) + 1/2) / 2^52. The node with the largest
// -weight / ln(u) wins, computed as the smallest -ln(u) / weight. -ln(u) / weight is
// exponentially distributed with rate weight, and the smallest of independent exponentials
// is node i's with probability weight_i / total, so each node's share of the keys is its
// share of the total weight, exactly in expectation, with nothing but the keys' binomial
// noise around it.
//
// Lookups compute one logarithm per distinct weight, not per node: within nodes of one
// weight, -weight/ln(u) grows with u, so the best of them is the one with the largest score
// s, found with integer compares; only the best of each weight is compared by -weight/ln(u).
// With equal weights (and in particular without weights) there is no logarithm at all, and a
// lookup costs one score per node. The logarithm is this package's own, made of float64
// additions, multiplications and divisions in a fixed order, each rounded (no fused
// multiply-add), with its constants computed the same way: every platform gets the same bits,
// so every process agrees on every key.
//
// Ties: of equal -ln(u) / weight (as computed), the larger score s wins; of equal scores, the
// smaller name (byte-wise; the larger with RendezvousOptions.LargerNameWins). Placement depends only on the members' names and weights, never on the
// order they joined. Adding or removing any node moves only the keys to or from that node,
// a weight change only the keys to or from the changed node, and after Remove(owner) a key
// goes to the second node AppendN gave it: every node's score for a key is its own.
//
// The default score is wyhash's multiply-and-fold mixing (see mum) of Hash(key) xor
// NodeHash(name), both XXH64. With RendezvousOptions
// a pool can reproduce another rendezvous implementation: go-redis v9's Ring places keys
// with dgryski/go-rendezvous, which takes the node whose xorshiftMult64(xxhash(key) xor
// xxhash(name)) is largest (xorshiftMult64: x ^= x>>12; x ^= x<<25; x ^= x>>27;
// x * 2685821657736338717), the first node in its list winning a tie; with Score set to that
// function and all weights equal, this pool picks the same node except on a tie of two
// 64-bit scores, where it picks the smaller name.
//
// A lookup costs one score per node (about a nanosecond each), so Rendezvous suits pools of
// up to a few thousand nodes; Ring costs the same at any size. Memory: about 90 bytes per
// node with a 13-byte name, membership included (BenchmarkPoolBuild).
//
// Make one with NewRendezvous; the zero Rendezvous has no nodes (Locate returns "", AppendN
// appends nothing, changes fail with ErrEmpty). Locate and AppendN take no
// lock and are safe for concurrent use with each other and with Add, Remove and SetWeight,
// which are serialized.
type Rendezvous struct {
	mu    sync.Mutex // serializes changes and guards m
	state atomic.Pointer[rendezvousTable]
	m     *members
	opts  RendezvousOptions
	dflt  bool // the default hashes and score: called directly so they inline
}

// RendezvousOptions configure NewRendezvous. The zero value hashes keys and names with XXH64
// and scores with wyhash's mixing of their xor.
type RendezvousOptions struct {
	// Hash returns the hash of a key. Nil means XXH64 (seed 0).
	Hash func(key string) uint64
	// NodeHash returns the hash of a node's name, computed once per change. Nil means XXH64.
	NodeHash func(name string) uint64
	// Score returns the score of a node for a key from their hashes; for each key the
	// scores of distinct nodes should look independent and uniform over the 64-bit range.
	// Nil means mum(key xor node): the 128-bit product of key xor node and 2^64/phi, its
	// halves xored (wyhash's mixing step).
	//
	// Hash, NodeHash and Score must be deterministic and safe for concurrent use, and should
	// not allocate: every lookup calls Hash once and Score once per node.
	Score func(key, node uint64) uint64
	// KeyScore, when set, replaces Hash, NodeHash and Score: the score of a node for a key
	// from the key and the node's name themselves, for systems that hash the two together
	// (pymemcache's RendezvousHash scores murmur3 of "name-key"). Every lookup calls it once
	// per node; it must be deterministic and safe for concurrent use, and should not
	// allocate.
	KeyScore func(key, name string) uint64
	// LargerNameWins gives a tie of equal scores to the larger name (byte-wise), as
	// pymemcache's RendezvousHash does, instead of the smaller; AppendN then ranks the larger
	// name first among equal scores.
	LargerNameWins bool
}

// rendezvousTable is what a lookup reads: the nodes grouped by weight, lightest first, and by
// name within a weight.
type rendezvousTable struct {
	names   []string
	nhash   []uint64 // NodeHash of names[i]
	classes []rendezvousClass
	larger  bool // LargerNameWins: names sort in decreasing order within a weight
}

// rendezvousClass is the nodes of one weight: names[start:end] with end from the class
// before.
type rendezvousClass struct {
	end    int
	weight float64
}

// rendezvousSmall is the largest n for which AppendN selects in fixed arrays; above it,
// AppendN allocates room for every node's score and sorts.
const rendezvousSmall = 8

// NewRendezvous returns a weighted rendezvous pool of the nodes. Nodes are validated as the
// package documentation says.
func NewRendezvous(nodes []Node, opts RendezvousOptions) (*Rendezvous, error) {
	r := &Rendezvous{opts: opts, dflt: opts.Hash == nil && opts.NodeHash == nil && opts.Score == nil && opts.KeyScore == nil}
	if opts.KeyScore != nil {
		r.opts.Hash = func(string) uint64 { return 0 } // unused: KeyScore reads the key
	}
	if r.opts.Hash == nil {
		r.opts.Hash = keyhash.XXH64
	}
	if r.opts.NodeHash == nil {
		r.opts.NodeHash = keyhash.XXH64
	}
	m, err := newMembers("rendezvous", nodes)
	if err != nil {
		return nil, err
	}
	r.publish(m)
	return r, nil
}

// publish builds the table of m and makes it the one lookups read.
func (r *Rendezvous) publish(m *members) {
	nodes := slices.Clone(m.nodes)
	order := 1
	if r.opts.LargerNameWins {
		order = -1
	}
	slices.SortFunc(nodes, func(a, b Node) int {
		return cmp.Or(cmp.Compare(a.Weight, b.Weight), order*strings.Compare(a.Name, b.Name))
	})
	t := &rendezvousTable{names: make([]string, len(nodes)), nhash: make([]uint64, len(nodes)), larger: r.opts.LargerNameWins}
	for i, n := range nodes {
		t.names[i], t.nhash[i] = n.Name, r.opts.NodeHash(n.Name)
		if i+1 == len(nodes) || nodes[i+1].Weight != n.Weight {
			t.classes = append(t.classes, rendezvousClass{end: i + 1, weight: float64(n.Weight)})
		}
	}
	r.state.Store(t)
	r.m = m
}

// mum returns the two halves of the 128-bit product of x and 2^64/phi, xored: the mixing
// step of wyhash (Wang Yi). One multiplication, where SplitMix64's output function takes
// two, which halves the cost of a lookup; with x the xor of two XXH64 values, its outputs
// pass the shares and movement tests as well.
func mum(x uint64) uint64 {
	hi, lo := bits.Mul64(x, 0x9e3779b97f4a7c15)
	return hi ^ lo
}

// keyHash returns Hash(key), calling the default directly so it inlines.
func (r *Rendezvous) keyHash(key string) uint64 {
	if r.dflt {
		return keyhash.XXH64(key)
	}
	return r.opts.Hash(key)
}

// score returns node i's score for key, whose hash is k, with a custom score.
func (r *Rendezvous) score(t *rendezvousTable, k uint64, key string, i int) uint64 {
	if r.opts.KeyScore != nil {
		return r.opts.KeyScore(key, t.names[i])
	}
	return r.opts.Score(k, t.nhash[i])
}

// best returns the index in [from, to) of the largest score for key (whose hash is k), and
// the score; of equal scores the first, the smaller name (the larger with LargerNameWins).
func (r *Rendezvous) best(t *rendezvousTable, k uint64, key string, from, to int) (int, uint64) {
	nh := t.nhash[from:to]
	bi, bs := 0, uint64(0)
	if r.dflt {
		bs = mum(k ^ nh[0])
		for i, n := range nh[1:] {
			if s := mum(k ^ n); s > bs {
				bi, bs = i+1, s
			}
		}
	} else {
		bs = r.score(t, k, key, from)
		for i := from + 1; i < to; i++ {
			if s := r.score(t, k, key, i); s > bs {
				bi, bs = i-from, s
			}
		}
	}
	return from + bi, bs
}

// Locate returns the name of the node with the best score for key.
func (r *Rendezvous) Locate(key string) string {
	t := r.state.Load()
	if t == nil { // the zero Rendezvous
		return ""
	}
	return t.names[r.locate(t, r.keyHash(key), key)]
}

// locate returns the index of the best node for key, whose hash is k.
func (r *Rendezvous) locate(t *rendezvousTable, k uint64, key string) int32 {
	if len(t.classes) == 1 {
		i, _ := r.best(t, k, key, 0, len(t.names))
		return int32(i)
	}
	var top rendezvousCandidate
	from := 0
	for c, class := range t.classes {
		i, s := r.best(t, k, key, from, class.end)
		cand := rendezvousCandidate{e: negLog(s) / class.weight, s: s, i: int32(i)}
		if c == 0 || cand.better(top, t) {
			top = cand
		}
		from = class.end
	}
	return top.i
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys). With the default score it scores two keys per pass over the nodes:
// each node's hash is loaded once for both, and the two running maxima are independent, so
// the processor works on them side by side (more keys per pass run out of registers).
func (r *Rendezvous) LocateBatch(keys []string, dst []string) {
	dst = batchDst(keys, dst)
	t := r.state.Load()
	if t == nil { // the zero Rendezvous
		clear(dst)
		return
	}
	i := 0
	for ; r.dflt && i+2 <= len(keys); i += 2 {
		k0, k1 := keyhash.XXH64(keys[i]), keyhash.XXH64(keys[i+1])
		var top0, top1 rendezvousCandidate
		from := 0
		for c, class := range t.classes {
			i0, s0, i1, s1 := best2(t.nhash[from:class.end], k0, k1)
			c0 := rendezvousCandidate{s: s0, i: int32(from + i0)}
			c1 := rendezvousCandidate{s: s1, i: int32(from + i1)}
			if len(t.classes) > 1 {
				c0.e, c1.e = negLog(s0)/class.weight, negLog(s1)/class.weight
			}
			if c == 0 || c0.better(top0, t) {
				top0 = c0
			}
			if c == 0 || c1.better(top1, t) {
				top1 = c1
			}
			from = class.end
		}
		dst[i], dst[i+1] = t.names[top0.i], t.names[top1.i]
	}
	for ; i < len(keys); i++ {
		dst[i] = t.names[r.locate(t, r.keyHash(keys[i]), keys[i])]
	}
}

// best2 is best (with the default score) for two key hashes in one pass over the node
// hashes nh: for each key the index in nh of its largest score, and the score.
func best2(nh []uint64, k0, k1 uint64) (i0 int, s0 uint64, i1 int, s1 uint64) {
	s0, s1 = mum(k0^nh[0]), mum(k1^nh[0])
	for i, n := range nh[1:] {
		if s := mum(k0 ^ n); s > s0 {
			s0, i0 = s, i+1
		}
		if s := mum(k1 ^ n); s > s1 {
			s1, i1 = s, i+1
		}
	}
	return i0, s0, i1, s1
}

// rendezvousCandidate is a node with its score s for a key and e = -ln(u)/weight: the
// smaller e, the better.
type rendezvousCandidate struct {
	e float64
	s uint64
	i int32
}

// better reports whether c ranks before d: smaller e, then larger score, then smaller name
// (larger with LargerNameWins).
func (c rendezvousCandidate) better(d rendezvousCandidate, t *rendezvousTable) bool {
	if c.e != d.e {
		return c.e < d.e
	}
	if c.s != d.s {
		return c.s > d.s
	}
	return (t.names[c.i] < t.names[d.i]) != t.larger
}

// AppendN appends to dst the names of the min(n, len(Nodes())) nodes with the best scores
// for key, best first. It allocates only when dst lacks room, or when n > 8.
func (r *Rendezvous) AppendN(dst []string, key string, n int) []string {
	t := r.state.Load()
	if t == nil { // the zero Rendezvous
		return dst
	}
	n = min(n, len(t.names))
	if n <= 0 {
		return dst
	}
	k := r.keyHash(key)
	if n > rendezvousSmall {
		return r.appendMany(dst, t, k, key, n)
	}
	var top [rendezvousSmall]rendezvousCandidate
	if len(t.classes) == 1 { // one weight: the n largest scores
		for _, c := range top[:r.bestN(top[:n], t, k, key, 0, len(t.names))] {
			dst = append(dst, t.names[c.i])
		}
		return dst
	}
	// The n best of each weight by score, then of those the n best by e.
	var class [rendezvousSmall]rendezvousCandidate
	found, from := 0, 0
	for _, c := range t.classes {
		got := r.bestN(class[:n], t, k, key, from, c.end)
		from = c.end
		for _, cand := range class[:got] {
			cand.e = negLog(cand.s) / c.weight
			found = insertCandidate(top[:n], found, cand, t)
		}
	}
	for _, c := range top[:found] {
		dst = append(dst, t.names[c.i])
	}
	return dst
}

// bestN fills best with the len(best) largest scores among nodes [from, to), largest first
// (of equal scores the one first in table order, the smaller name unless LargerNameWins),
// and returns how many it found.
func (r *Rendezvous) bestN(best []rendezvousCandidate, t *rendezvousTable, k uint64, key string, from, to int) int {
	found, floor := 0, uint64(0) // floor: once best is full, the score to beat
	if r.dflt {
		for i, n := range t.nhash[from:to] {
			if s := mum(k ^ n); found < len(best) || s > floor {
				found, floor = insertBest(best, found, s, int32(from+i))
			}
		}
		return found
	}
	for i := from; i < to; i++ {
		if s := r.score(t, k, key, i); found < len(best) || s > floor {
			found, floor = insertBest(best, found, s, int32(i))
		}
	}
	return found
}

// insertBest inserts score s of node i into best[:found], kept largest first (after equal
// scores, which belong to smaller names), dropping the smallest if best is full, and returns
// the new count and the smallest score kept.
func insertBest(best []rendezvousCandidate, found int, s uint64, i int32) (int, uint64) {
	j := min(found, len(best)-1)
	for j > 0 && best[j-1].s < s {
		best[j] = best[j-1]
		j--
	}
	best[j] = rendezvousCandidate{s: s, i: i}
	found = min(found+1, len(best))
	return found, best[found-1].s
}

// insertCandidate inserts c into top[:found], kept best first, dropping the worst if top is
// full, and returns the new count.
func insertCandidate(top []rendezvousCandidate, found int, c rendezvousCandidate, t *rendezvousTable) int {
	if found == len(top) && !c.better(top[found-1], t) {
		return found
	}
	j := min(found, len(top)-1)
	for j > 0 && c.better(top[j-1], t) {
		top[j] = top[j-1]
		j--
	}
	top[j] = c
	return min(found+1, len(top))
}

// appendMany is AppendN for large n: every node's rank, sorted.
func (r *Rendezvous) appendMany(dst []string, t *rendezvousTable, k uint64, key string, n int) []string {
	all := make([]rendezvousCandidate, len(t.names))
	from := 0
	for _, c := range t.classes {
		for i := from; i < c.end; i++ {
			all[i].i = int32(i)
			if r.dflt {
				all[i].s = mum(k ^ t.nhash[i])
			} else {
				all[i].s = r.score(t, k, key, i)
			}
			if len(t.classes) > 1 {
				all[i].e = negLog(all[i].s) / c.weight
			}
		}
		from = c.end
	}
	slices.SortFunc(all, func(a, b rendezvousCandidate) int {
		if a.better(b, t) {
			return -1
		}
		return 1
	})
	for _, c := range all[:n] {
		dst = append(dst, t.names[c.i])
	}
	return dst
}

// Add adds nodes to the pool, all or none.
func (r *Rendezvous) Add(nodes ...Node) error {
	return r.change(func(m *members) (*members, error) { return m.add("rendezvous", nodes) })
}

// Remove removes the named nodes, all or none; the pool never becomes empty.
func (r *Rendezvous) Remove(names ...string) error {
	return r.change(func(m *members) (*members, error) { return m.remove("rendezvous", names) })
}

// SetWeight sets the weight of the named node, in [0, MaxWeight] (0 means 1); only keys to
// or from that node move.
func (r *Rendezvous) SetWeight(name string, weight int) error {
	return r.change(func(m *members) (*members, error) { return m.setWeight("rendezvous", name, weight) })
}

func (r *Rendezvous) change(f func(*members) (*members, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return zeroError("rendezvous", "NewRendezvous")
	}
	m, err := f(r.m)
	if err != nil {
		return err
	}
	r.publish(m)
	return nil
}

// Nodes returns a copy of the members in the order they joined.
func (r *Rendezvous) Nodes() []Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.copyNodes()
}

// negLog returns -ln(u) for u = (floor(s / 2^12) + 1/2) / 2^52, in (0, 37]. It uses only
// float64 additions, subtractions, multiplications and divisions, each rounded (the
// float64 conversions forbid fused multiply-adds), so it returns the same bits on every
// platform, which math.Log does not promise (amd64 has its own assembly). Its error is below
// 1e-14 relative (about 1e-16 absolute near u = 1): the shares it gives differ from exact
// ones by far less than any key count can show.
//
// With v = 2*floor(s / 2^12) + 1, an odd integer below 2^53, u = v / 2^53 and
// -ln(u) = 53 ln 2 - ln v. Writing v = 2^e * m with m in [1, 2) and c = 1 + j/128 the
// largest such step at or below m, ln v = e ln 2 + ln c + ln(m/c), where ln c comes from a
// table and ln(m/c) = 2 atanh(x), x = (m-c)/(m+c) < 1/257, from four terms of its series.
func negLog(s uint64) float64 {
	v := s>>12<<1 | 1
	e := bits.Len64(v) - 1
	var j uint64
	if e >= 7 {
		j = v >> (e - 7) & 127
	} else {
		j = v << (7 - e) & 127
	}
	m := math.Ldexp(float64(v), -e) // exact: v has at most 53 bits
	c := 1 + float64(j)/128
	x := (m - c) / (m + c) // m - c is exact (Sterbenz)
	lnr := float64(2*x) * atanhSeries(float64(x*x), 4)
	k := float64(53 - e)
	return (float64(k*ln2Hi) - lnTable[j]) + (float64(k*ln2Lo) - lnr)
}

// ln2Hi + ln2Lo = ln 2 to about 2^-85, ln2Hi with its low 21 bits zero, so k*ln2Hi is exact
// for every k above (the split of fdlibm's e_log.c).
const (
	ln2Hi = 6.93147180369123816490e-01
	ln2Lo = 1.90821492927058770002e-10
)

// atanhSeries returns 1 + x2/3 + x2^2/5 + ... (terms terms), so that atanh(x) =
// x * atanhSeries(x*x, ...), summed from the smallest term, each step rounded.
func atanhSeries(x2 float64, terms int) float64 {
	p := 1 / float64(2*terms-1)
	for k := terms - 2; k >= 0; k-- {
		p = float64(p*x2) + 1/float64(2*k+1)
	}
	return p
}

// lnTable[j] = ln(1 + j/128) = 2 atanh(j/(256+j)), from 30 terms of the series: j/(256+j) <=
// 1/3, so the first term left out is below 1e-30.
var lnTable = func() (t [128]float64) {
	for j := range t {
		x := float64(j) / float64(256+j)
		t[j] = float64(2*x) * atanhSeries(float64(x*x), 30)
	}
	return t
}()
