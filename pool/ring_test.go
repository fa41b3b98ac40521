package pool

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/ring"
)

func newRingPool(opts RingOptions) func([]Node) (Pool, error) {
	return func(nodes []Node) (Pool, error) { return NewRing(nodes, opts) }
}

// coarseHash keeps the top 12 bits of XXH64: points share positions all the time and keys
// land exactly on them, which drives the tie rule and the hidden points behind winners.
func coarseHash(s string) uint64 { return keyhash.XXH64(s) &^ (1<<52 - 1) }

func TestRingContract(t *testing.T) {
	checkContract(t, contract{name: "ring", newPool: newRingPool(RingOptions{}), orderFree: true, minimal: true, nextOnRemove: true})
}

// With ties everywhere the points a winner hides keep removals minimal and AppendN's second
// node right.
func TestRingContractTies(t *testing.T) {
	checkContract(t, contract{name: "ring with ties", newPool: newRingPool(RingOptions{Hash: coarseHash, Vnodes: 40}),
		orderFree: true, minimal: true, nextOnRemove: true})
}

// The nearest-point rule keeps changes minimal (a key moves only to a new point nearer than
// its old one, or away from a removed one), but a removed point's keys go to either
// neighbour, not always to the next node clockwise.
func TestRingContractNearest(t *testing.T) {
	checkContract(t, contract{name: "nearest ring", newPool: newRingPool(RingOptions{Lookup: RingNearest}), orderFree: true, minimal: true})
}

// Where points share positions, the nearest point in tie order keeps changes minimal too.
func TestRingContractNearestPoint(t *testing.T) {
	checkContract(t, contract{name: "nearest-point ring with ties", newPool: newRingPool(RingOptions{Hash: coarseHash, Vnodes: 40, Lookup: RingNearestPoint}),
		orderFree: true, minimal: true})
}

// The strictly-after rules move keys only to or from the changed node, as the successor rule
// does; the clamped one gives the top end to the largest point, not to the smallest.
func TestRingContractAfter(t *testing.T) {
	checkContract(t, contract{name: "after ring", newPool: newRingPool(RingOptions{Hash: coarseHash, Vnodes: 40, Lookup: RingAfter}),
		orderFree: true, minimal: true, nextOnRemove: true})
	checkContract(t, contract{name: "after-clamped ring", newPool: newRingPool(RingOptions{Hash: coarseHash, Vnodes: 40, Lookup: RingAfterClamped}),
		orderFree: true, minimal: true})
}

func FuzzRing(f *testing.F) {
	fuzzSeeds(f)
	c := contract{name: "ring", newPool: newRingPool(RingOptions{Hash: coarseHash, Vnodes: 8}), orderFree: true, minimal: true, nextOnRemove: true}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOps(t, c, data) })
}

// refRing is the obvious ring: every point of every member, sorted by position and by the tie
// rule, searched point by point.
type refRing struct {
	points []refPoint
	opts   RingOptions
	nodes  []Node
}

type refPoint struct {
	pos  uint64
	node string
	rank int
}

func newRefRing(nodes []Node, opts RingOptions) refRing {
	hash := refHash(opts)
	v := cmp.Or(opts.Vnodes, 160)
	byName := slices.Clone(nodes)
	slices.SortFunc(byName, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	r := refRing{opts: opts, nodes: nodes}
	if opts.Points != nil {
		for k, p := range opts.Points(nil, nodes) {
			rank := map[RingTies]int{TieFirstPoint: k, TieLastPoint: -k}[opts.Ties]
			if opts.Ties == TieSmallerName {
				rank = slices.Index(byName, nodes[p.Node])
			}
			r.points = append(r.points, refPoint{p.Pos, nodes[p.Node].Name, rank})
		}
	}
	for joined, n := range nodes {
		if opts.Points != nil {
			break
		}
		rank := map[RingTies]int{TieSmallerName: slices.Index(byName, n), TieFirstPoint: joined, TieLastPoint: -joined}[opts.Ties]
		for i := range n.Weight * v {
			name := n.Name + "-" + strconv.Itoa(i)
			if opts.PointName != nil {
				name = opts.PointName(n.Name, i)
			}
			r.points = append(r.points, refPoint{hash(name), n.Name, rank})
		}
	}
	slices.SortStableFunc(r.points, func(a, b refPoint) int { return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.rank, b.rank)) })
	return r
}

