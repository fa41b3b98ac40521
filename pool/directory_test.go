package pool

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
)

// prefixOwner is shard.PrefixOwner, restated: package pool may not import package shard.
func prefixOwner(key string) string {
	if i := strings.IndexByte(key, '-'); i > 0 {
		return key[:i]
	}
	return key
}

// Without entries a Directory is its fallback: over Rendezvous it passes the whole contract
// (allocations included), over the reference all of it but the reference's allocations.
func TestDirectoryContract(t *testing.T) {
	over := func(newPool func([]Node) (Pool, error)) func([]Node) (Pool, error) {
		return func(nodes []Node) (Pool, error) {
			p, err := newPool(nodes)
			if err != nil {
				return nil, err
			}
			return NewDirectory(p, nil), nil
		}
	}
	checkContract(t, contract{name: "directory(rendezvous)", newPool: over(newRendezvousPool(RendezvousOptions{})),
		orderFree: true, minimal: true, nextOnRemove: true})

	c := contract{name: "directory(reference)", newPool: over(newRefPool), orderFree: true, minimal: true, nextOnRemove: true}
	keys := testKeys(3000)
	t.Run("reference/bad input", func(t *testing.T) { checkBadInput(t, c, keys[:500]) })
	t.Run("reference/lookups", func(t *testing.T) { checkLookups(t, c, keys[:300]) })
	t.Run("reference/movement", func(t *testing.T) { checkMovement(t, c, keys) })
}

// hashPool places a key on the node at xxhash(key) mod the member count and lists the
// following nodes after it: a Pool that never allocates, for the allocation checks.
type hashPool struct{ m *members }

func (p *hashPool) Locate(key string) string {
	return p.m.nodes[xxhash.Sum64String(key)%uint64(len(p.m.nodes))].Name
}
func (p *hashPool) AppendN(dst []string, key string, n int) []string {
	first := int(xxhash.Sum64String(key) % uint64(len(p.m.nodes)))
	for i := range min(max(n, 0), len(p.m.nodes)) {
		dst = append(dst, p.m.nodes[(first+i)%len(p.m.nodes)].Name)
	}
	return dst
}
func (p *hashPool) Add(nodes ...Node) (err error) { p.m, err = p.m.add("hash", nodes); return err }
func (p *hashPool) Remove(names ...string) (err error) {
	next, err := p.m.remove("hash", names)
	if err == nil {
		p.m = next
	}
	return err
}
func (p *hashPool) SetWeight(string, int) error { return nil }
func (p *hashPool) Nodes() []Node               { return p.m.copyNodes() }

func newHashPool(t testing.TB, n int) *hashPool {
	m, err := newMembers("hash", numbered(n))
	require.NoError(t, err)
	return &hashPool{m}
}

func TestDirectoryPinAndAppendN(t *testing.T) {
	p := newHashPool(t, 6)
	d := NewDirectory(p, prefixOwner)
	keys := testKeys(500)
	require.NoError(t, d.Pin("1", "node-04"))
	for _, k := range append(keys, "1", "1-A1", "1-A1-C1") {
		owner := prefixOwner(k)
		for _, n := range []int{-1, 0, 1, 2, 3, 6, 9} {
			got := d.AppendN([]string{"kept"}, k, n)
			want := p.AppendN(nil, owner, n)
			if owner == "1" && len(want) > 0 {
				i := slices.Index(want, "node-04")
				if i < 0 {
					i = len(want) - 1
				}
				want = append([]string{"node-04"}, slices.Delete(want, i, i+1)...)
			}
			require.Equalf(t, append([]string{"kept"}, want...), got, "AppendN(%q, %d)", k, n)
		}
		want := p.Locate(owner)
		if owner == "1" {
			want = "node-04"
		}
		require.Equal(t, want, d.Locate(k))
	}
	node, ok := d.Pinned("1")
	require.True(t, ok)
	require.Equal(t, "node-04", node)
	require.True(t, d.Unpin("1"))
	require.False(t, d.Unpin("1"))
	require.Equal(t, p.Locate("1"), d.Locate("1-A1"))

	for _, c := range []struct {
		owner, node string
		want        error
		msg         string
	}{
		{"1", "node-99", ErrNode, `pool: directory: pin owner "1" to "node-99": not a member`},
		{"1-A1", "node-01", ErrDirectory, `pool: directory: pin owner "1-A1": that key's owner is "1": pin the owner`},
		{strings.Repeat("x", MaxOwnerLen+1), "node-01", ErrDirectory, "65537 bytes, longer than 65536"},
	} {
		err := d.Pin(c.owner, c.node)
		require.ErrorIs(t, err, c.want)
		require.ErrorContains(t, err, c.msg)
		require.Zero(t, d.Len())
	}
}

