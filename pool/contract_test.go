package pool

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file holds the checks every Pool must pass, so that each strategy's test states only
// what is its own: its reference, its vectors and which movement guarantees it makes.

// contract says which guarantees a strategy makes beyond the common ones.
type contract struct {
	name    string
	newPool func(nodes []Node) (Pool, error)
	// orderFree: placement depends only on the membership (names and weights), never on the
	// order nodes joined or on past changes, so after any changes a pool places every key as
	// a new pool of its Nodes() does, in any order.
	orderFree bool
	// minimal: adding or removing any node moves only keys to or from that node; raising a
	// weight moves keys only to that node, lowering it only from that node.
	minimal bool
	// nextOnRemove: after Remove(owner), a key's new owner is the second node that AppendN
	// gave it before.
	nextOnRemove bool
}

// quick reports whether a test should run its smaller case: with -short, and under the race
// detector, whose slowdown buys nothing in single-goroutine arithmetic.
func quick() bool { return testing.Short() || raceEnabled }

// testKeys returns count random keys, the same ones on every run, and a few adversarial ones.
func testKeys(count int) []string {
	r := rand.New(rand.NewPCG(9, 99))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:"
	keys := []string{"", "\x00", "\xff\xfe", "日本語", "{tag}", strings.Repeat("k", 1<<12)}
	b := make([]byte, 16)
	for len(keys) < count {
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	return keys
}

// nodesNamed returns nodes with the given names and weights 1, 2, 3, 1, 2, 3, ...
func nodesNamed(names ...string) []Node {
	nodes := make([]Node, len(names))
	for i, name := range names {
		nodes[i] = Node{Name: name, Weight: 1 + i%3}
	}
	return nodes
}

// numbered returns n nodes "node-00", "node-01", ... with weights 1, 2, 3, 1, ...
func numbered(n int) []Node {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%02d", i)
	}
	return nodesNamed(names...)
}

// owners returns Locate of every key.
func owners(p Pool, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.Locate(k)
	}
	return out
}

// seconds returns the second node of AppendN of every key ("" for a one-node pool).
func seconds(p Pool, keys []string) []string {
	out := make([]string, len(keys))
	var buf [2]string
	for i, k := range keys {
		if got := p.AppendN(buf[:0], k, 2); len(got) == 2 {
			out[i] = got[1]
		}
	}
	return out
}

func checkContract(t *testing.T, c contract) {
	t.Helper()
	nkeys := 100_000
	if quick() {
		nkeys = 10_000
	}
	keys := testKeys(nkeys)

	t.Run("bad input", func(t *testing.T) { checkBadInput(t, c, keys[:2000]) })
	t.Run("lookups", func(t *testing.T) { checkLookups(t, c, keys[:5000]) })
	t.Run("no allocations", func(t *testing.T) {
		p, err := c.newPool(numbered(20))
		require.NoError(t, err)
		dst := make([]string, 0, 3)
		for _, k := range []string{"", "user:1000", strings.Repeat("x", 4096)} {
			require.Zerof(t, testing.AllocsPerRun(100, func() { _ = p.Locate(k) }), "%s: Locate(%.20q) allocates", c.name, k)
			require.Zerof(t, testing.AllocsPerRun(100, func() { dst = p.AppendN(dst[:0], k, 3) }), "%s: AppendN(%.20q, 3) allocates", c.name, k)
		}
	})
	t.Run("movement", func(t *testing.T) { checkMovement(t, c, keys) })
	t.Run("history", func(t *testing.T) { checkHistory(t, c, keys[:5000]) })
	t.Run("concurrent changes", func(t *testing.T) { checkConcurrent(t, c, keys[:200]) })
}

