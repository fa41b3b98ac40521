package pool

import (
	"fmt"
	"iter"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/segmap"
)

// ErrDirectory reports a directory entry that cannot be used: an owner longer than
// MaxOwnerLen, a key given where its owner is meant, an owner given twice, or a saved
// directory that is malformed. It is the same value as shard.ErrDirectory.
var ErrDirectory = segmap.ErrDirectory

// MaxOwnerLen is the longest owner a Directory pins, in bytes.
const MaxOwnerLen = segmap.MaxOwnerLen

// Directory is a Pool that looks a key's owner up in an explicit owner -> node table first
// and falls back to another Pool for every owner it does not list: package shard's Directory
// for named nodes. Pin a hot owner to a node of its own, or move single owners between nodes
// without changing the placement of anyone else.
//
// A key's owner is the key itself, or what the owner function given to NewDirectory returns
// (shard.PrefixOwner routes "1-A1" as "1"); the fallback places the owner, not the key.
// AppendN of a pinned owner returns its node first, then the fallback's order for the owner
// without that node.
//
// Locate and AppendN take no lock and never allocate beyond what the fallback's do (AppendN
// given room in dst), for pinned and unpinned keys alike; Pin, Unpin, Load and UnmarshalText
// publish a new table atomically, copying one segment of it. Change the membership only
// through the Directory: Remove refuses to remove a node that owners are pinned to, so no
// key is ever placed on a node that left.
//
// The zero Directory has no fallback: Locate returns "", AppendN appends nothing, and every
// change returns an error. Make one with NewDirectory.
type Directory struct {
	p     Pool
	owner func(key string) string
	mu    sync.Mutex // serializes Pin, Unpin, Load, UnmarshalText, Add, Remove and SetWeight
	pins  atomic.Pointer[segmap.Map[string]]
}

// NewDirectory returns a Directory with no entries that falls back to p. owner returns the
// owner of a key; nil means the key itself. owner must be deterministic, safe for concurrent
// use and should not allocate: every lookup calls it. It panics if p is nil.
func NewDirectory(p Pool, owner func(key string) string) *Directory {
	if p == nil {
		panic("pool: NewDirectory: nil Pool")
	}
	d := &Directory{p: p, owner: owner}
	d.pins.Store(segmap.New[string]())
	return d
}

// Clone returns a Directory over p with d's owner function and entries, shared copy-on-write
// (O(segments), not O(entries)); later changes of either do not show in the other. It fails
// with an error wrapping ErrNode, naming an owner, if an entry names a node that is not a
// member of p. See shard.Directory.Clone for its use in a migration.
func (d *Directory) Clone(p Pool) (*Directory, error) {
	if p == nil {
		return nil, fmt.Errorf("pool: directory: clone: nil Pool: %w", ErrDirectory)
	}
	pins := d.pins.Load()
	names := memberNames(p)
	count, owner := pins.Matching(func(node string) bool { _, ok := names[node]; return !ok })
	if count > 0 {
		node, _ := pins.Get(owner)
		return nil, fmt.Errorf("pool: directory: clone: owner %.64q is pinned to %.64q, not a member (owners pinned to non-members: %d): %w", owner, node, count, ErrNode)
	}
	c := &Directory{p: p, owner: d.owner}
	if pins == nil {
		pins = segmap.New[string]()
	}
	c.pins.Store(pins)
	return c, nil
}

// memberNames returns p's node names, each mapped to itself: entries keep the member's
// string, so a million entries share a few names' bytes.
func memberNames(p Pool) map[string]string {
	nodes := p.Nodes()
	names := make(map[string]string, len(nodes))
	for _, n := range nodes {
		names[n.Name] = n.Name
	}
	return names
}

func (d *Directory) ownerOf(key string) string {
	if d.owner == nil {
		return key
	}
	return d.owner(key)
}

// Locate returns the node of key's owner: its entry if it has one, else where the fallback
// places the owner; "" for the zero Directory.
func (d *Directory) Locate(key string) string {
	if d.p == nil {
		return ""
	}
	owner := d.ownerOf(key)
	if node, ok := d.pins.Load().Get(owner); ok {
		return node
	}
	return d.p.Locate(owner)
}

// AppendN appends to dst the names of min(n, len(Nodes())) distinct nodes for key: for an
// unpinned owner the fallback's, for a pinned one its node first and then the fallback's
// order without that node. It does not allocate when dst has room for them and the
// fallback's AppendN does not.
func (d *Directory) AppendN(dst []string, key string, n int) []string {
	if d.p == nil {
		return dst
	}
	owner := d.ownerOf(key)
	node, ok := d.pins.Load().Get(owner)
	start := len(dst)
	dst = d.p.AppendN(dst, owner, n)
	if !ok || len(dst) == start {
		return dst
	}
	got := dst[start:]
	i := 0
	for i < len(got) && got[i] != node {
		i++
	}
	if i == len(got) { // not among the first n: it displaces the last
		i = len(got) - 1
	}
	copy(got[1:i+1], got[:i])
	got[0] = node
	return dst
}