func TestDirectoryRemove(t *testing.T) {
	p := newHashPool(t, 5)
	d := NewDirectory(p, nil)
	require.NoError(t, d.Pin("b-owner", "node-02"))
	require.NoError(t, d.Pin("a-owner", "node-02"))
	require.NoError(t, d.Pin("c-owner", "node-03"))
	err := d.Remove("node-01", "node-02")
	require.ErrorIs(t, err, ErrNode)
	require.EqualError(t, err, `pool: directory: remove "node-02": owner "a-owner" is pinned to it (owners pinned to the nodes to remove: 2): repin or unpin them first: invalid node`)
	require.Len(t, d.Nodes(), 5, "a refused Remove removed nodes")
	require.NoError(t, d.Pin("a-owner", "node-00"))
	require.True(t, d.Unpin("b-owner"))
	require.NoError(t, d.Remove("node-01", "node-02"))
	require.Len(t, d.Nodes(), 3)
	require.ErrorIs(t, d.Remove("node-03"), ErrNode)
	require.NoError(t, d.Add(Node{Name: "node-09"}))
	require.NoError(t, d.SetWeight("node-09", 2))
	require.NoError(t, d.Pin("c-owner", "node-09"))
	require.NoError(t, d.Remove("node-03"))
	require.Equal(t, "node-09", d.Locate("c-owner"))
}

func TestDirectoryAllocs(t *testing.T) {
	maglev, err := NewMaglev(numbered(20), MaglevOptions{})
	require.NoError(t, err)
	for _, p := range []Pool{newHashPool(t, 20), maglev} {
		checkDirectoryAllocs(t, p)
	}
}

func checkDirectoryAllocs(t *testing.T, p Pool) {
	d := NewDirectory(p, prefixOwner)
	keys := []string{"", "user:1000", "1-A1", strings.Repeat("x", 4096)}
	dst := make([]string, 0, 3)
	check := func(what string) {
		for _, k := range append(keys, "owner:17", "owner:9999") {
			require.Zerof(t, testing.AllocsPerRun(100, func() { _ = d.Locate(k) }), "%T: %s: Locate(%.20q) allocates", p, what, k)
			require.Zerof(t, testing.AllocsPerRun(100, func() { dst = d.AppendN(dst[:0], k, 3) }), "%T: %s: AppendN(%.20q, 3) allocates", p, what, k)
		}
	}
	check("no entries")
	entries := map[string]string{"1": "node-05", "": "node-00", "user:1000": "node-19"}
	for i := range 10000 {
		entries[fmt.Sprint("owner:", i)] = fmt.Sprintf("node-%02d", i%20)
	}
	require.NoError(t, d.Load(maps.All(entries)))
	check("10003 entries")
}

func TestDirectoryLoadAndText(t *testing.T) {
	p := newHashPool(t, 4)
	d := NewDirectory(p, nil)
	entries := map[string]string{"user:42": "node-00", "1": "node-03", "": "node-01", "with space": "node-02", "\xff\n": "node-03"}
	require.NoError(t, d.Load(maps.All(entries)))
	require.Equal(t, entries, maps.Collect(d.Entries()))
	var owners []string
	for owner, node := range d.Entries() {
		owners = append(owners, owner)
		// Entries keep the member's own string, whatever string Load was given.
		i := slices.IndexFunc(p.m.nodes, func(n Node) bool { return n.Name == node })
		require.Equal(t, unsafe.StringData(p.m.nodes[i].Name), unsafe.StringData(node), "entry of %q does not share the member's name", owner)
	}
	require.True(t, slices.IsSorted(owners))

	text, err := d.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "directory entries=5\n\"\" \"node-01\"\n\"1\" \"node-03\"\n\"user:42\" \"node-00\"\n\"with space\" \"node-02\"\n\"\\xff\\n\" \"node-03\"\n", string(text))
	e := NewDirectory(p, nil)
	require.NoError(t, e.UnmarshalText(text))
	require.Equal(t, entries, maps.Collect(e.Entries()))
	again, err := e.MarshalText()
	require.NoError(t, err)
	require.Equal(t, text, again)

	pairs := func(kv ...string) func(yield func(string, string) bool) {
		return func(yield func(string, string) bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if !yield(kv[i], kv[i+1]) {
					return
				}
			}
		}
	}
	for _, c := range []struct {
		seq  func(yield func(string, string) bool)
		want error
		msg  string
	}{
		{pairs("a", "node-00", "b", "node-01", "a", "node-02"), ErrDirectory, `pool: directory: load: owner "a" given twice`},
		{pairs("a", "node-00", "b", "node-07"), ErrNode, `pool: directory: load: entry 1: owner "b" to "node-07": not a member`},
	} {
		err := d.Load(c.seq)
		require.ErrorIs(t, err, c.want)
		require.ErrorContains(t, err, c.msg)
		require.Equal(t, entries, maps.Collect(d.Entries()))
	}

	const h = "directory entries=1\n"
	for _, c := range []struct{ text, msg string }{
		{h + "\"a\" node-00\n", `line 2: owner "a": node "node-00": want a node name as a Go string literal`},
		{h + "\"a\" `node-00`\n", `line 2: owner "a": node "` + "`node-00`" + `"`},
		{h + "\"a\" \"node-00\" \n", `line 2: owner "a": node "\"node-00\" "`},
		{h + "\"a\" \"node-07\"\n", `line 2: owner "a" to "node-07": not a member`},
		{"directory entries=2\n\"b\" \"node-00\"\n\"a\" \"node-00\"\n", `line 3: key "a" after "b"`},
	} {
		err := e.UnmarshalText([]byte(c.text))
		require.ErrorIsf(t, err, ErrDirectory, "%q", c.text)
		require.ErrorContainsf(t, err, "pool: directory: text "+c.msg, "%q", c.text)
		require.Equal(t, entries, maps.Collect(e.Entries()))
	}
}

