package pool

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/keyhash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var mementoContract = contract{
	name:         "memento",
	newPool:      func(nodes []Node) (Pool, error) { return NewMemento(nodes) },
	minimal:      true,
	nextOnRemove: true,
}

func TestMementoContract(t *testing.T) { checkContract(t, mementoContract) }

func FuzzMementoOps(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOps(t, mementoContract, data) })
}

// refMemento is the slow, obvious MementoHash: it keeps the working buckets in an array as
// the algorithm sees them (a removal moves the last one into the removed one's place) and a
// copy of that array after every recorded removal. A key of a removed bucket b draws a new
// place in the copy made when b was removed, until it finds a bucket still working. It
// shares with Memento only the hash it draws with, mementoRehash, and takes jump from
// package shard.
type refMemento struct {
	n       int            // buckets in use, working or removed
	work    []int          // the working buckets, in the algorithm's order
	stack   []int          // recorded removals, oldest first
	before  map[int][]int  // work before b's removal, to restore it
	after   map[int][]int  // work after b's removal, to draw from
	owner   map[int]string // working bucket -> node
	members []Node         // in join order
}

func newRefMemento(nodes []Node) *refMemento {
	r := &refMemento{before: map[int][]int{}, after: map[int][]int{}, owner: map[int]string{}}
	for _, n := range nodes {
		r.add(n)
	}
	return r
}

func (r *refMemento) clone() *refMemento {
	c := &refMemento{n: r.n, work: slices.Clone(r.work), stack: slices.Clone(r.stack),
		before: map[int][]int{}, after: map[int][]int{}, owner: map[int]string{}, members: slices.Clone(r.members)}
	for b, w := range r.before {
		c.before[b] = w
	}
	for b, w := range r.after {
		c.after[b] = w
	}
	for b, o := range r.owner {
		c.owner[b] = o
	}
	return c
}

func (r *refMemento) addBuckets(name string, count int) {
	for range count {
		if k := len(r.stack); k > 0 {
			b := r.stack[k-1]
			r.stack = r.stack[:k-1]
			r.work = r.before[b]
			delete(r.before, b)
			delete(r.after, b)
			r.owner[b] = name
			continue
		}
		r.work = append(slices.Clone(r.work), r.n)
		r.owner[r.n] = name
		r.n++
	}
}

// removeBuckets removes count of name's buckets, highest first.
func (r *refMemento) removeBuckets(name string, count int) {
	var held []int
	for b, o := range r.owner {
		if o == name {
			held = append(held, b)
		}
	}
	slices.Sort(held)
	slices.Reverse(held)
	for _, b := range held[:count] {
		delete(r.owner, b)
		last := len(r.work) - 1
		if len(r.stack) == 0 && b == r.n-1 {
			if r.work[last] != b {
				panic("reference: the last bucket is not last in the array")
			}
			r.work = slices.Clone(r.work[:last])
			r.n--
			continue
		}
		r.before[b] = r.work
		work := slices.Clone(r.work)
		work[slices.Index(work, b)] = work[last]
		r.work = work[:last]
		r.after[b] = r.work
		r.stack = append(r.stack, b)
	}
}

func (r *refMemento) add(n Node) {
	n.Weight = max(n.Weight, 1)
	r.members = append(r.members, n)
	r.addBuckets(n.Name, n.Weight)
}

func (r *refMemento) remove(name string) {
	i := slices.IndexFunc(r.members, func(n Node) bool { return n.Name == name })
	r.removeBuckets(name, r.members[i].Weight)
	r.members = slices.Delete(r.members, i, i+1)
}

func (r *refMemento) setWeight(name string, w int) {
	w = max(w, 1)
	i := slices.IndexFunc(r.members, func(n Node) bool { return n.Name == name })
	if old := r.members[i].Weight; w > old {
		r.addBuckets(name, w-old)
	} else {
		r.removeBuckets(name, old-w)
	}
	r.members[i].Weight = w
}

func (r *refMemento) locate(key string) string {
	h := keyhash.XXH64(key)
	b := shard.JumpHash(h, r.n)
	for {
		work, removed := r.after[b]
		if !removed {
			return r.owner[b]
		}
		b = work[mementoRehash(h, int32(b), int32(len(work)))]
	}
}

