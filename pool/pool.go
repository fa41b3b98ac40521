// Package pool places keys on named, weighted nodes that join and leave anywhere.
//
// Package shard numbers its shards 0..n-1 and grows or shrinks at the end. The services that
// route keys rarely run like that: their nodes have names ("10.0.0.7:6379", "cache-b"),
// bigger machines carry more weight, a node in the middle fails and leaves, and each key needs
// two or three distinct nodes for replicas or failover. Every strategy here implements [Pool]:
//
//   - Locate returns the node that owns a key;
//   - AppendN returns the first n distinct nodes for a key, the owner first (replicas, or the
//     order in which to fail over);
//   - Add, Remove and SetWeight change the membership, all or nothing;
//   - Nodes returns the members.
//
// Locate and AppendN take no lock and never allocate (AppendN given room in dst). They are
// safe for concurrent use with each other and with Add, Remove and SetWeight: each change
// builds a new immutable table and publishes it atomically, so a lookup sees the membership
// before or after a change, never a mix. Changes are serialized.
//
// Each strategy's documentation says what a change moves, what it costs, and what state
// other processes need in order to place keys the same way: for most strategies that is the
// membership alone (the same nodes and weights give the same placement, in whatever order
// they joined); for history-dependent ones it is a text form of their state.
//
// Bad input (an empty or duplicate name, a weight out of range, an unknown name, removing
// the last node) returns an error that says what was wrong, starts with "pool: " and wraps
// one of the sentinel errors below, which callers test with errors.Is. A failed change
// leaves the pool exactly as it was.
package pool

import (
	"errors"
	"fmt"
)

// Node is a member of a pool.
type Node struct {
	// Name identifies the node and is what name-based strategies hash, for example
	// "10.0.0.7:6379". It is unique within a pool and not empty.
	Name string
	// Weight is the node's relative capacity, in [0, MaxWeight]: a node of weight 2 should
	// own twice the keys of a node of weight 1. Zero means 1.
	Weight int
}

// MaxWeight is the largest weight of a node. A strategy may refuse a pool whose weights add
// up to more points or table slots than it can hold, with an error wrapping ErrLimit.
const MaxWeight = 1 << 16

// Pool places keys on named nodes. See the package documentation for the concurrency
// contract and the errors.
type Pool interface {
	// Locate returns the name of the node that owns key.
	Locate(key string) string
	// AppendN appends to dst the names of min(n, len(Nodes())) distinct nodes for key, the
	// owner first, and returns the extended slice; n <= 0 appends nothing. It does not
	// allocate when dst has room for them.
	AppendN(dst []string, key string, n int) []string
	// Add adds nodes to the pool, all or none.
	Add(nodes ...Node) error
	// Remove removes the named nodes from the pool, all or none; a pool never becomes empty.
	Remove(names ...string) error
	// SetWeight changes the weight of one node in place, moving only the keys that the new
	// weight gives to or takes from it where the strategy allows (see each strategy).
	SetWeight(name string, weight int) error
	// Nodes returns a copy of the members in the order they joined, weights normalised (0
	// becomes 1).
	Nodes() []Node
}

var (
	// ErrNode reports a node name that cannot be used: empty, already a member (or given
	// twice), or not a member where one is named.
	ErrNode = errors.New("invalid node")
	// ErrWeight reports a weight outside [0, MaxWeight].
	ErrWeight = errors.New("weight out of range")
	// ErrEmpty reports a pool that would have no node: a constructor given none, or a Remove
	// of every member.
	ErrEmpty = errors.New("pool would be empty")
	// ErrLimit reports a pool larger than a strategy can hold: too many nodes, points or
	// table slots. The error says which limit and its value.
	ErrLimit = errors.New("pool too large")
	// ErrOption reports a strategy's option that cannot be used, such as a Maglev table size
	// that is not prime or a negative probe count.
	ErrOption = errors.New("invalid option")
	// ErrText reports a saved state that cannot be loaded; the error names the line.
	ErrText = errors.New("invalid state text")
)

