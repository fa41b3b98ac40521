package pool

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/spaolacci/murmur3"
)

// Maglev places keys with the lookup table of Maglev hashing (Daniel E. Eisenbud et al.,
// "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI 2016, section 3.4): a
// table of M slots, M prime, filled by the nodes in turns, each taking the next free slot of
// its own permutation of the table. A key goes to the node of slot xxhash64(key) scaled to
// [0, M): one multiplication and two loads, whatever the pool's size.
//
// Permutations. Node i's permutation is offset_i, offset_i + skip_i, offset_i + 2 skip_i, ...
// modulo M, with offset_i = xxhash64(name) mod M and skip_i = murmur3(name) mod (M-1) + 1,
// two independent hashes without a seed. The nodes take turns in the order of their names,
// so the table depends only on the membership, not on the order in which nodes joined.
//
// Weights. A node of greater weight takes turns more often. The weights are first divided by
// their greatest common divisor, and a round of turns gives a node of weight w w turns: the
// round is w_max sub-rounds, and in sub-round j every node of weight above j, in name order,
// takes one turn. The table fills in about M/W rounds (W the sum of the divided weights), so
// each node holds its weight's share of the slots give or take one round's turns: within
// W/M relative, 1% with the default table.
//
// Table size. MaglevOptions.TableSize sets M. The default is the smallest prime on the
// ladder 65537, 131101, 262147, ... (the smallest prime at or above 2^16, 2^17, ... 2^24)
// that is at least 100 W: 65537 up to a total weight of 655, then doubling. The paper uses
// M = 65537 and asks for M > 100 N so that backends' shares differ by at most 1%. A change
// that crosses a step of the ladder rebuilds the table at the new size and moves most keys:
// set TableSize to the size the pool will grow to if that matters.
//
// Movement. A change rebuilds the table from the new membership. Maglev keeps most slots
// where they were, but not all: measured over the slots of the default table, removing or
// adding one node of 10, 100 or 1000 moves, besides the keys that must move, another 0.2% to
// 0.6% of all keys between other nodes: 2% more than the minimum at 10 nodes, 55% more at
// 100, 5.5 times the minimum at 1000 (the paper's resilience measurements show the same
// kind of extra disruption, a few percent of the table). A weight change moves keys between
// other nodes too. See TestMaglevMovement.
//
// Replicas. Maglev has no natural second choice. AppendN walks the table from the key's
// slot, slot after slot, and lists each node the first time it meets it: the owner, then
// the owners of the following slots. Neighbouring slots belong to unrelated nodes, so the
// replicas of a key are spread like its owner. After Remove(owner) the rebuilt table gives the
// key's slot to the node whose permutation reaches it first among those still free, which
// is AppendN's second node for only about 1 key in N (measured: see TestMaglevMovement).
//
// Memory: 2 bytes per slot (M slots, 128 KB by default) and the names. Add, Remove and
// SetWeight refill the table in O(M log M) time: measured on a shared machine, 2 ms for the
// default 65537 slots, 40 ms for 10000 nodes in 1048583 slots.
//
// Make one with NewMaglev; the zero Maglev has no nodes (Locate returns "", AppendN appends
// nothing, TableSize is 0, changes fail with ErrEmpty). Locate and AppendN take no lock and
// never allocate (AppendN allocates when n > 16); they are safe for concurrent use with each
// other and with the changes, which build a new table and publish it atomically. Changes
// are serialized.
type Maglev struct {
	tableSize int // the option, 0 for the ladder
	mu        sync.Mutex
	table     atomic.Pointer[maglevTable]
}

// MaglevOptions configures a Maglev pool. The zero value is the default.
type MaglevOptions struct {
	// TableSize is the number of slots M, a prime in [2, MaxMaglevTableSize] no smaller than
	// the number of nodes (every node gets at least one slot). Zero chooses it from the
	// ladder by the total weight, as the Maglev doc describes.
	TableSize int
}

const (
	// MaxMaglevTableSize is the largest table: 16777259 slots, 32 MB, the top of the ladder.
	MaxMaglevTableSize = 16777259
	// MaxMaglevNodes is the most nodes a Maglev pool holds: a slot names its node in 16
	// bits. (A table of at least 100 slots per node, for shares within 1%, holds up to
	// 167772 nodes.)
	MaxMaglevNodes = 1 << 16
)

// maglevLadder holds the default table sizes: the smallest prime at or above 2^(16+k).
// TestMaglevLadder checks them; changing one moves most keys of pools of that size.
var maglevLadder = [...]int{65537, 131101, 262147, 524309, 1048583, 2097169, 4194319, 8388617, MaxMaglevTableSize}