// appendN removes the owner, then the next owner, from a copy, as AppendN promises.
func (r *refMemento) appendN(key string, n int) []string {
	var out []string
	c := r
	for len(out) < min(n, len(r.members)) {
		owner := c.locate(key)
		out = append(out, owner)
		if len(out) < n && len(c.members) > 1 {
			c = c.clone()
			c.remove(owner)
		}
	}
	return out
}

// mementoOp applies one random change to the pool and the reference: add, remove or
// reweight a node among a few names, weights 1 to 4 (0 now and then).
func mementoOp(t *testing.T, r *rand.Rand, p *Memento, ref *refMemento) string {
	name := fmt.Sprintf("n%d", r.IntN(10))
	i := slices.IndexFunc(ref.members, func(n Node) bool { return n.Name == name })
	w := r.IntN(5)
	switch op := r.IntN(3); {
	case i < 0:
		require.NoError(t, p.Add(Node{Name: name, Weight: w}))
		ref.add(Node{Name: name, Weight: w})
		return fmt.Sprintf("Add(%s, %d)", name, w)
	case op == 0 && len(ref.members) > 1:
		require.NoError(t, p.Remove(name))
		ref.remove(name)
		return "Remove(" + name + ")"
	default:
		require.NoError(t, p.SetWeight(name, w))
		ref.setWeight(name, w)
		return fmt.Sprintf("SetWeight(%s, %d)", name, w)
	}
}

// Random histories against the reference: every key's owner and replicas after every change.
func TestMementoAgainstReference(t *testing.T) {
	histories, steps, keys := 60, 40, testKeys(300)
	if quick() {
		histories, keys = 15, keys[:100]
	}
	for h := range histories {
		r := rand.New(rand.NewPCG(uint64(h), 7))
		nodes := []Node{{Name: "n0", Weight: 1 + r.IntN(3)}, {Name: "n1"}}
		p, err := NewMemento(nodes)
		require.NoError(t, err)
		ref := newRefMemento(nodes)
		var history []string
		for range steps {
			history = append(history, mementoOp(t, r, p, ref))
			require.Equal(t, ref.members, p.Nodes())
			for _, k := range keys {
				if got, want := p.Locate(k), ref.locate(k); got != want {
					t.Fatalf("after %s: Locate(%q) = %q, reference %q", strings.Join(history, ", "), k, got, want)
				}
			}
			for _, k := range keys[:20] {
				require.Equalf(t, ref.appendN(k, 4), p.AppendN(nil, k, 4), "after %s: AppendN(%q, 4)", strings.Join(history, ", "), k)
			}
		}
	}
}

func FuzzMementoAgainstReference(f *testing.F) {
	f.Add(uint64(1), uint8(30))
	f.Add(uint64(99), uint8(200))
	keys := testKeys(64)
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		r := rand.New(rand.NewPCG(seed, 8))
		nodes := []Node{{Name: "n0", Weight: 1 + r.IntN(4)}}
		p, err := NewMemento(nodes)
		require.NoError(t, err)
		ref := newRefMemento(nodes)
		for range steps {
			op := mementoOp(t, r, p, ref)
			for _, k := range keys {
				require.Equalf(t, ref.locate(k), p.Locate(k), "after %s: Locate(%q)", op, k)
			}
			require.Equal(t, ref.appendN(keys[0], 3), p.AppendN(nil, keys[0], 3), "after %s", op)
		}
	})
}

// With nothing removed from the middle, Memento places as shard.Jump with the nodes as its
// shards in join order; dropping the last nodes keeps it so, as Jump's Resize does.
func TestMementoIsJump(t *testing.T) {
	keys := testKeys(20_000)
	sizes := []int{1, 2, 3, 5, 10, 37, 100, 1000, 10_000}
	if quick() {
		keys, sizes = keys[:2000], sizes[:8]
	}
	for _, size := range sizes {
		nodes := make([]Node, size)
		for i := range nodes {
			nodes[i] = Node{Name: "node-" + strconv.Itoa(i)}
		}
		p, err := NewMemento(nodes)
		require.NoError(t, err)
		same := func(n int) {
			t.Helper()
			j, err := shard.NewJump(n)
			require.NoError(t, err)
			for _, k := range keys {
				if got, want := p.Locate(k), nodes[j.Locate(k)].Name; got != want {
					t.Fatalf("%d nodes of %d left: Locate(%q) = %q, shard.Jump gives %q", n, size, k, got, want)
				}
			}
		}
		same(size)
		if size > 2 {
			require.NoError(t, p.Remove(nodes[size-1].Name, nodes[size-2].Name))
			same(size - 2)
			require.NoError(t, p.Add(Node{Name: "again"}))
			nodes[size-2].Name = "again"
			same(size - 1)
		}
	}

	// Weights: node i holds the next Weight buckets of one jump.
	nodes := []Node{{"a", 3}, {"b", 1}, {"c", 2}}
	p, err := NewMemento(nodes)
	require.NoError(t, err)
	bucketOwner := []string{"a", "a", "a", "b", "c", "c"}
	for _, k := range keys[:2000] {
		require.Equal(t, bucketOwner[shard.JumpHash(keyhash.XXH64(k), 6)], p.Locate(k), "Locate(%q)", k)
	}
}