func checkBadInput(t *testing.T, c contract, keys []string) {
	for _, tc := range []struct {
		nodes []Node
		want  error
	}{
		{nil, ErrEmpty},
		{[]Node{}, ErrEmpty},
		{[]Node{{Name: ""}}, ErrNode},
		{[]Node{{Name: "a"}, {Name: "b"}, {Name: "a", Weight: 2}}, ErrNode},
		{[]Node{{Name: "a", Weight: -1}}, ErrWeight},
		{[]Node{{Name: "a", Weight: MaxWeight + 1}}, ErrWeight},
		{[]Node{{Name: "a", Weight: math.MinInt}}, ErrWeight},
	} {
		_, err := c.newPool(tc.nodes)
		require.ErrorIsf(t, err, tc.want, "%s(%v)", c.name, tc.nodes)
		assert.Truef(t, strings.HasPrefix(err.Error(), "pool: "), "error %q lacks the package prefix", err)
	}

	nodes := numbered(5)
	p, err := c.newPool(nodes)
	require.NoError(t, err)
	before := owners(p, keys)
	unchanged := func(what string) {
		t.Helper()
		require.Equalf(t, nodes, p.Nodes(), "%s: %s changed the members", c.name, what)
		require.Equalf(t, before, owners(p, keys), "%s: %s changed the placement", c.name, what)
	}
	for _, tc := range []struct {
		what string
		err  error
		want error
	}{
		{"Add of a duplicate after a good node", p.Add(Node{Name: "new"}, Node{Name: "node-02"}), ErrNode},
		{"Add of a node twice", p.Add(Node{Name: "new"}, Node{Name: "new"}), ErrNode},
		{"Add of an empty name", p.Add(Node{Name: ""}), ErrNode},
		{"Add of a negative weight", p.Add(Node{Name: "new", Weight: -3}), ErrWeight},
		{"Add of too large a weight", p.Add(Node{Name: "new", Weight: MaxWeight + 1}), ErrWeight},
		{"Remove of an unknown node", p.Remove("node-01", "nope"), ErrNode},
		{"Remove of a node twice", p.Remove("node-01", "node-01"), ErrNode},
		{"Remove of every node", p.Remove("node-00", "node-01", "node-02", "node-03", "node-04"), ErrEmpty},
		{"SetWeight of an unknown node", p.SetWeight("nope", 2), ErrNode},
		{"SetWeight out of range", p.SetWeight("node-01", MaxWeight+1), ErrWeight},
		{"SetWeight negative", p.SetWeight("node-01", -1), ErrWeight},
	} {
		require.ErrorIsf(t, tc.err, tc.want, "%s: %s", c.name, tc.what)
		assert.Truef(t, strings.HasPrefix(tc.err.Error(), "pool: "), "error %q lacks the package prefix", tc.err)
		unchanged(tc.what)
	}
	require.NoError(t, p.Add(), "Add of nothing")
	require.NoError(t, p.Remove(), "Remove of nothing")
	unchanged("Add() and Remove()")

	// Nodes returns a copy, and weight 0 means 1.
	got := p.Nodes()
	got[0].Name = "changed"
	unchanged("changing the slice Nodes returned")
	q, err := c.newPool([]Node{{Name: "a"}, {Name: "b", Weight: 0}, {Name: "c", Weight: 1}})
	require.NoError(t, err)
	require.Equal(t, []Node{{"a", 1}, {"b", 1}, {"c", 1}}, q.Nodes())
}

