package compat

import (
	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/pool/bounded"
)

// NewHAProxyBounded returns a bounded.Balancer that places connections as an HAProxy 2.6
// backend with `hash-type consistent` and `hash-balance-factor` does (b.BalanceFactor above
// 100): Acquire is a new connection for a key, Release its end. HAProxy's rule
// (chash_get_server_hash and chash_server_is_eligible in src/lb_chash.c, v2.6.0) is
//
//  1. the key goes to the nearest point, as under NewHAProxy; from that point HAProxy walks
//     the points clockwise, wrapping around, to the first server that is eligible: the
//     walk's servers in order are the pool's AppendN order;
//
//  2. a server with eweight E (16 × its weight, BE_WEIGHT_SCALE) is eligible when its
//     connections are fewer than its slots, where, with s the backend's connections
//     (proxy->served), T the sum of the eweights of the servers that take keys and P the
//     sum of the eweights of those before it in configuration order (cumulative_weight,
//     set by recount_servers in src/backend.c):
//
//     tot = ((s + 1) × factor + 99) / 100
//     slots = E × (tot / T) + ((P + E) × (tot % T)) / T - (P × (tot % T)) / T, at least 1
//
//     in unsigned 32-bit integer arithmetic: tot is ceil((s+1) × factor/100), shared out
//     in proportion to the weights, the remainder by cumulative weight, so that the slots
//     add up to tot exactly and the rounding favours servers by their place in the section.
//
// The cumulative weights are set once, when HAProxy loads the configuration (recount_servers
// runs from chash_init_server_tree only): after a `disable server` the others keep theirs,
// and the slots can add up to less than s + 1, so that no server is eligible (with seven
// servers of which s1, s4 and s7 are up, factor 101 and three connections on them, one each).
// HAProxy's walk then gives up after its second wrap and returns the server of the last point
// of the ring; so does the Balancer (bounded.Options.Full).
//
// So a server's bound is the paper's ceil(c × its share) only on average: with five equal
// servers, factor 125 and four connections out, tot is 7 and the slots 1, 1, 2, 1, 2.
// Connections count from the moment HAProxy assigns a server to the moment the server side
// closes; those of a disabled server (Remove) still count in s until they end, as Release
// does here. Check the vectors of testdata/compat/haproxy/bounded, made by driving HAProxy
// with slow servers.
func NewHAProxyBounded(b HAProxyBackend) (*bounded.Balancer, error) {
	if !b.Consistent {
		return nil, configErr("haproxy", b.Line, "backend %q: hash-balance-factor needs hash-type consistent (HAProxy ignores it under map-based)", b.Name)
	}
	if b.BalanceFactor <= 100 {
		return nil, configErr("haproxy", b.Line, "backend %q: hash-balance-factor %d: must be greater than 100 for bounded loads", b.Name, b.BalanceFactor)
	}
	p, lines, err := newHAProxy(b)
	if err != nil {
		return nil, err
	}
	bal, err := bounded.New(p, bounded.Options{
		Capacity: haproxyCapacity(lines, uint32(b.BalanceFactor)),
		Full:     func(nodes []pool.Node) string { return haproxyLastServer(lines, nodes) },
	})
	if err != nil {
		return nil, poolErr("haproxy", b.Line, err)
	}
	return bal, nil
}

// haproxyCapacity is chash_server_is_eligible as a bounded capacity rule: a server may hold
// up to its slots for total = s + 1. The cumulative weights are those of the configuration
// as loaded: HAProxy sets them once (recount_servers, called by chash_init_server_tree
// only), from the servers that take keys at start, and never again; a server that did not
// take keys at start, or that joined later, keeps 0. The eweights and their sum follow the
// changes (tot_wact).
func haproxyCapacity(lines []haproxyLine, factor uint32) func(nodes []pool.Node) func(int, uint64) uint64 {
	initial := map[string]uint32{}
	var sum uint32
	for _, l := range lines {
		if l.takes {
			initial[l.name] = sum
			sum += uint32(16 * l.weight)
		}
	}
	return func(nodes []pool.Node) func(int, uint64) uint64 {
		eweight := make([]uint32, len(nodes))
		cumulative := make([]uint32, len(nodes))
		var all uint32
		for i, n := range nodes {
			eweight[i], cumulative[i] = uint32(16*n.Weight), initial[n.Name]
			all += eweight[i]
		}
		return func(i int, total uint64) uint64 {
			tot := (uint32(total)*factor + 99) / 100
			e, p := eweight[i], cumulative[i]
			rem := tot % all
			slots := e*(tot/all) + (p+e)*rem/all - p*rem/all
			return uint64(max(slots, 1))
		}
	}
}

// haproxyLastServer is the server of the ring's highest point, the last one in the tree's
// order (equal points in insertion order): where chash_get_server_hash's walk stops when
// no server is eligible.
func haproxyLastServer(lines []haproxyLine, nodes []pool.Node) string {
	points := haproxyPoints(nil, lines, nodes)
	if len(points) == 0 {
		return ""
	}
	last := points[0]
	for _, p := range points[1:] {
		if p.Pos >= last.Pos {
			last = p
		}
	}
	return nodes[last.Node].Name
}