func TestMementoLimits(t *testing.T) {
	heavy := make([]Node, MaxMementoBuckets/MaxWeight)
	for i := range heavy {
		heavy[i] = Node{Name: "h" + strconv.Itoa(i), Weight: MaxWeight}
	}
	_, err := NewMemento(append(heavy, Node{Name: "over"}))
	require.ErrorIs(t, err, ErrLimit)
	if quick() {
		return // the rest builds the largest pool, 48 MB, several times
	}
	p, err := NewMemento(heavy)
	require.NoError(t, err, "exactly MaxMementoBuckets buckets fit")
	require.ErrorIs(t, p.Add(Node{Name: "one more"}), ErrLimit)
	require.NoError(t, p.SetWeight("h0", 1))
	require.ErrorIs(t, p.Add(Node{Name: "x", Weight: MaxWeight}), ErrLimit)
	require.NoError(t, p.Add(Node{Name: "x", Weight: MaxWeight - 1}), "the removed buckets are given back first")
	require.ErrorIs(t, p.SetWeight("x", MaxWeight), ErrLimit)
}

// Every node's share of the keys is its share of the buckets (jump is even), whatever the
// history; the figures go to docs/measurements.md.
func TestMementoWeights(t *testing.T) {
	keys, pools := weightCases()
	for _, nodes := range pools {
		p, err := NewMemento(nodes)
		require.NoError(t, err)
		checkShares(t, p, keys, shareTolerance(p, len(keys)))
		// Remove a middle node and check again: the chain spreads its keys evenly.
		require.NoError(t, p.Remove(nodes[len(nodes)/2].Name))
		checkShares(t, p, keys, shareTolerance(p, len(keys)))
	}
}

// mementoHistories are the states that testdata/regress/pool-memento-*.txt hold, each the
// result of the changes it lists.
func mementoHistories(t *testing.T) map[string]*Memento {
	t.Helper()
	out := map[string]*Memento{}
	build := func(name string, nodes []Node, changes ...func(p *Memento) error) {
		p, err := NewMemento(nodes)
		require.NoError(t, err)
		for _, c := range changes {
			require.NoError(t, c(p))
		}
		out[name] = p
	}
	five := []Node{{"cache-a", 1}, {"cache-b", 2}, {"cache-c", 3}, {"cache-d", 1}, {"10.0.0.7:6379", 2}}
	build("fresh", five)
	build("middle", five,
		func(p *Memento) error { return p.Remove("cache-c") },
		func(p *Memento) error { return p.Remove("cache-a") })
	build("history", five,
		func(p *Memento) error { return p.Remove("cache-b", "10.0.0.7:6379") },
		func(p *Memento) error { return p.Add(Node{Name: "cache-e", Weight: 3}) },
		func(p *Memento) error { return p.SetWeight("cache-c", 5) },
		func(p *Memento) error { return p.Remove("cache-a") },
		func(p *Memento) error { return p.SetWeight("cache-e", 1) },
		func(p *Memento) error { return p.Add(Node{Name: `a "quoted" name`, Weight: 1}) },
		func(p *Memento) error { return p.Remove("cache-d") })
	return out
}

// mementoGolden names the regress file of a history's saved state.
func mementoGolden(history string) string { return "pool-memento-" + history + ".txt" }

// placements writes the owner of every key, one "key owner" line each, both quoted.
func placements(p Pool, keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%q %q\n", k, p.Locate(k))
	}
	return b.String()
}

