package pool

import (
	"bytes"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/jumphash"
	"github.com/shardkit/shard/internal/keyhash"
)

// Memento places keys by MementoHash (Massimo Coluzzi, Amos Brocco, Alessandro Antonucci,
// Tiziano Leidi, "MementoHash: A Stateful, Minimal Memory, Best Performing Consistent Hash
// Algorithm", IEEE/ACM Transactions on Networking, 2024, https://arxiv.org/abs/2306.09783):
// jump consistent hashing over numbered buckets, plus a record of the buckets removed from
// the middle, so that any node can leave.
//
// Buckets. Nodes hold buckets 0, 1, 2, ... in the order they joined, a node of weight w
// holding w of them. A key goes to bucket JumpHash(xxhash64(key), n), n the number of buckets
// in use, working or removed, exactly as shard.Jump places it (the same code) while no bucket
// has been removed from the middle: with weights 1, a pool of nodes a, b, c places every key
// on the node shard.Jump with 3 shards numbers 0, 1 or 2. A key whose bucket was removed is
// hashed again, with the bucket as seed, into the buckets that were working when it was
// removed (MementoHash's replacement chain), so a removal moves only the removed bucket's
// keys and spreads them evenly over the rest.
//
// Changes. Remove removes a node's buckets highest first; when no bucket is recorded as
// removed and the node holds the last buckets, they are dropped as shard.Jump drops shards
// and nothing is recorded. Add gives a new node's buckets back in reverse order of removal
// (the last removed first), then new buckets at the end; restoring a bucket undoes its
// removal exactly. Removing several nodes removes them in the order given. A weight change
// adds or removes buckets of that node the same way. So every change moves only the keys
// that must move: to an added node or a node whose weight grows, from a removed node or a
// node whose weight shrinks.
//
// State. Placement depends on the order of past changes, not only on the members: two
// processes agree if they apply the same changes in the same order, or if one saves its
// state with MarshalText and the other loads it with UnmarshalText (see MarshalText).
//
// Replicas. AppendN lists the owner, then the node that would own the key if the owner were
// removed, then the node that would own it if both were removed, and so on: after
// Remove(owner) a key goes to AppendN's second node.
//
// Cost. Locate is one jump, O(log n), the cost of shard.Jump, plus the replacement chain
// when the key lands on a removed bucket: measured side by side on a shared machine, Locate
// takes 1.1 to 1.3 times as long once a tenth of the nodes have left from the middle, and 1.1
// to 1.5 times once half have (BenchmarkMementoLocateRemoved). Memory: 12 bytes per bucket in
// use (at most MaxMementoBuckets) and the names, about 110 bytes per node of weight 1; a
// change copies them.
//
// Make one with NewMemento, or load a saved state into a zero Memento with UnmarshalText.
// Until then the zero Memento has no nodes: Locate returns "", AppendN appends nothing,
// changes and MarshalText fail with ErrEmpty. Locate and AppendN take no lock and never
// allocate (AppendN allocates when n > 17); they are safe for concurrent use with each other
// and with the changes, which build a new table and publish it atomically. Changes are
// serialized.
type Memento struct {
	mu    sync.Mutex
	table atomic.Pointer[mementoTable]
}

// MaxMementoBuckets is the most buckets a Memento pool has in use, working or removed: the
// sum of the weights can reach it, not exceed it. 4M buckets take 48 MB.
const MaxMementoBuckets = 1 << 22

// mementoState is the state a change edits and the text holds: the b-array of MementoHash.
type mementoState struct {
	m *members
	// owner[b] is the position in m.nodes of the node holding bucket b, or -1 if b is removed.
	owner []int32
	// removed lists the removed buckets below len(owner), oldest first: the i-th was removed
	// when len(owner)-i buckets were working, so its replacer is len(owner)-1-i.
	removed []int32
}