func FuzzDirectoryUnmarshalText(f *testing.F) {
	f.Add([]byte("directory entries=2\n\"1\" \"node-00\"\n\"user:42\" \"node-01\"\n"))
	f.Add([]byte("directory entries=1\n\"\\xff\" \"node-\\x30\\x30\""))
	f.Add([]byte("directory entries=0\n"))
	p := newHashPool(f, 3)
	f.Fuzz(func(t *testing.T, text []byte) {
		d := NewDirectory(p, prefixOwner)
		require.NoError(t, d.Pin("x", "node-01"))
		if err := d.UnmarshalText(text); err != nil {
			require.ErrorIs(t, err, ErrDirectory)
			require.Truef(t, strings.HasPrefix(err.Error(), "pool: directory: text line "), "%v", err)
			require.Equal(t, map[string]string{"x": "node-01"}, maps.Collect(d.Entries()))
			return
		}
		for owner, node := range d.Entries() {
			require.Contains(t, []string{"node-00", "node-01", "node-02"}, node)
			require.Equal(t, owner, prefixOwner(owner))
		}
		out, err := d.MarshalText()
		require.NoError(t, err)
		e := NewDirectory(p, prefixOwner)
		require.NoError(t, e.UnmarshalText(out), "MarshalText output %q does not load", out)
		require.Equal(t, maps.Collect(d.Entries()), maps.Collect(e.Entries()))
		again, err := e.MarshalText()
		require.NoError(t, err)
		require.Equal(t, out, again, "MarshalText is not canonical")
	})
}

func TestDirectoryClone(t *testing.T) {
	d := NewDirectory(newHashPool(t, 4), nil)
	require.NoError(t, d.Pin("a", "node-03"))
	c, err := d.Clone(newHashPool(t, 4))
	require.NoError(t, err)
	require.NoError(t, c.Pin("b", "node-00"))
	require.Equal(t, map[string]string{"a": "node-03"}, maps.Collect(d.Entries()))
	require.Equal(t, map[string]string{"a": "node-03", "b": "node-00"}, maps.Collect(c.Entries()))
	_, err = d.Clone(newHashPool(t, 3))
	require.ErrorIs(t, err, ErrNode)
	require.ErrorContains(t, err, `pool: directory: clone: owner "a" is pinned to "node-03", not a member`)
	_, err = d.Clone(nil)
	require.ErrorIs(t, err, ErrDirectory)
}

func TestDirectoryZeroValue(t *testing.T) {
	var d Directory
	require.Empty(t, d.Locate("x"))
	require.Equal(t, []string{"kept"}, d.AppendN([]string{"kept"}, "x", 3))
	require.Nil(t, d.Nodes())
	require.Zero(t, d.Len())
	require.False(t, d.Unpin("x"))
	_, ok := d.Pinned("x")
	require.False(t, ok)
	text, err := d.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "directory entries=0\n", string(text))
	require.ErrorIs(t, d.Pin("x", "a"), ErrEmpty)
	require.ErrorIs(t, d.Add(Node{Name: "a"}), ErrEmpty)
	require.ErrorIs(t, d.Remove("a"), ErrEmpty)
	require.ErrorIs(t, d.SetWeight("a", 1), ErrEmpty)
	require.ErrorIs(t, d.UnmarshalText(text), ErrEmpty)
	require.ErrorIs(t, d.Load(maps.All(map[string]string{})), ErrEmpty)
	require.Panics(t, func() { NewDirectory(nil, nil) })
}

// Lookups while another goroutine pins and unpins: each sees the entry before or after.
func TestDirectoryConcurrentPins(t *testing.T) {
	p, err := newRefPool(numbered(5))
	require.NoError(t, err)
	d := NewDirectory(p, nil)
	owners := testKeys(100)
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		errs = make(chan error, 3)
	)
	for g := range 3 {
		wg.Go(func() {
			for i := g; !stop.Load(); i++ {
				o := owners[i%len(owners)]
				if got, rule := d.Locate(o), p.Locate(o); got != rule && got != "node-04" {
					errs <- fmt.Errorf("Locate(%q) = %q during pins, want %q or node-04", o, got, rule)
					return
				}
				runtime.Gosched()
			}
		})
	}
	changes := 100
	if raceEnabled {
		changes = 30
	}
	for i := range changes {
		o := owners[i%len(owners)]
		require.NoError(t, d.Pin(o, "node-04"))
		runtime.Gosched()
		require.True(t, d.Unpin(o))
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