func checkLookups(t *testing.T, c contract, keys []string) {
	for _, size := range []int{1, 2, 5, 37} {
		nodes := numbered(size)
		a, err := c.newPool(nodes)
		require.NoError(t, err)
		b, err := c.newPool(nodes)
		require.NoError(t, err)
		var shuffled Pool
		if c.orderFree {
			perm := slices.Clone(nodes)
			rand.New(rand.NewPCG(uint64(size), 1)).Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			shuffled, err = c.newPool(perm)
			require.NoError(t, err)
		}
		member := make(map[string]bool)
		for _, n := range nodes {
			member[n.Name] = true
		}
		prefix := []string{"kept"}
		for _, k := range keys {
			owner := a.Locate(k)
			if !member[owner] {
				t.Fatalf("%s(%d nodes).Locate(%.40q) = %q, not a member", c.name, size, k, owner)
			}
			if again, other := a.Locate(k), b.Locate(k); again != owner || other != owner {
				t.Fatalf("%s(%d nodes).Locate(%.40q) = %q, then %q, and %q on a second pool", c.name, size, k, owner, again, other)
			}
			if shuffled != nil && shuffled.Locate(k) != owner {
				t.Fatalf("%s(%d nodes).Locate(%.40q) = %q, but %q when the nodes joined in another order", c.name, size, k, owner, shuffled.Locate(k))
			}
			for _, n := range []int{math.MinInt, -1, 0, 1, 2, 3, size, size + 5} {
				got := a.AppendN(prefix, k, n)
				want := min(max(n, 0), size)
				if len(got) != 1+want || got[0] != "kept" {
					t.Fatalf("%s(%d nodes).AppendN([kept], %.40q, %d) = %q, want kept and %d nodes", c.name, size, k, n, got, want)
				}
				got = got[1:]
				if want > 0 && got[0] != owner {
					t.Fatalf("%s(%d nodes).AppendN(%.40q, %d) = %q, want the owner %q first", c.name, size, k, n, got, owner)
				}
				seen := make(map[string]bool, len(got))
				for _, name := range got {
					if !member[name] || seen[name] {
						t.Fatalf("%s(%d nodes).AppendN(%.40q, %d) = %q: not distinct members", c.name, size, k, n, got)
					}
					seen[name] = true
				}
				if other := b.AppendN(nil, k, n); !slices.Equal(got, other) {
					t.Fatalf("%s(%d nodes).AppendN(%.40q, %d) = %q, and %q on a second pool", c.name, size, k, n, got, other)
				}
			}
		}
	}
}

// checkMovement changes a pool of ten nodes at its first, a middle and its last node, in
// join order and in name order, and checks which keys moved (see movement).
func checkMovement(t *testing.T, c contract, keys []string) {
	report, err := movement(c, keys)
	for _, line := range report {
		t.Log(line)
	}
	require.NoError(t, err)
}

// movement makes each change of checkMovement to a new pool and returns what share of the
// keys moved, and, for a minimal strategy, an error naming the first key that moved where it
// should not have.
func movement(c contract, keys []string) (report []string, err error) {
	base := numbered(10)
	change := func(what string, apply func(p Pool) error, allowed func(before, after, second string) bool) error {
		p, err := c.newPool(base)
		if err != nil {
			return err
		}
		before, second := owners(p, keys), seconds(p, keys)
		if err := apply(p); err != nil {
			return fmt.Errorf("%s: %s: %w", c.name, what, err)
		}
		after := owners(p, keys)
		moved := 0
		for i, k := range keys {
			if before[i] == after[i] {
				continue
			}
			moved++
			if c.minimal && !allowed(before[i], after[i], second[i]) {
				return fmt.Errorf("%s: %s moved %.40q from %q to %q", c.name, what, k, before[i], after[i])
			}
		}
		report = append(report, fmt.Sprintf("%s: %s moved %.2f%% of the keys", c.name, what, 100*float64(moved)/float64(len(keys))))
		return nil
	}
	for _, name := range []string{"a-first", "node-04x", "zz-last"} {
		if err := change("Add("+name+")", func(p Pool) error { return p.Add(Node{Name: name, Weight: 2}) },
			func(_, after, _ string) bool { return after == name }); err != nil {
			return report, err
		}
	}
	for _, name := range []string{"node-00", "node-05", "node-09"} {
		if err := change("Remove("+name+")", func(p Pool) error { return p.Remove(name) },
			func(before, after, second string) bool {
				return before == name && (!c.nextOnRemove || after == second)
			}); err != nil {
			return report, err
		}
	}
	for _, tc := range []struct {
		what    string
		name    string
		weight  int
		allowed func(before, after, second string) bool
	}{
		{"SetWeight(node-04, 2 -> 4)", "node-04", 4, func(_, after, _ string) bool { return after == "node-04" }},
		{"SetWeight(node-05, 3 -> 1)", "node-05", 1, func(before, _, _ string) bool { return before == "node-05" }},
		{"SetWeight(node-05, 3 -> 3)", "node-05", 3, func(_, _, _ string) bool { return false }},
	} {
		if err := change(tc.what, func(p Pool) error { return p.SetWeight(tc.name, tc.weight) }, tc.allowed); err != nil {
			return report, err
		}
	}
	return report, nil
}