func refHash(opts RingOptions) func(string) uint64 {
	if opts.Hash == nil {
		return keyhash.XXH64
	}
	return opts.Hash
}

// owner returns the index of the point that owns h.
func (r refRing) owner(h uint64) int {
	next := 0
	for i, p := range r.points {
		if p.pos >= h {
			next = i
			break
		}
	}
	switch r.opts.Lookup {
	case RingSuccessor:
		return next
	case RingAfter, RingAfterClamped:
		for i, p := range r.points {
			if p.pos > h {
				return i
			}
		}
		if r.opts.Lookup == RingAfter {
			return 0
		}
		last := len(r.points) - 1 // the winner of the largest position: its first point
		for last > 0 && r.points[last-1].pos == r.points[last].pos {
			last--
		}
		return last
	case RingNearestPoint:
		prev := (next + len(r.points) - 1) % len(r.points)
		if h-r.points[prev].pos <= r.points[next].pos-h {
			return prev
		}
		return next
	}
	prev := -1 // the first point of the largest position below next's, around the circle
	for i, p := range r.points {
		if p.pos != r.points[next].pos && (prev < 0 || r.points[next].pos-p.pos < r.points[next].pos-r.points[prev].pos) {
			prev = i
		}
	}
	if prev < 0 {
		return next
	}
	for prev > 0 && r.points[prev-1].pos == r.points[prev].pos {
		prev--
	}
	if h-r.points[prev].pos <= r.points[next].pos-h {
		return prev
	}
	return next
}