// mementoTable is one immutable state and the lookup arrays derived from it.
type mementoTable struct {
	mementoState
	names []string // names[i] = m.nodes[i].Name
	// replacer[b] is -1 for a working bucket, else the number of buckets working after b's
	// removal: the chain rehashes b's keys into [0, replacer[b]).
	replacer []int32
	// rank[b] is the place of working bucket b among its node's buckets, highest first: its
	// turn when AppendN supposes the node removed.
	rank []int32
	// top[i] is node i's highest bucket and run[i] the number of its buckets that descend
	// from it without a gap, the ones a removal could drop from the end.
	top, run []int32
}

// NewMemento returns a Memento pool of nodes: in join order, node i holds the next
// Weight buckets. It returns an error wrapping ErrEmpty, ErrNode or ErrWeight for bad nodes
// and ErrLimit if the weights add up to more than MaxMementoBuckets.
func NewMemento(nodes []Node) (*Memento, error) {
	m, err := newMembers("memento", nodes)
	if err != nil {
		return nil, err
	}
	s := &mementoState{m: &members{index: map[string]int{}}}
	if err := s.join(m, m.nodes); err != nil {
		return nil, err
	}
	p := &Memento{}
	p.table.Store(s.table())
	return p, nil
}

// join gives the buckets of the new nodes, the last ones of next, and sets the membership
// to next.
func (s *mementoState) join(next *members, nodes []Node) error {
	working := s.working()
	for _, n := range nodes {
		// Checked as it grows: the whole sum can pass a 32-bit int.
		if working += n.Weight; working > MaxMementoBuckets {
			return checkMementoBuckets(working)
		}
	}
	s.m = next
	for _, n := range nodes {
		i := int32(next.index[n.Name])
		for range n.Weight {
			s.addBucket(i)
		}
	}
	return nil
}

// working returns the number of working buckets, the sum of the members' weights.
func (s *mementoState) working() int { return len(s.owner) - len(s.removed) }

// checkMementoBuckets checks the number of working buckets a change would leave: buckets are
// reused before new ones are added, so this bounds the buckets in use too.
func checkMementoBuckets(working int) error {
	if working > MaxMementoBuckets {
		return fmt.Errorf("pool: memento: the weights add up to %d buckets: allowed at most %d: %w", working, MaxMementoBuckets, ErrLimit)
	}
	return nil
}

// addBucket gives node the last removed bucket, or a new one at the end.
func (s *mementoState) addBucket(node int32) {
	if k := len(s.removed); k > 0 {
		s.owner[s.removed[k-1]] = node
		s.removed = s.removed[:k-1]
		return
	}
	s.owner = append(s.owner, node)
}

// removeBuckets removes count of node's buckets, highest first.
func (s *mementoState) removeBuckets(node int32, count int) {
	for b := len(s.owner) - 1; count > 0; b-- {
		if s.owner[b] != node {
			continue
		}
		count--
		if len(s.removed) == 0 && b == len(s.owner)-1 {
			s.owner = s.owner[:b] // as jump shrinks: nothing to remember
			continue
		}
		s.owner[b] = -1
		s.removed = append(s.removed, int32(b))
	}
}

// clone returns a copy that a change may edit.
func (s *mementoState) clone() *mementoState {
	return &mementoState{m: s.m, owner: slices.Clone(s.owner), removed: slices.Clone(s.removed)}
}

// renumber points the buckets at the nodes' positions in next, which has the same nodes as
// s.m but some, removed, absent.
func (s *mementoState) renumber(next *members) {
	pos := make([]int32, len(s.m.nodes))
	for i, n := range s.m.nodes {
		j, ok := next.index[n.Name]
		pos[i] = int32(j)
		if !ok {
			pos[i] = -1
		}
	}
	for b, o := range s.owner {
		if o >= 0 {
			s.owner[b] = pos[o]
		}
	}
	s.m = next
}