// checkHistory applies random changes and checks the members after each, and, for
// order-free strategies, that the placement equals that of a new pool of the members.
func checkHistory(t *testing.T, c contract, keys []string) {
	r := rand.New(rand.NewPCG(5, 55))
	p, err := c.newPool(numbered(4))
	require.NoError(t, err)
	model := numbered(4)
	steps := 60
	if quick() {
		steps = 20
	}
	for step := range steps {
		name := fmt.Sprintf("h-%d", r.IntN(12))
		i := slices.IndexFunc(model, func(n Node) bool { return n.Name == name })
		switch op := r.IntN(3); {
		case op == 0 && i < 0:
			w := r.IntN(4)
			require.NoError(t, p.Add(Node{Name: name, Weight: w}))
			model = append(model, Node{Name: name, Weight: max(w, 1)})
		case op == 1 && i >= 0 && len(model) > 1:
			require.NoError(t, p.Remove(name))
			model = slices.Delete(model, i, i+1)
		case op == 2 && i >= 0:
			w := 1 + r.IntN(4)
			require.NoError(t, p.SetWeight(name, w))
			model[i].Weight = w
		default:
			continue
		}
		require.Equalf(t, model, p.Nodes(), "%s: members after step %d", c.name, step)
		if c.orderFree {
			fresh, err := c.newPool(model)
			require.NoError(t, err)
			require.Equalf(t, owners(fresh, keys), owners(p, keys), "%s: after step %d the placement differs from a new pool of the same members", c.name, step)
		}
	}
}

// checkConcurrent looks keys up while another goroutine adds and removes a node: every
// lookup must give the answer of the pool with or without it, never a mix.
func checkConcurrent(t *testing.T, c contract, keys []string) {
	p, err := c.newPool(numbered(8))
	require.NoError(t, err)
	extra := Node{Name: "extra", Weight: 3}
	snapshot := func() ([]string, [][]string) {
		n := make([][]string, len(keys))
		for i, k := range keys {
			n[i] = p.AppendN(nil, k, 3)
		}
		return owners(p, keys), n
	}
	ownA, nA := snapshot()
	require.NoError(t, p.Add(extra))
	ownB, nB := snapshot()
	require.NoError(t, p.Remove(extra.Name))
	ownA2, _ := snapshot()
	require.Equal(t, ownA, ownA2, "%s: adding and removing a node does not restore the placement", c.name)

	const readers = 4
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		errs = make(chan error, readers)
	)
	for g := range readers {
		wg.Go(func() {
			dst := make([]string, 0, 3)
			for i := g; !stop.Load(); i++ {
				j := i % len(keys)
				if got := p.Locate(keys[j]); got != ownA[j] && got != ownB[j] {
					errs <- fmt.Errorf("Locate(%q) = %q during changes, want %q or %q", keys[j], got, ownA[j], ownB[j])
					return
				}
				if dst = p.AppendN(dst[:0], keys[j], 3); !slices.Equal(dst, nA[j]) && !slices.Equal(dst, nB[j]) {
					errs <- fmt.Errorf("AppendN(%q, 3) = %q during changes, want %q or %q", keys[j], dst, nA[j], nB[j])
					return
				}
				runtime.Gosched() // let the writer run on two cores
			}
		})
	}
	changes := 100
	if raceEnabled {
		changes = 20
	}
	for range changes {
		require.NoError(t, p.Add(extra))
		runtime.Gosched()
		require.NoError(t, p.Remove(extra.Name))
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// fuzzOps interprets data as a sequence of changes and checks each against a model of the
// membership: a change must fail exactly when the model says it is invalid, with the right
// sentinel, and leave the members as the model has them; order-free strategies must then
// place keys as a new pool of the members does.
func fuzzOps(t *testing.T, c contract, data []byte) {
	p, err := c.newPool([]Node{{Name: "n0"}})
	require.NoError(t, err)
	model := []Node{{Name: "n0", Weight: 1}}
	keys := testKeys(64)
	for len(data) >= 2 {
		op, arg := data[0], data[1]
		data = data[2:]
		name := fmt.Sprintf("n%d", arg%8)
		i := slices.IndexFunc(model, func(n Node) bool { return n.Name == name })
		weight := int(op>>2) - 4 // some negative, mostly small, 0 included
		if op>>2 == 63 {
			weight = MaxWeight + 1
		}
		var err, want error
		switch op % 3 {
		case 0:
			err = p.Add(Node{Name: name, Weight: weight})
			switch {
			case i >= 0:
				want = ErrNode
			case weight < 0 || weight > MaxWeight:
				want = ErrWeight
			default:
				model = append(model, Node{Name: name, Weight: max(weight, 1)})
			}
		case 1:
			err = p.Remove(name)
			switch {
			case i < 0:
				want = ErrNode
			case len(model) == 1:
				want = ErrEmpty
			default:
				model = slices.Delete(model, i, i+1)
			}
		case 2:
			err = p.SetWeight(name, weight)
			switch {
			case i < 0:
				want = ErrNode
			case weight < 0 || weight > MaxWeight:
				want = ErrWeight
			default:
				model[i].Weight = max(weight, 1)
			}
		}
		if want == nil {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, want)
		}
		require.Equal(t, model, p.Nodes())
	}
	if c.orderFree {
		fresh, err := c.newPool(model)
		require.NoError(t, err)
		require.Equal(t, owners(fresh, keys), owners(p, keys), "placement differs from a new pool of the same members")
	}
}