// maglevTable is one immutable membership and its lookup table.
type maglevTable struct {
	m     *members
	names []string // the members' names in name order: slots index this
	slots []uint16 // half the cache of 32-bit entries: Maglev holds up to MaxMaglevNodes
	size  uint64   // len(slots)
}

// NewMaglev returns a Maglev pool of nodes. It returns an error wrapping ErrEmpty, ErrNode or
// ErrWeight for bad nodes, ErrOption for a table size that is not prime, and ErrLimit for a
// table larger than MaxMaglevTableSize or smaller than the node count.
func NewMaglev(nodes []Node, opts MaglevOptions) (*Maglev, error) {
	if opts.TableSize != 0 {
		if err := checkMaglevSize(opts.TableSize); err != nil {
			return nil, err
		}
	}
	m, err := newMembers("maglev", nodes)
	if err != nil {
		return nil, err
	}
	t, err := newMaglevTable(m, opts.TableSize)
	if err != nil {
		return nil, err
	}
	p := &Maglev{tableSize: opts.TableSize}
	p.table.Store(t)
	return p, nil
}

// checkMaglevSize checks an explicit table size.
func checkMaglevSize(size int) error {
	switch {
	case size < 2 || size > MaxMaglevTableSize:
		return fmt.Errorf("pool: maglev: table size %d: allowed range is [2, %d]: %w", size, MaxMaglevTableSize, ErrLimit)
	case !isPrime(size):
		return fmt.Errorf("pool: maglev: table size %d is not prime: %w", size, ErrOption)
	}
	return nil
}

// isPrime reports whether n is prime, by trial division: n is at most MaxMaglevTableSize.
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// maglevWeights returns the members' weights divided by their greatest common divisor, and
// their sum.
func maglevWeights(nodes []Node) (weights []int, total int64) {
	g := 0
	for _, n := range nodes {
		a, b := g, n.Weight
		for b != 0 {
			a, b = b, a%b
		}
		g = a
	}
	weights = make([]int, len(nodes))
	for i, n := range nodes {
		weights[i] = n.Weight / g
		total += int64(weights[i]) // up to 2^32: past a 32-bit int
	}
	return weights, total
}