// table derives the lookup arrays.
func (s *mementoState) table() *mementoTable {
	n := len(s.owner)
	t := &mementoTable{
		mementoState: *s,
		names:        make([]string, len(s.m.nodes)),
		replacer:     make([]int32, n),
		rank:         make([]int32, n),
		top:          make([]int32, len(s.m.nodes)),
		run:          make([]int32, len(s.m.nodes)),
	}
	for i, node := range s.m.nodes {
		t.names[i] = node.Name
		t.top[i] = -1
	}
	for b := range t.replacer {
		t.replacer[b] = -1
	}
	for i, b := range s.removed {
		t.replacer[b] = int32(n - 1 - i)
	}
	count := make([]int32, len(s.m.nodes))
	for b := n - 1; b >= 0; b-- {
		o := s.owner[b]
		if o < 0 {
			continue
		}
		t.rank[b] = count[o]
		count[o]++
		if t.top[o] < 0 {
			t.top[o] = int32(b)
		}
		if t.top[o]-int32(b) == t.run[o] {
			t.run[o]++
		}
	}
	return t
}

// mementoRehash returns the bucket in [0, working) that MementoHash's chain gives a key of
// hash h leaving removed bucket b: output b of SplitMix64 seeded with h, scaled by a
// multiplication. It is part of the placement: changing it moves keys of removed buckets.
func mementoRehash(h uint64, b int32, working int32) int32 {
	hi, _ := bits.Mul64(splitMix64(h, uint64(b)), uint64(working))
	return int32(hi)
}

// supposed is a state AppendN supposes: the table's, with the nodes in gone removed too, in
// order, as Remove would remove them. It changes nothing in the table.
type supposed struct {
	gone    picked // node positions, each with the number of buckets removed before its own
	removed int32  // buckets of the gone nodes
	dropped int32  // how many of them Remove would drop from the end instead of recording
	open    bool   // whether the next removal could still drop from the end
}

// suppose adds node to the removed nodes.
func (v *supposed) suppose(t *mementoTable, node int32) {
	if v.gone.len() == 0 {
		v.open = len(t.removed) == 0
	}
	v.gone.add(node, v.removed, len(t.names))
	w := int32(t.m.nodes[node].Weight)
	v.removed += w
	if v.open {
		if t.top[node] != int32(len(t.owner))-1-v.dropped {
			v.open = false
		} else {
			v.dropped += t.run[node]
			v.open = t.run[node] == w
		}
	}
}

// replacer returns the replacer of bucket b in the supposed state: the table's if b was
// removed, else the one Remove would record for b, else -1. Buckets that Remove would drop
// from the end are beyond every range the lookup draws from, so never asked about.
func (v *supposed) replacer(t *mementoTable, b int32) int32 {
	if r := t.replacer[b]; r >= 0 || v == nil {
		return r
	}
	pos, before := v.gone.find(t.owner[b])
	if pos < 0 {
		return -1
	}
	return int32(t.working()) - 1 - (before + t.rank[b])
}

// locate returns the node position of the bucket of key hash h, in the table's state or, if
// v is not nil, in the state it supposes.
func (t *mementoTable) locate(h uint64, v *supposed) int32 {
	n := len(t.owner)
	if v != nil {
		n -= int(v.dropped)
	}
	b := int32(jumphash.Guava(h, n))
	r := v.replacer(t, b)
	for r >= 0 {
		// b was removed when r buckets remained working: hash the key again into [0, r).
		// A bucket there removed earlier (its replacer >= r) stood, at that time, where
		// its replacer's bucket stands: follow the replacers until a bucket working then.
		b = mementoRehash(h, b, r)
		next := v.replacer(t, b)
		for next >= r {
			b = next
			next = v.replacer(t, b)
		}
		r = next
	}
	return t.owner[b]
}

// Locate returns the name of the node that owns key.
func (p *Memento) Locate(key string) string {
	t := p.table.Load()
	if t == nil { // the zero Memento
		return ""
	}
	return t.names[t.locate(keyhash.XXH64(key), nil)]
}

// AppendN appends min(n, len(Nodes())) distinct node names for key to dst: the owner, then
// the node that would own key if the owner were removed, and so on. It returns the extended
// slice, and allocates nothing when dst has room and n <= 17.
func (p *Memento) AppendN(dst []string, key string, n int) []string {
	t := p.table.Load()
	if t == nil { // the zero Memento
		return dst
	}
	want := min(n, len(t.names))
	if want <= 0 {
		return dst
	}
	h := keyhash.XXH64(key)
	owner := t.locate(h, nil)
	dst = append(dst, t.names[owner])
	var v supposed
	for i := 1; i < want; i++ {
		v.suppose(t, owner)
		owner = t.locate(h, &v)
		dst = append(dst, t.names[owner])
	}
	return dst
}