// fuzzSeeds adds seed inputs for fuzzOps: each adds, reweights and removes.
func fuzzSeeds(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 2, 1, 1, 1})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 1, 0, 1, 2, 0, 0})
	f.Add([]byte{252, 1, 0, 1, 254, 1, 2, 1, 1, 1, 1, 0})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 1, 3, 1, 4, 1, 5})
}

// checkShares checks that every node's share of the keys is within tol (relative) of its
// weight's share of the total weight.
func checkShares(t *testing.T, p Pool, keys []string, tol float64) {
	t.Helper()
	count := make(map[string]int)
	for _, k := range keys {
		count[p.Locate(k)]++
	}
	total := 0
	for _, n := range p.Nodes() {
		total += n.Weight
	}
	worst := 0.0
	for _, n := range p.Nodes() {
		want := float64(n.Weight) / float64(total)
		got := float64(count[n.Name]) / float64(len(keys))
		worst = max(worst, math.Abs(got-want)/want)
		assert.InEpsilonf(t, want, got, tol, "node %q of weight %d", n.Name, n.Weight)
	}
	t.Logf("%d nodes, %d keys: worst share %.2f%% off its weight", len(p.Nodes()), len(keys), 100*worst)
}

// shareTolerance returns a tolerance for checkShares of p over count random keys: 2%, or 4
// standard deviations of the lightest node's sampled share if that is more. A node expecting
// 4000 of 1M keys (weight 1 of 250) has a standard deviation of 1.6% by chance alone, so 1M
// keys can check 2% over 10 nodes of weights 1 to 4 but not over 100.
func shareTolerance(p Pool, count int) float64 {
	total, lightest := 0, MaxWeight
	for _, n := range p.Nodes() {
		total += n.Weight
		lightest = min(lightest, n.Weight)
	}
	share := float64(lightest) / float64(total)
	return max(0.02, 4*math.Sqrt((1-share)/(share*float64(count))))
}

// weightCases returns the keys and the pools of the weights tests: 10 and 100 nodes of
// weights 1, 2, 3, 4, 1, 2, ..., and 1M keys (100k in quick runs).
func weightCases() (keys []string, pools [][]Node) {
	count := 1_000_000
	if quick() {
		count = 100_000
	}
	for _, size := range []int{10, 100} {
		nodes := make([]Node, size)
		for i := range nodes {
			nodes[i] = Node{Name: fmt.Sprintf("w-%03d", i), Weight: 1 + i%4}
		}
		pools = append(pools, nodes)
	}
	return testKeys(count), pools
}

// shareErrors returns how far above and how far below its weight's share, relative to it,
// the share of keys of the node most above and of the node most below is; share gives a
// node's share by name.
func shareErrors(nodes []Node, share map[string]float64) (over, under float64) {
	total := 0
	for _, n := range nodes {
		total += n.Weight
	}
	for _, n := range nodes {
		ratio := share[n.Name] / (float64(n.Weight) / float64(total))
		over, under = max(over, ratio-1), max(under, 1-ratio)
	}
	return over, under
}