// newMaglevTable fills the table of m with size slots, or the ladder's size if size is 0.
func newMaglevTable(m *members, size int) (*maglevTable, error) {
	if len(m.nodes) > MaxMaglevNodes { // whatever the weights: a slot names its node in 16 bits
		return nil, fmt.Errorf("pool: maglev: %d nodes: a Maglev pool holds at most %d: %w", len(m.nodes), MaxMaglevNodes, ErrLimit)
	}
	byName := slices.Clone(m.nodes)
	slices.SortFunc(byName, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	weights, total := maglevWeights(byName)
	if size == 0 {
		var err error
		if size, err = maglevLadderSize(total, len(byName)); err != nil {
			return nil, err
		}
	}
	if len(byName) > min(size, MaxMaglevNodes) {
		return nil, fmt.Errorf("pool: maglev: %d nodes: a table of %d slots holds at most %d: %w", len(byName), size, min(size, MaxMaglevNodes), ErrLimit)
	}
	t := &maglevTable{m: m, names: make([]string, len(byName)), size: uint64(size)}
	for i, n := range byName {
		t.names[i] = n.Name
	}
	t.slots = populateMaglev(t.names, weights, total, size)
	return t, nil
}

// maglevLadderSize returns the default table size for a total of divided weights of nodes
// nodes: the first size on the ladder with at least 100 slots per unit of weight.
func maglevLadderSize(total int64, nodes int) (int, error) {
	need := 100 * total
	i := slices.IndexFunc(maglevLadder[:], func(s int) bool { return int64(s) >= need })
	if i < 0 {
		fix := "use fewer nodes"
		if total > int64(nodes) {
			fix = "use fewer nodes or weights with a larger common divisor"
		}
		return 0, fmt.Errorf("pool: maglev: %d nodes of total weight %d (divided by the weights' common divisor) need a table of %d slots, above %d: %s: %w",
			nodes, total, need, MaxMaglevTableSize, fix, ErrLimit)
	}
	return maglevLadder[i], nil
}

// populateMaglev fills a table of size slots by weighted turns (see Maglev). size is prime
// and at least len(names), so every permutation visits every slot and the first sub-round
// gives every node a slot.
func populateMaglev(names []string, weights []int, total int64, size int) []uint16 {
	next := make([]int, len(names)) // the next slot of each node's permutation
	skip := make([]int, len(names))
	for i, name := range names {
		next[i] = int(keyhash.XXH64(name) % uint64(size))
		skip[i] = int(murmur3.Sum64([]byte(name))%uint64(size-1)) + 1
	}
	// One round of turns: sub-round j lists the nodes of weight above j in name order. Each
	// turn fills a slot, so the table is full within the round's first size turns: a round
	// longer than that (weights that add up past the table) is cut there.
	round := make([]uint16, 0, min(total, int64(size)))
	active := make([]uint16, len(names))
	for i := range active {
		active[i] = uint16(i)
	}
	for j := 0; len(active) > 0 && len(round) < size; j++ {
		round = append(round, active[:min(len(active), size-len(round))]...)
		active = slices.DeleteFunc(active, func(i uint16) bool { return weights[i] <= j+1 })
	}

	slots := make([]uint16, size)
	// Near the end a turn probes many taken slots at random: a bit per slot keeps those
	// probes in cache (128 KB for a million slots).
	taken := make([]uint64, (size+63)/64)
	for filled := 0; ; {
		for _, i := range round {
			c := next[i]
			for taken[c/64]&(1<<(c%64)) != 0 {
				if c += skip[i]; c >= size {
					c -= size
				}
			}
			slots[c] = i
			taken[c/64] |= 1 << (c % 64)
			if c += skip[i]; c >= size {
				c -= size
			}
			next[i] = c
			if filled++; filled == size {
				return slots
			}
		}
	}
}

// slot returns the table slot of a key hash: h scaled to [0, size) by a multiplication,
// which is uniform for a uniform h and cheaper than a division.
func (t *maglevTable) slot(h uint64) uint64 {
	hi, _ := bits.Mul64(h, t.size)
	return hi
}

// Locate returns the name of the node that owns key.
func (p *Maglev) Locate(key string) string {
	t := p.table.Load()
	if t == nil { // the zero Maglev
		return ""
	}
	return t.names[t.slots[t.slot(keyhash.XXH64(key))]]
}

// AppendN appends min(n, len(Nodes())) distinct node names for key to dst, the owner first
// and then the nodes of the following table slots in the order it meets them, and returns
// the extended slice. It allocates nothing when dst has room and n <= 16. Its cost is the
// number of slots walked: about n for n much smaller than the node count, up to the whole
// table when n approaches it.
func (p *Maglev) AppendN(dst []string, key string, n int) []string {
	t := p.table.Load()
	if t == nil { // the zero Maglev
		return dst
	}
	want := min(n, len(t.names))
	if want <= 0 {
		return dst
	}
	s := t.slot(keyhash.XXH64(key))
	owner := t.slots[s]
	dst = append(dst, t.names[owner])
	if want == 1 {
		return dst
	}
	var seen picked
	seen.add(int32(owner), 0, len(t.names))
	for seen.len() < want {
		if s++; s == t.size {
			s = 0
		}
		if o := int32(t.slots[s]); !seen.has(o) {
			seen.add(o, 0, len(t.names))
			dst = append(dst, t.names[o])
		}
	}
	return dst
}

// change applies f to the membership and publishes the new table, or returns f's error or
// the table's and changes nothing.
func (p *Maglev) change(f func(m *members) (*members, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.table.Load()
	if cur == nil {
		return zeroError("maglev", "NewMaglev")
	}
	m, err := f(cur.m)
	if err != nil {
		return err
	}
	t, err := newMaglevTable(m, p.tableSize)
	if err != nil {
		return err
	}
	p.table.Store(t)
	return nil
}

// Add adds nodes to the pool, all or none, and rebuilds the table (see Maglev for what moves).
func (p *Maglev) Add(nodes ...Node) error {
	if len(nodes) == 0 {
		return nil
	}
	return p.change(func(m *members) (*members, error) { return m.add("maglev", nodes) })
}

// Remove removes the named nodes, all or none, and rebuilds the table; a pool never becomes
// empty.
func (p *Maglev) Remove(names ...string) error {
	if len(names) == 0 {
		return nil
	}
	return p.change(func(m *members) (*members, error) { return m.remove("maglev", names) })
}

// SetWeight changes the weight of one node and rebuilds the table. Besides the keys the new
// weight gives to or takes from the node, it moves some keys between other nodes.
func (p *Maglev) SetWeight(name string, weight int) error {
	return p.change(func(m *members) (*members, error) { return m.setWeight("maglev", name, weight) })
}

// Nodes returns a copy of the members in the order they joined.
func (p *Maglev) Nodes() []Node {
	if t := p.table.Load(); t != nil {
		return t.m.copyNodes()
	}
	return nil
}

// TableSize returns the number of slots of the current table.
func (p *Maglev) TableSize() int {
	if t := p.table.Load(); t != nil {
		return int(t.size)
	}
	return 0
}