// change applies f to a copy of the state and publishes it, or returns f's error and
// changes nothing.
func (p *Memento) change(f func(s *mementoState) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.table.Load()
	if cur == nil {
		return zeroError("memento", "NewMemento or UnmarshalText")
	}
	s := cur.clone()
	if err := f(s); err != nil {
		return err
	}
	p.table.Store(s.table())
	return nil
}

// Add adds nodes to the pool, all or none, in the order given: each takes Weight buckets,
// the last removed ones first (see Memento).
func (p *Memento) Add(nodes ...Node) error {
	if len(nodes) == 0 {
		return nil
	}
	return p.change(func(s *mementoState) error {
		next, err := s.m.add("memento", nodes)
		if err != nil {
			return err
		}
		return s.join(next, next.nodes[len(s.m.nodes):])
	})
}

// Remove removes the named nodes, all or none, in the order given, each node's buckets
// highest first; a pool never becomes empty. Only the removed nodes' keys move.
func (p *Memento) Remove(names ...string) error {
	if len(names) == 0 {
		return nil
	}
	return p.change(func(s *mementoState) error {
		next, err := s.m.remove("memento", names)
		if err != nil {
			return err
		}
		for _, name := range names {
			i := s.m.index[name]
			s.removeBuckets(int32(i), s.m.nodes[i].Weight)
		}
		s.renumber(next)
		return nil
	})
}

// SetWeight changes the weight of one node: it takes buckets as Add gives them, or gives
// up its highest buckets as Remove does. Only keys to or from that node move.
func (p *Memento) SetWeight(name string, weight int) error {
	return p.change(func(s *mementoState) error {
		next, err := s.m.setWeight("memento", name, weight)
		if err != nil {
			return err
		}
		i := next.index[name]
		switch old, w := s.m.nodes[i].Weight, next.nodes[i].Weight; {
		case w > old:
			if err := checkMementoBuckets(s.working() + w - old); err != nil {
				return err
			}
			for range w - old {
				s.addBucket(int32(i))
			}
		case w < old:
			s.removeBuckets(int32(i), old-w)
		}
		s.m = next
		return nil
	})
}

// Nodes returns a copy of the members in the order they joined.
func (p *Memento) Nodes() []Node {
	if t := p.table.Load(); t != nil {
		return t.m.copyNodes()
	}
	return nil
}

// mementoHeader starts every saved state; its version changes if the format does.
const mementoHeader = "memento v1"

// MarshalText returns the pool's state as text that UnmarshalText loads, in another process
// too, to place every key the same way. The format, one item per line:
//
//	# comments, and blank lines, are ignored
//	memento v1
//	buckets 6
//	node "cache-a" weight 2 buckets 0,3
//	node "cache-b" weight 1 buckets 1
//	removed 2,5,4
//
// "buckets" is the number of buckets in use, working or removed; one "node" line follows
// per member in join order, with its name quoted as in Go, its weight and the buckets it
// holds; "removed" lists the removed buckets, oldest removal first (it may be empty).
// Bucket lists are comma-separated, and a-b stands for the run from a to b, up or down.
func (p *Memento) MarshalText() ([]byte, error) {
	t := p.table.Load()
	if t == nil {
		return nil, zeroError("memento", "NewMemento or UnmarshalText")
	}
	var b bytes.Buffer
	b.WriteString("# MementoHash state of a pool.Memento: load it with UnmarshalText to place keys the same way.\n")
	b.WriteString(mementoHeader + "\n")
	fmt.Fprintf(&b, "buckets %d\n", len(t.owner))
	held := make([][]int32, len(t.names))
	for bucket, o := range t.owner {
		if o >= 0 {
			held[o] = append(held[o], int32(bucket))
		}
	}
	for i, n := range t.m.nodes {
		fmt.Fprintf(&b, "node %s weight %d buckets %s\n", strconv.Quote(n.Name), n.Weight, formatBuckets(held[i]))
	}
	b.WriteString(strings.TrimRight("removed "+formatBuckets(t.removed), " ") + "\n")
	return b.Bytes(), nil
}