// The golden files pin the text and the placement of three histories; each text loads into
// a pool that places every key as the one that wrote it.
func TestMementoText(t *testing.T) {
	keys := testKeys(2000)
	for name, p := range mementoHistories(t) {
		text, err := p.MarshalText()
		require.NoError(t, err)
		checkRegress(t, mementoGolden(name), string(text))
		checkRegress(t, "pool-memento-"+name+"-placement.txt", placements(p, keys[:200]))

		var loaded Memento
		require.NoError(t, loaded.UnmarshalText(text), name)
		again, err := loaded.MarshalText()
		require.NoError(t, err)
		require.Equal(t, string(text), string(again), "%s: a loaded state writes the same text", name)
		require.Equal(t, p.Nodes(), loaded.Nodes(), name)
		require.Equal(t, owners(p, keys), owners(&loaded, keys), "%s: a loaded state places every key the same way", name)
		for _, k := range keys[:200] {
			require.Equal(t, p.AppendN(nil, k, 5), loaded.AppendN(nil, k, 5), "%s: AppendN(%q, 5)", name, k)
		}
		// Changes after loading continue the same history.
		require.NoError(t, p.Add(Node{Name: "later", Weight: 2}))
		require.NoError(t, loaded.Add(Node{Name: "later", Weight: 2}))
		require.Equal(t, owners(p, keys), owners(&loaded, keys), "%s: the same change after loading", name)
	}
}

// Another process loads the golden texts and prints its placements, which must be ours: no
// seed or other per-process state enters placement.
func TestMementoOtherProcess(t *testing.T) {
	keys := testKeys(1000)
	if path := os.Getenv("MEMENTO_CHILD_STATE"); path != "" {
		text, err := os.ReadFile(path)
		require.NoError(t, err)
		var p Memento
		require.NoError(t, p.UnmarshalText(text))
		fmt.Print(placements(&p, keys))
		return
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	for name := range mementoHistories(t) {
		path, err := filepath.Abs(filepath.Join("..", "testdata", "regress", mementoGolden(name)))
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^TestMementoOtherProcess$")
		cmd.Env = append(os.Environ(), "MEMENTO_CHILD_STATE="+path)
		out, err := cmd.Output()
		require.NoError(t, err, "child process")
		text, err := os.ReadFile(path)
		require.NoError(t, err)
		var p Memento
		require.NoError(t, p.UnmarshalText(text))
		var got []string
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, `"`) {
				got = append(got, strings.TrimSuffix(line, "\n"))
			}
		}
		want := strings.Split(strings.TrimSuffix(placements(&p, keys), "\n"), "\n")
		require.Equal(t, want, got, "%s: another process places keys differently", name)
	}
}