// members is an immutable membership: the nodes in the order they joined, weights
// normalised, with an index by name. Every strategy validates changes through it, so every
// strategy refuses the same inputs with the same errors.
type members struct {
	nodes []Node
	index map[string]int // name -> position in nodes
}

// newMembers validates the nodes of a new pool of the given strategy.
func newMembers(strategy string, nodes []Node) (*members, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("pool: %s: no nodes: %w", strategy, ErrEmpty)
	}
	return (&members{}).add(strategy, nodes)
}

// add returns the membership with nodes appended, or an error naming the first bad node.
func (m *members) add(strategy string, nodes []Node) (*members, error) {
	next := &members{
		nodes: make([]Node, len(m.nodes), len(m.nodes)+len(nodes)),
		index: make(map[string]int, len(m.nodes)+len(nodes)),
	}
	copy(next.nodes, m.nodes)
	for i, n := range m.nodes {
		next.index[n.Name] = i
	}
	for _, n := range nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("pool: %s: add: empty node name: %w", strategy, ErrNode)
		}
		if _, dup := next.index[n.Name]; dup {
			return nil, fmt.Errorf("pool: %s: add %.64q: already a member: %w", strategy, n.Name, ErrNode)
		}
		w, err := checkWeight(strategy, n.Name, n.Weight)
		if err != nil {
			return nil, err
		}
		next.index[n.Name] = len(next.nodes)
		next.nodes = append(next.nodes, Node{Name: n.Name, Weight: w})
	}
	return next, nil
}

// remove returns the membership without the named nodes, or an error naming the first name
// that is not a member or is given twice, or saying the pool would be empty.
func (m *members) remove(strategy string, names []string) (*members, error) {
	gone := make(map[string]bool, len(names))
	for _, name := range names {
		if _, ok := m.index[name]; !ok {
			return nil, fmt.Errorf("pool: %s: remove %.64q: not a member: %w", strategy, name, ErrNode)
		}
		if gone[name] {
			return nil, fmt.Errorf("pool: %s: remove %.64q: named twice: %w", strategy, name, ErrNode)
		}
		gone[name] = true
	}
	if len(gone) == len(m.nodes) {
		return nil, fmt.Errorf("pool: %s: remove %d nodes: that is every member: %w", strategy, len(gone), ErrEmpty)
	}
	next := &members{
		nodes: make([]Node, 0, len(m.nodes)-len(gone)),
		index: make(map[string]int, len(m.nodes)-len(gone)),
	}
	for _, n := range m.nodes {
		if !gone[n.Name] {
			next.index[n.Name] = len(next.nodes)
			next.nodes = append(next.nodes, n)
		}
	}
	return next, nil
}

// setWeight returns the membership with name's weight changed, in the same order.
func (m *members) setWeight(strategy, name string, weight int) (*members, error) {
	i, ok := m.index[name]
	if !ok {
		return nil, fmt.Errorf("pool: %s: set weight of %.64q: not a member: %w", strategy, name, ErrNode)
	}
	w, err := checkWeight(strategy, name, weight)
	if err != nil {
		return nil, err
	}
	next := &members{nodes: make([]Node, len(m.nodes)), index: m.index} // same names: share the index
	copy(next.nodes, m.nodes)
	next.nodes[i].Weight = w
	return next, nil
}

// copyNodes returns a copy of the nodes for Nodes; none for no membership (a zero pool).
func (m *members) copyNodes() []Node {
	if m == nil {
		return nil
	}
	out := make([]Node, len(m.nodes))
	copy(out, m.nodes)
	return out
}

// checkWeight returns the normalised weight (0 becomes 1), or an error wrapping ErrWeight.
func checkWeight(strategy, name string, w int) (int, error) {
	if w < 0 || w > MaxWeight {
		return 0, fmt.Errorf("pool: %s: node %.64q: weight %d: allowed range is [0, %d]: %w", strategy, name, w, MaxWeight, ErrWeight)
	}
	return max(w, 1), nil
}