// formatBuckets writes buckets as a comma-separated list, runs of consecutive buckets (up or
// down) as a-b.
func formatBuckets(buckets []int32) string {
	var b strings.Builder
	for i := 0; i < len(buckets); {
		j := i + 1
		if j < len(buckets) {
			if step := buckets[j] - buckets[i]; step == 1 || step == -1 {
				for j+1 < len(buckets) && buckets[j+1]-buckets[j] == step {
					j++
				}
				j++
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(buckets[i])))
		if j-i > 1 {
			fmt.Fprintf(&b, "-%d", buckets[j-1])
		}
		i = j
	}
	return b.String()
}

// UnmarshalText replaces the pool's state with the one text holds (see MarshalText), all or
// nothing; it may be called on a zero Memento. The text must describe a state that changes
// can reach: every bucket below the count held by one node or removed, each node's weight
// its number of buckets, and the first removal not of the last bucket (that one is dropped,
// not recorded). An error names the line and wraps ErrText, and ErrNode or ErrWeight for a
// bad node.
func (p *Memento) UnmarshalText(text []byte) error {
	s, err := parseMemento(string(text))
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.table.Store(s.table())
	return nil
}

// parseMemento reads a state written by MarshalText.
func parseMemento(text string) (*mementoState, error) {
	var (
		s     = &mementoState{m: &members{index: map[string]int{}}}
		line  = 0
		stage = 0 // 0: header, 1: buckets, 2: nodes, 3: removed, 4: done
	)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("pool: memento: line %d: %s: %w", line, fmt.Sprintf(format, args...), ErrText)
	}
	for l := range strings.Lines(text) {
		line++
		l = strings.TrimRight(l, "\r\n")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		word, rest, _ := strings.Cut(l, " ")
		switch {
		case stage == 0:
			if l != mementoHeader {
				return nil, fail("want %q first, found %.40q", mementoHeader, l)
			}
			stage = 1
		case stage == 1 && word == "buckets":
			n, err := strconv.ParseUint(rest, 10, 31)
			if err != nil || n < 1 || n > MaxMementoBuckets {
				return nil, fail("bucket count %.40q: want an integer in [1, %d]", rest, MaxMementoBuckets)
			}
			// Every bucket is held by a node or removed: past 2^16 buckets (256 KiB), the
			// lines must list n of them before n are allocated (a header of 30 bytes asked
			// for 16 MiB); below, the line at fault is found as the buckets are read.
			if listed := listedBuckets(text, int(n)); n > 1<<16 && listed < int(n) {
				return nil, fail("%d buckets, but the node and removed lines list %d: each is held by a node or removed", n, listed)
			}
			s.owner = make([]int32, n)
			for b := range s.owner {
				s.owner[b] = -1
			}
			stage = 2
		case stage == 2 && word == "node":
			if err := parseMementoNode(s, rest, fail, line); err != nil {
				return nil, err
			}
		case stage == 2 && word == "removed" && len(s.m.nodes) > 0:
			removed, err := parseBuckets(strings.TrimSpace(rest), len(s.owner))
			if err != nil {
				return nil, fail("removed buckets: %v", err)
			}
			for _, b := range removed {
				if s.owner[b] != -1 {
					return nil, fail("removed bucket %d is held by a node or listed twice", b)
				}
				s.owner[b] = -2 // until every bucket is checked
			}
			if len(removed) > 0 && int(removed[0]) == len(s.owner)-1 {
				return nil, fail("the first removal is of the last bucket %d, which a removal drops instead of recording", removed[0])
			}
			s.removed = removed
			for b, o := range s.owner {
				switch o {
				case -1:
					return nil, fail("bucket %d is neither held by a node nor removed", b)
				case -2:
					s.owner[b] = -1
				}
			}
			stage = 4
		default:
			return nil, fail("unexpected %.40q", l)
		}
	}
	if stage != 4 {
		want := [...]string{mementoHeader, "a buckets line", "node lines and a removed line", "", ""}[stage]
		return nil, fmt.Errorf("pool: memento: text ends at line %d without %s: %w", line, want, ErrText)
	}
	return s, nil
}

