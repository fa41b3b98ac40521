// Package bounded is consistent hashing with bounded loads (Vahab Mirrokni, Mikkel Thorup and
// Morteza Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018,
// arXiv:1608.01350) over any pool.Pool: a key goes to the first node of its preference order
// (the order pool.Pool.AppendN gives, the owner first) whose load stays within its capacity,
//
//	cap(node) = ceil(c × total × weight(node) / total weight)
//
// where total is the load of every key placed, the new one included, and c > 1 is the
// balancing factor (1.25 unless set). With equal weights that is the paper's ceil(c·m/n): no
// node carries more than c times the average, rounded up, and a key leaves its owner only
// when the owner is full.
//
// It comes in two forms.
//
//   - Balancer, the live form, for connection-style load: Acquire places one unit of load
//     (a connection, a stream, a long request) and returns a Lease naming the node; Release
//     gives it back. Acquire takes no lock: the loads are atomic counters, the membership an
//     immutable table published atomically. Releasing a lease twice returns an error
//     wrapping ErrReleased and changes no count.
//   - Assign, the batch form, for assignments computed as a whole: tenants to databases,
//     partitions to consumers. It takes keys with weights and returns a node for each, every
//     node's load within its capacity for the total weight, and the same result for the same
//     pool and items in any order.
//
// # What a join or a leave moves
//
// The live form never moves load: a lease stays where it was acquired until it is released,
// as in HAProxy (whose hash-balance-factor is this rule, see package compat). A join lowers
// every capacity, so nodes can be above the new capacity until their leases end; new
// acquires skip them meanwhile. A node that leaves keeps its leases (they still count in the
// total, as HAProxy counts a disabled server's connections) until they are released.
//
// The batch form is a function of the pool and the items, so a change moves the items whose
// node differs between the two results. A key whose owner has room stays where consistent
// hashing puts it, so the keys that move on a join are the ones consistent hashing moves to
// the new node, plus the overflow that cascades: a key pushed out of a full node takes the
// room of one placed later in the canonical order, which moves in turn. Mirrokni, Thorup and
// Zadimoghaddam bound the expected number of balls moved by a bin's insertion or deletion by
// O(C/ε²) for c = 1+ε and C = ceil(c·m/n) (Aamand, Knudsen and Thorup, "Load Balancing with
// Dynamic Set of Balls and Bins", STOC 2021, improve it to O(C/ε)); consistent hashing
// without bounds moves about m/n, about C/c. TestMovement measures this package against both
// (go test -v -run TestMovement; 20 nodes of a pool.Ring, unit items, the mean of 10 joins
// and 10 leaves):
//
//	c     m/n  C    C/ε²   join moved  ÷ CH's   ÷ C/ε²   leave moved  ÷ CH's   ÷ C/ε²
//	1.1    10   11  1100     16.9       1.77     0.015      15.7       1.57     0.014
//	1.25   10   13   208     12.8       1.34     0.062      11.8       1.18     0.057
//	1.5    10   15    60      9.6       1.01     0.160       9.8       0.98     0.163
//	2      10   20    20      9.3       0.98     0.465       9.2       0.92     0.460
//	1.25  100  125  2000    103.3       1.08     0.052      96.3       0.96     0.048
//
// where CH's is what consistent hashing moves, m/(n+1) on a join and m/n on a leave. So a
// change moves at most 1.8 times what consistent hashing moves, the most with little slack
// and few keys per node, and at most 0.53 times the paper's C/ε² taken with constant 1
// (c = 2, 100 keys per node); the test fails above 2.5 times and above C/ε².
//
// # Skewed keys
//
// Consistent hashing spreads keys, not requests: under a Zipf(1.1) stream of 200,000
// requests over 10,000 keys on 10 nodes the fullest node takes 2.00 (pool.Ring), 2.87
// (pool.Rendezvous) and 3.34 (pool.Maglev) times the average. With every request held as
// a lease under c = 1.25 it takes 1.250 on all three, at the cost of 17% to 29% of the
// requests going past their key's owner (TestSkew; shard compare -zipf 1.1 prints the same
// for every strategy).
//
// # Errors
//
// Options that cannot be used (a factor <= 1, above 65536 or NaN), a nil or empty pool, bad
// items (a negative weight, a key given twice, a total above MaxTotal) and a second Release
// return errors that start with "bounded: " and wrap one of the sentinel errors below, which
// callers test with errors.Is. Nothing here panics on data.
package bounded

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/shardkit/shard/pool"
)

var (
	// ErrFactor reports a balancing factor that cannot be used: not above 1, above
	// MaxFactor, or NaN.
	ErrFactor = errors.New("invalid balancing factor")
	// ErrEmpty reports a nil pool, a pool with no nodes, or the zero Balancer.
	ErrEmpty = errors.New("no nodes")
	// ErrReleased reports a lease released a second time.
	ErrReleased = errors.New("lease already released")
	// ErrItem reports an item Assign cannot take: a weight out of range, a key given twice,
	// or weights adding up to more than MaxTotal.
	ErrItem = errors.New("invalid item")
	// ErrInfeasible reports an item that fits on no node within its capacity (see Assign),
	// or a lease when every node is full under an Options.Capacity rule without Full.
	ErrInfeasible = errors.New("no node has room")
)

const (
	// DefaultFactor is the balancing factor c when Options.Factor is zero: HAProxy's and
	// Vimeo's choice (hash-balance-factor 125).
	DefaultFactor = 1.25
	// MaxFactor is the largest balancing factor; above it the bound no longer bounds.
	MaxFactor = 1 << 16
	// MaxTotal is the largest total load: the sum of Assign's item weights, or the leases
	// out at once. With node weights up to pool.MaxWeight it keeps total × weight within 63
	// bits, so capacities are computed exactly.
	MaxTotal = 1 << 46
)