// Add adds nodes to the fallback.
func (d *Directory) Add(nodes ...Node) error {
	if d.p == nil {
		return errZero("add")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.p.Add(nodes...)
}

// Remove removes the named nodes from the fallback, all or none. It refuses, with an error
// wrapping ErrNode that names the least owner concerned and how many there are, to remove a
// node that owners are pinned to: repin or unpin them first (after moving their data).
func (d *Directory) Remove(names ...string) error {
	if d.p == nil {
		return errZero("remove")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	gone := make(map[string]bool, len(names))
	for _, name := range names {
		gone[name] = true
	}
	pins := d.pins.Load()
	if count, owner := pins.Matching(func(node string) bool { return gone[node] }); count > 0 {
		node, _ := pins.Get(owner)
		return fmt.Errorf("pool: directory: remove %.64q: owner %.64q is pinned to it (owners pinned to the nodes to remove: %d): repin or unpin them first: %w",
			node, owner, count, ErrNode)
	}
	return d.p.Remove(names...)
}

// SetWeight changes a node's weight in the fallback; entries are not affected.
func (d *Directory) SetWeight(name string, weight int) error {
	if d.p == nil {
		return errZero("set weight")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.p.SetWeight(name, weight)
}

// Nodes returns the fallback's members; nil for the zero Directory.
func (d *Directory) Nodes() []Node {
	if d.p == nil {
		return nil
	}
	return d.p.Nodes()
}

// errZero is the error of a change to the zero Directory; it wraps ErrEmpty, as the zero
// value of a pool has no node.
func errZero(op string) error {
	return fmt.Errorf("pool: directory: %s: zero Directory: make one with NewDirectory: %w", op, ErrEmpty)
}

// Pin sets owner's entry to node, a member: from now on every key of owner is placed there.
// owner must be an owner as the owner function returns it, at most MaxOwnerLen bytes (else
// the error wraps ErrDirectory); a node that is not a member is an error wrapping ErrNode.
// Pin changes only the placement: moving owner's data first is the caller's job. On error
// nothing changes.
func (d *Directory) Pin(owner, node string) error {
	if d.p == nil {
		return errZero("pin")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	name, err := d.checkEntry(memberNames(d.p), owner, node)
	if err != nil {
		return fmt.Errorf("pool: directory: pin %w", err)
	}
	d.pins.Store(d.pins.Load().Set(owner, name))
	return nil
}

// checkEntry returns the member's own string for node, or an error (without the package
// prefix) if owner cannot be pinned to node.
func (d *Directory) checkEntry(names map[string]string, owner, node string) (string, error) {
	if err := segmap.CheckOwner(owner, d.owner); err != nil {
		return "", err
	}
	name, member := names[node]
	if !member {
		return "", fmt.Errorf("owner %.64q to %.64q: not a member: %w", owner, node, ErrNode)
	}
	return name, nil
}

// Unpin removes owner's entry, so that the fallback places owner again, and reports whether
// there was one.
func (d *Directory) Unpin(owner string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	next, ok := d.pins.Load().Delete(owner)
	if ok {
		d.pins.Store(next)
	}
	return ok
}

// Pinned returns owner's entry and whether it has one. It takes no lock and never allocates.
func (d *Directory) Pinned(owner string) (node string, ok bool) {
	return d.pins.Load().Get(owner)
}

// Len returns the number of entries.
func (d *Directory) Len() int { return d.pins.Load().Len() }

// Entries yields every entry, in increasing byte order of the owners, as the directory was
// when Entries was called: the rows to store in a database table (see Load).
func (d *Directory) Entries() iter.Seq2[string, string] {
	return d.pins.Load().Sorted()
}

// Load replaces every entry with entries, in any order, atomically: the way to read the
// directory back from a database table. Each entry is checked as Pin checks it, and an owner
// given twice is an error wrapping ErrDirectory; the error names the entry. On error nothing
// changes.
func (d *Directory) Load(entries iter.Seq2[string, string]) error {
	if d.p == nil {
		return errZero("load")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	names := memberNames(d.p)
	pins, err := segmap.BuildChecked(entries, func(owner, node string) (string, error) {
		return d.checkEntry(names, owner, node)
	})
	if err != nil {
		return fmt.Errorf("pool: directory: load: %w", err)
	}
	d.pins.Store(pins)
	return nil
}

// MarshalText saves the entries as text: a header line and one line per entry in increasing
// byte order of the owners, owner and node each as a Go string literal:
//
//	directory entries=2
//	"1" "cache-b"
//	"user:42" "10.0.0.7:6379"
//
// It never fails.
func (d *Directory) MarshalText() ([]byte, error) {
	return segmap.AppendText(nil, d.pins.Load(), strconv.AppendQuote), nil
}

// UnmarshalText replaces every entry with those of a text saved by MarshalText, atomically.
// Lines must be in increasing order of the owners, each once, the header's count must match,
// and every node must be a member. Errors name the line and wrap ErrDirectory; on error
// nothing changes.
func (d *Directory) UnmarshalText(text []byte) error {
	if d.p == nil {
		return errZero("text")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	names := memberNames(d.p)
	pins, err := segmap.ParseText(text, func(owner string, field []byte) (string, error) {
		node, err := strconv.Unquote(string(field))
		if err != nil || field[0] != '"' {
			return "", fmt.Errorf("owner %.64q: node %.40q: want a node name as a Go string literal", owner, field)
		}
		return d.checkEntry(names, owner, node)
	})
	if err != nil {
		return fmt.Errorf("pool: directory: text %v: %w", err, ErrDirectory)
	}
	d.pins.Store(pins)
	return nil
}