// parseMementoNode reads `"name" weight W buckets LIST` into s.
func parseMementoNode(s *mementoState, rest string, fail func(string, ...any) error, line int) error {
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return fail("node name: want a quoted string, found %.40q", rest)
	}
	name, _ := strconv.Unquote(quoted)
	f := strings.Fields(rest[len(quoted):])
	if len(f) != 4 || f[0] != "weight" || f[2] != "buckets" {
		return fail("node %.64q: want weight W buckets LIST after the name", name)
	}
	weight, err := strconv.Atoi(f[1])
	if err != nil {
		return fail("node %.64q: weight %.20q is not an integer", name, f[1])
	}
	next, err := s.m.add(fmt.Sprintf("memento: line %d", line), []Node{{Name: name, Weight: weight}})
	if err != nil {
		return fmt.Errorf("%w: %w", err, ErrText)
	}
	held, err := parseBuckets(f[3], len(s.owner))
	if err != nil {
		return fail("node %.64q: buckets: %v", name, err)
	}
	if len(held) != next.nodes[len(next.nodes)-1].Weight {
		return fail("node %.64q: weight %d but %d buckets", name, weight, len(held))
	}
	for _, b := range held {
		if s.owner[b] != -1 {
			return fail("node %.64q: bucket %d is held twice", name, b)
		}
		s.owner[b] = int32(len(s.m.nodes))
	}
	s.m = next
	return nil
}

// parseBuckets reads a list that formatBuckets writes, every bucket in [0, n). It returns
// at most n buckets: a longer list repeats one, which the callers reject.
func parseBuckets(list string, n int) ([]int32, error) {
	var out []int32
	if list == "" {
		return out, nil
	}
	for item := range strings.SplitSeq(list, ",") {
		lo, hi, isRun := strings.Cut(item, "-")
		a, err := strconv.ParseUint(lo, 10, 31)
		b := a
		if err == nil && isRun {
			b, err = strconv.ParseUint(hi, 10, 31)
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("%.20q is not a bucket or a run a-b", item)
		case a >= uint64(n) || b >= uint64(n):
			return nil, fmt.Errorf("%.20q is out of range [0, %d)", item, n)
		}
		step := 1
		if b < a {
			step = -1
		}
		for x := int(a); ; x += step {
			if len(out) == n {
				return nil, fmt.Errorf("more than %d buckets", n)
			}
			out = append(out, int32(x))
			if x == int(b) {
				break
			}
		}
	}
	return out, nil
}

// listedBuckets returns how many buckets the node and removed lines of a state text list,
// counting a run a-b as its length, and stopping past limit: what the parser checks a bucket
// count against before it allocates one slot per bucket. Malformed lists count what they
// can; the parser reports them.
func listedBuckets(text string, limit int) int {
	listed := 0
	for l := range strings.Lines(text) {
		word, rest, _ := strings.Cut(strings.TrimRight(l, "\r\n"), " ")
		var list string
		switch word {
		case "node":
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil {
				continue
			}
			if f := strings.Fields(rest[len(quoted):]); len(f) == 4 {
				list = f[3]
			}
		case "removed":
			list = strings.TrimSpace(rest)
		default:
			continue
		}
		for item := range strings.SplitSeq(list, ",") {
			lo, hi, isRun := strings.Cut(item, "-")
			a, err1 := strconv.ParseUint(lo, 10, 31)
			b, err2 := a, error(nil)
			if isRun {
				b, err2 = strconv.ParseUint(hi, 10, 31)
			}
			if err1 == nil && err2 == nil {
				listed += int(max(a, b)-min(a, b)) + 1
			}
			if listed > limit {
				return listed
			}
		}
	}
	return listed
}