// Options configure New and Assign. The zero value is the rule of the package documentation
// with c = 1.25.
type Options struct {
	// Factor is the balancing factor c, in (1, MaxFactor]: no node takes load past
	// ceil(c × its share of the total). Zero means DefaultFactor. It is used exactly: the
	// capacity is computed from the float64's exact binary value with integer arithmetic,
	// so every platform computes the same capacities.
	Factor float64
	// Capacity, when set, replaces the rule above (and Factor): called with the members,
	// as the pool's Nodes returns them, whenever they change, it returns cap, where
	// cap(i, total) is the most load node i may carry once the total load, the new load
	// included, is total. It must return at least 1 for some node, and should give the
	// nodes room for the total together (the sum of cap(i, total) at least total), or a
	// placement can find no room. Package compat uses it for HAProxy's rounding.
	Capacity func(nodes []pool.Node) func(node int, total uint64) uint64
	// Full, when set with Capacity, names the member that takes a lease when every node is
	// at its capacity, which only a Capacity rule whose capacities add up to less than the
	// total allows: called with the members whenever they change. HAProxy's walk then ends
	// on the server of its ring's last point. Nil means that Acquire returns an error
	// wrapping ErrInfeasible then; Assign never uses it.
	Full func(nodes []pool.Node) string
}

// capRule returns the capacity rule of opts, or an error wrapping ErrFactor.
func (o Options) capRule(what string) (func(nodes []pool.Node) func(int, uint64) uint64, error) {
	if o.Capacity != nil {
		return o.Capacity, nil
	}
	f, err := newFactor(what, o.Factor)
	if err != nil {
		return nil, err
	}
	return f.rule, nil
}

// factor is a balancing factor as an exact fraction m / 2^k.
type factor struct {
	m uint64
	k uint
}

// newFactor checks c and returns it as a fraction; zero means DefaultFactor.
func newFactor(what string, c float64) (factor, error) {
	if c == 0 {
		c = DefaultFactor
	}
	if !(c > 1 && c <= MaxFactor) { // also refuses NaN
		return factor{}, fmt.Errorf("bounded: %s: factor %v: allowed range is (1, %d]: %w", what, c, MaxFactor, ErrFactor)
	}
	frac, exp := math.Frexp(c) // c = frac × 2^exp, frac in [0.5, 1), exp in [1, 17]
	f := factor{m: uint64(math.Ldexp(frac, 53)), k: uint(53 - exp)}
	for f.m&1 == 0 && f.k > 0 {
		f.m >>= 1
		f.k--
	}
	return f, nil
}

// rule is the default capacity rule: ceil(c × total × w / W).
func (f factor) rule(nodes []pool.Node) func(int, uint64) uint64 {
	w := make([]uint64, len(nodes))
	var sum uint64
	for i, n := range nodes {
		w[i] = uint64(max(n.Weight, 1))
		sum += w[i]
	}
	return func(i int, total uint64) uint64 { return f.ceilShare(total*w[i], sum) }
}

// ceilShare returns ceil(c × q / d) for q < 2^63 and d > 0, or MaxUint64 if it does not fit.
// c × q = m × q / 2^k: a 128-bit product, a rounded-up shift, a rounded-up division
// (ceil(ceil(a/b)/d) = ceil(a/(b×d)) for positive integers).
func (f factor) ceilShare(q, d uint64) uint64 {
	hi, lo := bits.Mul64(f.m, q)
	if f.k > 0 {
		up := lo&(1<<f.k-1) != 0
		lo = lo>>f.k | hi<<(64-f.k)
		hi >>= f.k
		if up {
			var carry uint64
			lo, carry = bits.Add64(lo, 1, 0)
			hi += carry
		}
	}
	if hi >= d {
		return math.MaxUint64
	}
	quo, rem := bits.Div64(hi, lo, d)
	if rem != 0 {
		if quo == math.MaxUint64 {
			return quo
		}
		quo++
	}
	return quo
}

// checkPool returns the members of p, or an error wrapping ErrEmpty.
func checkPool(what string, p pool.Pool) ([]pool.Node, error) {
	if p == nil {
		return nil, fmt.Errorf("bounded: %s: nil pool: %w", what, ErrEmpty)
	}
	nodes := p.Nodes()
	if len(nodes) == 0 {
		return nil, fmt.Errorf("bounded: %s: the pool has no nodes (a zero pool?): %w", what, ErrEmpty)
	}
	return nodes, nil
}

// walker yields the preference order of keys in a pool: the owner from Locate, then the
// rest from AppendN, fetched in doubling batches so that a key whose first nodes have room
// costs a few lookups, not one per member.
type walker struct {
	p   pool.Pool
	n   int // members
	buf []string
}

// each calls yield with the nodes of key in preference order until it returns true, and
// reports whether it did; with skipOwner it starts at the second node.
func (w *walker) each(key string, skipOwner bool, yield func(name string) bool) bool {
	if !skipOwner && yield(w.p.Locate(key)) {
		return true
	}
	done := 1
	for want := 4; done < w.n; want *= 2 {
		want = min(want, w.n)
		w.buf = w.p.AppendN(w.buf[:0], key, want)
		if len(w.buf) <= done { // the pool has fewer members than it had
			return false
		}
		for _, name := range w.buf[done:] {
			if yield(name) {
				return true
			}
		}
		done = len(w.buf)
	}
	return false
}