func (r refRing) appendN(key string, n int) []string {
	var out []string
	if len(r.points) > 0 {
		start := r.owner(refHash(r.opts)(key))
		for k := range r.points {
			name := r.points[(start+k)%len(r.points)].node
			if len(out) < n && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	for _, node := range r.nodes { // members without points, in join order
		if len(out) < n && !slices.Contains(out, node.Name) {
			out = append(out, node.Name)
		}
	}
	return out
}

// checkRingAgainstRef compares Locate and AppendN of p with the reference of p's members.
func checkRingAgainstRef(t *testing.T, what string, p *Ring, opts RingOptions, keys []string) {
	t.Helper()
	ref := newRefRing(p.Nodes(), opts)
	members := len(p.Nodes())
	for _, k := range keys {
		all := ref.appendN(k, members)
		if got := p.Locate(k); got != all[0] {
			t.Fatalf("%s: Locate(%q) = %q, want %q", what, k, got, all[0])
		}
		for _, n := range []int{1, 3, members} {
			if got := p.AppendN(nil, k, n); !slices.Equal(got, all[:min(n, members)]) {
				t.Fatalf("%s: AppendN(%q, %d) = %q, want %q", what, k, n, got, all[:min(n, members)])
			}
		}
	}
}

// Every option, after every kind of change, places keys as the obvious ring of the members.
func TestRingCrossCheck(t *testing.T) {
	keys := testKeys(400)
	r := rand.New(rand.NewPCG(3, 33))
	for _, opts := range []RingOptions{
		{},
		{Hash: coarseHash, Vnodes: 20},
		{Hash: coarseHash, Vnodes: 20, Ties: TieFirstPoint},
		{Hash: coarseHash, Vnodes: 20, Ties: TieLastPoint},
		{Hash: coarseHash, Vnodes: 20, Lookup: RingNearest},
		{Hash: coarseHash, Vnodes: 20, Lookup: RingNearestPoint, Ties: TieFirstPoint},
		{Vnodes: 3, Lookup: RingNearest, PointName: func(node string, i int) string { return fmt.Sprint(i, "@", node) }},
		{Hash: coarseHash, Vnodes: 20, Lookup: RingAfter, Ties: TieLastPoint},
		{Hash: coarseHash, Vnodes: 20, Lookup: RingAfterClamped, Ties: TieLastPoint},
		{Vnodes: 5, Lookup: RingAfterClamped},
	} {
		what := fmt.Sprintf("%+v", opts)
		p, err := NewRing(numbered(30), opts) // more than 16 nodes: AppendN's walk uses its set
		require.NoError(t, err)
		checkRingAgainstRef(t, what+" new", p, opts, keys)
		for step := range 12 {
			nodes := p.Nodes()
			victim := nodes[r.IntN(len(nodes))].Name
			switch step % 3 {
			case 0:
				require.NoError(t, p.Add(Node{Name: fmt.Sprintf("add-%d", step), Weight: 1 + r.IntN(3)}))
			case 1:
				require.NoError(t, p.Remove(victim))
			case 2:
				require.NoError(t, p.SetWeight(victim, 1+r.IntN(4)))
			}
			checkRingAgainstRef(t, fmt.Sprintf("%s step %d", what, step), p, opts, keys[:100])
		}
	}
}

// The default point names, which other systems and the documentation rely on.
func TestRingPointNames(t *testing.T) {
	p, err := NewRing([]Node{{Name: "cache-a"}}, RingOptions{Vnodes: 2})
	require.NoError(t, err)
	tab := p.state.Load().table
	want := []uint64{keyhash.XXH64("cache-a-0"), keyhash.XXH64("cache-a-1")}
	slices.Sort(want)
	require.Equal(t, want, []uint64{tab.Position(0), tab.Position(1)})
	require.Equal(t, 2*160, func() int {
		p, _ := NewRing([]Node{{Name: "x", Weight: 2}}, RingOptions{})
		return p.state.Load().table.Len()
	}())
}

// ketamaLike gives each node points in proportion to its share of the total weight, so that
// its points depend on the whole membership, as ketama's do.
func ketamaLike(dst []RingPoint, nodes []Node) []RingPoint {
	total := 0
	for _, n := range nodes {
		total += n.Weight
	}
	for i, n := range nodes {
		count := 40 * len(nodes) * n.Weight / total
		for j := range count {
			dst = append(dst, RingPoint{Node: i, Pos: coarseHash(n.Name + "#" + strconv.Itoa(j))})
		}
	}
	return dst
}

func TestRingPointGenerator(t *testing.T) {
	keys := testKeys(300)
	for _, ties := range []RingTies{TieSmallerName, TieFirstPoint, TieLastPoint} {
		opts := RingOptions{Points: ketamaLike, Hash: coarseHash, Ties: ties}
		p, err := NewRing(numbered(12), opts)
		require.NoError(t, err)
		checkRingAgainstRef(t, "ketama-like", p, opts, keys)
		require.NoError(t, p.Add(Node{Name: "big", Weight: 5}))
		require.NoError(t, p.Remove("node-03"))
		require.NoError(t, p.SetWeight("node-07", 4))
		checkRingAgainstRef(t, "ketama-like after changes", p, opts, keys)
	}

	// A node the generator gives no point owns no key, and comes last in AppendN.
	opts := RingOptions{Points: ketamaLike}
	p, err := NewRing([]Node{{"light", 1}, {"heavy", 100}, {"heavier", 200}}, opts)
	require.NoError(t, err)
	for _, k := range keys {
		require.NotEqual(t, "light", p.Locate(k))
		require.Equal(t, "light", p.AppendN(nil, k, 3)[2])
	}
	checkRingAgainstRef(t, "pointless node", p, opts, keys)

	// A generator's bad output is refused, and the ring stays as it was.
	bad := func(f func([]RingPoint, []Node) []RingPoint) RingOptions { return RingOptions{Points: f} }
	for _, c := range []struct {
		opts RingOptions
		want error
	}{
		{bad(func(dst []RingPoint, nodes []Node) []RingPoint { return append(dst, RingPoint{Node: len(nodes)}) }), ErrNode},
		{bad(func(dst []RingPoint, nodes []Node) []RingPoint { return append(dst, RingPoint{Node: -1}) }), ErrNode},
		{bad(func(dst []RingPoint, _ []Node) []RingPoint { return dst }), ErrEmpty},
		{bad(func(dst []RingPoint, _ []Node) []RingPoint { return make([]RingPoint, ring.MaxPoints+1) }), ErrLimit},
	} {
		_, err := NewRing(numbered(2), c.opts)
		require.ErrorIs(t, err, c.want)
		require.True(t, strings.HasPrefix(err.Error(), "pool: ring: "), err.Error())
	}
	grows := func(dst []RingPoint, nodes []Node) []RingPoint {
		if len(nodes) > 2 {
			return make([]RingPoint, ring.MaxPoints+1)
		}
		return ketamaLike(dst, nodes)
	}
	p, err = NewRing(numbered(2), RingOptions{Points: grows})
	require.NoError(t, err)
	before := owners(p, keys)
	require.ErrorIs(t, p.Add(Node{Name: "third"}), ErrLimit)
	require.Equal(t, numbered(2), p.Nodes())
	require.Equal(t, before, owners(p, keys))
}

func TestRingLimits(t *testing.T) {
	for _, v := range []int{-1, math.MinInt, ring.MaxPoints + 1} {
		_, err := NewRing(numbered(2), RingOptions{Vnodes: v})
		require.ErrorIs(t, err, ErrLimit, "Vnodes %d", v)
	}
	_, err := NewRing(numbered(2), RingOptions{Lookup: 7})
	require.Error(t, err)
	_, err = NewRing([]Node{{Name: "a", Weight: MaxWeight}}, RingOptions{})
	require.ErrorIs(t, err, ErrLimit)
	require.EqualError(t, err, "pool: ring: 10485760 points or more: at most 4194304: pool too large")

	// A weight that fits alone but not with the others: refused, nothing changes.
	if quick() {
		return // builds a ring of 4M points
	}
	p, err := NewRing([]Node{{Name: "a", Weight: 10000}}, RingOptions{Vnodes: 400})
	require.NoError(t, err)
	require.ErrorIs(t, p.Add(Node{Name: "b", Weight: 1000}), ErrLimit)
	require.ErrorIs(t, p.SetWeight("a", 20000), ErrLimit)
	require.Equal(t, []Node{{"a", 10000}}, p.Nodes())
	require.Equal(t, 4_000_000, p.state.Load().table.Len())
}

// Raising a weight adds only that node's points and lowering it removes only its highest
// ones: the other points of the table stay as they are.
func TestRingSetWeightPoints(t *testing.T) {
	p, err := NewRing(numbered(5), RingOptions{Vnodes: 10})
	require.NoError(t, err)
	points := func() map[ring.Point]bool {
		tab := p.state.Load().table
		m := map[ring.Point]bool{}
		for i := range tab.Len() {
			m[ring.Point{Pos: tab.Position(i), Owner: tab.Owner(i)}] = true
		}
		return m
	}
	before := points()
	require.NoError(t, p.SetWeight("node-02", 7)) // was 3
	after := points()
	slot := p.slots["node-02"]
	added := 0
	for pt := range after {
		if !before[pt] {
			require.Equal(t, slot, pt.Owner)
			added++
		}
	}
	require.Equal(t, 40, added)
	require.NoError(t, p.SetWeight("node-02", 3))
	require.Equal(t, before, points())
}

// The placements of the default options and of the other rules, pinned.
func TestRingRegress(t *testing.T) {
	var b strings.Builder
	keys := testKeys(40)
	nodes := []Node{{"10.0.0.7:6379", 1}, {"cache-b", 2}, {"cache-c", 3}, {"日本", 1}, {"x", 4}}
	for _, c := range []struct {
		name string
		opts RingOptions
	}{{"default", RingOptions{}}, {"nearest", RingOptions{Lookup: RingNearest}}, {"vnodes7", RingOptions{Vnodes: 7}}} {
		p, err := NewRing(nodes, c.opts)
		require.NoError(t, err)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %.40q %q\n", c.name, k, p.AppendN(nil, k, 3))
		}
	}
	checkRegress(t, "pool-ring.txt", b.String())
}

// Arcs tile the positions in order, consecutive arcs differ, and every position of an arc
// belongs to its node by the reference ring, under every lookup and tie rule: at both ends,
// at every position, one either side of it and at the midpoints of the gaps (where the
// nearest rules change hands), and at random positions. Position is the ring's key hash.
func TestRingArcs(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 44))
	one := func(string) uint64 { return 1 << 40 } // every point at one position
	for _, c := range []struct {
		nodes int
		opts  RingOptions
	}{
		{5, RingOptions{}},
		{30, RingOptions{Hash: coarseHash, Vnodes: 20}},
		{30, RingOptions{Hash: coarseHash, Vnodes: 20, Ties: TieLastPoint}},
		{30, RingOptions{Hash: coarseHash, Vnodes: 20, Lookup: RingNearest}},
		{30, RingOptions{Hash: coarseHash, Vnodes: 20, Lookup: RingNearestPoint, Ties: TieFirstPoint}},
		{7, RingOptions{Vnodes: 10, Lookup: RingNearest}},
		{7, RingOptions{Vnodes: 10, Lookup: RingNearestPoint}},
		{1, RingOptions{Vnodes: 1, Lookup: RingNearest}},
		{3, RingOptions{Hash: one, Vnodes: 2, Lookup: RingNearestPoint, Ties: TieFirstPoint}},
		{3, RingOptions{Hash: one, Vnodes: 2, Lookup: RingNearest}},
		{30, RingOptions{Hash: coarseHash, Vnodes: 20, Lookup: RingAfter, Ties: TieLastPoint}},
		{30, RingOptions{Hash: coarseHash, Vnodes: 20, Lookup: RingAfterClamped, Ties: TieFirstPoint}},
		{7, RingOptions{Vnodes: 10, Lookup: RingAfterClamped}},
		{1, RingOptions{Vnodes: 1, Lookup: RingAfter}},
		{3, RingOptions{Hash: one, Vnodes: 2, Lookup: RingAfter, Ties: TieLastPoint}},
		{3, RingOptions{Hash: one, Vnodes: 2, Lookup: RingAfterClamped}},
	} {
		what := fmt.Sprintf("%d nodes %+v", c.nodes, c.opts)
		p, err := NewRing(numbered(c.nodes), c.opts)
		require.NoError(t, err)
		ref := newRefRing(p.Nodes(), c.opts)
		var arcs []Arc
		next := uint64(0)
		for a := range p.Arcs() {
			require.Equalf(t, next, a.First, "%s: arc %+v does not start where the last ended", what, a)
			require.LessOrEqual(t, a.First, a.Last)
			if len(arcs) > 0 {
				require.NotEqualf(t, arcs[len(arcs)-1].Node, a.Node, "%s: arcs not merged", what)
			}
			arcs = append(arcs, a)
			next = a.Last + 1
		}
		require.Equalf(t, uint64(math.MaxUint64), arcs[len(arcs)-1].Last, "%s: arcs end early", what)
		probes := []uint64{0, math.MaxUint64, 1 << 63}
		for i, pt := range ref.points {
			nxt := ref.points[(i+1)%len(ref.points)].pos
			mid := pt.pos + (nxt-pt.pos)/2
			probes = append(probes, pt.pos-1, pt.pos, pt.pos+1, mid, mid+1, pt.pos+1<<63, pt.pos+1<<63+1)
		}
		for range 2000 {
			probes = append(probes, r.Uint64())
		}
		for _, h := range probes {
			i, _ := slices.BinarySearchFunc(arcs, h, func(a Arc, h uint64) int { return cmp.Compare(a.Last, h) })
			require.Truef(t, arcs[i].First <= h && h <= arcs[i].Last, "%s: no arc holds %#x", what, h)
			require.Equalf(t, ref.points[ref.owner(h)].node, arcs[i].Node, "%s: arc %+v at %#x", what, arcs[i], h)
		}
		for _, k := range testKeys(100) {
			require.Equal(t, refHash(c.opts)(k), p.Position(k))
		}
	}
	var zero Ring
	require.Empty(t, slices.Collect(zero.Arcs()))
	require.Zero(t, zero.Position("user:1"))
}