func TestMementoTextErrors(t *testing.T) {
	const good = "memento v1\nbuckets 4\nnode \"a\" weight 2 buckets 0,3\nnode \"b\" weight 1 buckets 1\nremoved 2\n"
	var p Memento
	require.NoError(t, p.UnmarshalText([]byte(good)))
	require.NoError(t, p.UnmarshalText([]byte("# comment\n\n"+strings.ReplaceAll(good, "\n", "\r\n"))), "comments, blank lines and CRLF")
	doc := "# comments, and blank lines, are ignored\nmemento v1\nbuckets 6\nnode \"cache-a\" weight 2 buckets 0,3\nnode \"cache-b\" weight 1 buckets 1\nremoved 2,5,4\n"
	require.NoError(t, p.UnmarshalText([]byte(doc)), "the example in MarshalText's doc")

	for _, tc := range []struct {
		text string
		line int
		also error
	}{
		{"", 0, nil},
		{"memento v2\n", 1, nil},
		{"memento v1\nnode \"a\" weight 1 buckets 0\n", 2, nil},
		{"memento v1\nbuckets 0\n", 2, nil},
		{"memento v1\nbuckets -1\n", 2, nil},
		{"memento v1\nbuckets 99999999\n", 2, nil},
		{"memento v1\nbuckets 2\nremoved 1\n", 3, nil},
		{"memento v1\nbuckets 2\nnode a weight 1 buckets 0\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight 1\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight x buckets 0\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"\" weight 1 buckets 0\n", 3, ErrNode},
		{"memento v1\nbuckets 2\nnode \"a\" weight -1 buckets 0\n", 3, ErrWeight},
		{"memento v1\nbuckets 2\nnode \"a\" weight 2 buckets 0\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight 1 buckets 2\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight 2 buckets 0,0\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight 1 buckets 0\nnode \"a\" weight 1 buckets 1\n", 4, ErrNode},
		{"memento v1\nbuckets 2\nnode \"a\" weight 1 buckets 0\nnode \"b\" weight 1 buckets 0\n", 4, nil},
		{"memento v1\nbuckets 3\nnode \"a\" weight 1 buckets 0\nremoved 1\n", 4, nil},
		{"memento v1\nbuckets 3\nnode \"a\" weight 1 buckets 0\nremoved 2,1\n", 4, nil},
		{"memento v1\nbuckets 3\nnode \"a\" weight 1 buckets 0\nremoved 1,0\n", 4, nil},
		{"memento v1\nbuckets 3\nnode \"a\" weight 1 buckets 0\nremoved 1-2,1\n", 4, nil},
		{"memento v1\nbuckets 3\nnode \"a\" weight 1 buckets 0\nremoved 1,2\nremoved\n", 5, nil},
		{"memento v1\nbuckets 3\nnode \"a\" weight 1 buckets 0\nremoved 1,2\nnode \"b\" weight 1 buckets 0\n", 5, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight 1 buckets 0-\n", 3, nil},
		{"memento v1\nbuckets 2\nnode \"a\" weight 1 buckets +0\n", 3, nil},
	} {
		before, _ := p.MarshalText()
		err := p.UnmarshalText([]byte(tc.text))
		require.ErrorIsf(t, err, ErrText, "%q", tc.text)
		if tc.also != nil {
			require.ErrorIsf(t, err, tc.also, "%q", tc.text)
		}
		assert.Containsf(t, err.Error(), fmt.Sprintf("line %d", tc.line), "%q", tc.text)
		assert.Truef(t, strings.HasPrefix(err.Error(), "pool: memento: "), "%q lacks the prefix", err)
		after, _ := p.MarshalText()
		require.Equal(t, string(before), string(after), "a failed load changed the pool")
	}
}

// Whatever text loads must write itself back the same and place keys on members.
func FuzzMementoText(f *testing.F) {
	for _, name := range []string{"fresh", "middle", "history"} {
		if text, err := os.ReadFile(filepath.Join("..", "testdata", "regress", mementoGolden(name))); err == nil {
			f.Add(text)
		}
	}
	f.Add([]byte("memento v1\nbuckets 4\nnode \"a\" weight 2 buckets 0,3\nnode \"b\" weight 1 buckets 1\nremoved 2\n"))
	keys := testKeys(50)
	f.Fuzz(func(t *testing.T, text []byte) {
		var p Memento
		if err := p.UnmarshalText(text); err != nil {
			require.ErrorIs(t, err, ErrText)
			return
		}
		out, err := p.MarshalText()
		require.NoError(t, err)
		var q Memento
		require.NoError(t, q.UnmarshalText(out))
		again, _ := q.MarshalText()
		require.Equal(t, string(out), string(again))
		member := map[string]bool{}
		for _, n := range p.Nodes() {
			member[n.Name] = true
		}
		for _, k := range keys {
			require.True(t, member[p.Locate(k)])
			require.Len(t, p.AppendN(nil, k, 3), min(3, len(member)))
		}
	})
}

// TestMementoBucketCountChecked: a bucket count is checked against the buckets the lines
// list before a slot per bucket is allocated: "buckets 4194304" alone took 16 MiB.
func TestMementoBucketCountChecked(t *testing.T) {
	text := "memento v1\nbuckets 4194304\nnode \"a\" weight 1 buckets 0-99\nremoved\n"
	var p Memento
	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = p.UnmarshalText([]byte(text))
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrText)
	require.ErrorContains(t, err, "4194304 buckets, but the node and removed lines list 100")
	require.LessOrEqual(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "bytes allocated")
	// The same count, one node holding bucket 0 and the rest removed in one run: loaded.
	require.NoError(t, p.UnmarshalText([]byte("memento v1\nbuckets 4194304\nnode \"a\" weight 1 buckets 0\nremoved 1-4194303\n")))
}