// refPool is the slow, obvious weighted rendezvous: for every key it scores every member
// with -weight/ln(u), u uniform in (0, 1) from a hash of the name and the key, and ranks the
// members by score. It rebuilds nothing and locks everything, which makes it a reference
// for the strategies' tests and a subject for the contract's own tests.
type refPool struct {
	mu sync.Mutex
	m  *members
}

func newRefPool(nodes []Node) (Pool, error) {
	m, err := newMembers("reference", nodes)
	if err != nil {
		return nil, err
	}
	return &refPool{m: m}, nil
}

func (p *refPool) ranked(key string) []string {
	p.mu.Lock()
	nodes := p.m.nodes
	p.mu.Unlock()
	score := func(n Node) float64 {
		u := (float64(xxhash.Sum64String(n.Name+"\x00"+key)>>11) + 0.5) / (1 << 53)
		return -float64(n.Weight) / math.Log(u)
	}
	ranked := slices.Clone(nodes)
	slices.SortFunc(ranked, func(a, b Node) int { return -cmpFloat(score(a), score(b)) })
	names := make([]string, len(ranked))
	for i, n := range ranked {
		names[i] = n.Name
	}
	return names
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (p *refPool) Locate(key string) string { return p.ranked(key)[0] }
func (p *refPool) AppendN(dst []string, key string, n int) []string {
	r := p.ranked(key)
	return append(dst, r[:min(max(n, 0), len(r))]...)
}
func (p *refPool) change(f func(m *members) (*members, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, err := f(p.m)
	if err == nil {
		p.m = next
	}
	return err
}
func (p *refPool) Add(nodes ...Node) error {
	return p.change(func(m *members) (*members, error) { return m.add("reference", nodes) })
}
func (p *refPool) Remove(names ...string) error {
	return p.change(func(m *members) (*members, error) { return m.remove("reference", names) })
}
func (p *refPool) SetWeight(name string, w int) error {
	return p.change(func(m *members) (*members, error) { return m.setWeight("reference", name, w) })
}
func (p *refPool) Nodes() []Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.copyNodes()
}

var refContract = contract{name: "reference", newPool: newRefPool, orderFree: true, minimal: true, nextOnRemove: true}

// The reference passes the contract, except that it allocates, which is why it is no
// strategy; and a reference that reshuffles on every change fails it, so the contract can fail.
func TestContractOnReference(t *testing.T) {
	keys := testKeys(3000)
	t.Run("bad input", func(t *testing.T) { checkBadInput(t, refContract, keys[:500]) })
	t.Run("lookups", func(t *testing.T) { checkLookups(t, refContract, keys[:300]) })
	t.Run("movement", func(t *testing.T) { checkMovement(t, refContract, keys) })
	t.Run("history", func(t *testing.T) { checkHistory(t, refContract, keys[:300]) })
	t.Run("concurrent changes", func(t *testing.T) { checkConcurrent(t, refContract, keys[:50]) })
	t.Run("shares", func(t *testing.T) {
		p, err := newRefPool([]Node{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}})
		require.NoError(t, err)
		checkShares(t, p, keys, 0.12)
	})
	t.Run("a reshuffling pool fails", func(t *testing.T) {
		_, err := movement(contract{name: "reshuffling", newPool: newReshuffling, minimal: true}, keys[:500])
		require.Error(t, err, "the movement check passed a pool that reshuffles on every change")
	})
}

func FuzzContractOnReference(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOps(t, refContract, data) })
}

// reshuffling is a pool that places keys by the hash modulo the member count: every change
// moves most keys.
type reshuffling struct{ *refPool }

func newReshuffling(nodes []Node) (Pool, error) {
	p, err := newRefPool(nodes)
	if err != nil {
		return nil, err
	}
	return reshuffling{p.(*refPool)}, nil
}

func (p reshuffling) Locate(key string) string {
	nodes := p.Nodes()
	return nodes[xxhash.Sum64String(key)%uint64(len(nodes))].Name
}
