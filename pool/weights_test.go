package pool

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/ring"
)

// Weights 1..4 over 10 and 100 nodes, 1M keys: each node's share against weight/total.
//
// What can be asked of 1M keys: a node's count is binomial, so its share deviates from the
// expected p by sd = sqrt((1-p)/(N p)) relative, 1.6% for a node of weight 1 among 100 (p =
// 1/250); a ring adds its arcs' spread, about 1/sqrt(points of the node) relative. So each
// node must be within 2% where 2% is over 3.5 of those deviations (10 nodes), each weight's
// total share within 2% always, and every node within 4.5 deviations. Free of key noise, a
// ring's exact shares (the arcs its nodes own) are within 2% at both sizes.
func TestWeightShares(t *testing.T) {
	nkeys := 1_000_000
	if quick() {
		nkeys = 100_000
	}
	keys := testKeys(nkeys)
	for _, size := range []int{10, 100} {
		nodes := make([]Node, size)
		total := 0
		for i := range nodes {
			nodes[i] = Node{Name: fmt.Sprintf("w-%03d", i), Weight: 1 + i%4}
			total += nodes[i].Weight
		}
		vnodes := ring.MaxPoints / total // as many points as a ring holds
		if quick() {
			vnodes = 2000
		}
		r, err := NewRing(nodes, RingOptions{Vnodes: vnodes})
		require.NoError(t, err)
		// The ring's exact shares, free of key noise: the arcs each node owns.
		s := r.state.Load()
		arcs := map[string]float64{}
		for a := range s.table.Arcs() {
			arcs[s.names[a.Owner]] += (float64(a.Last-a.First) + 1) / math.Exp2(64)
		}
		worstArc := 0.0
		for _, n := range nodes {
			p := float64(n.Weight) / float64(total)
			worstArc = max(worstArc, math.Abs(arcs[n.Name]-p)/p)
		}
		t.Logf("ring, %d nodes, %d points per unit of weight: the arcs of the worst node are %.2f%% off weight/total", size, vnodes, 100*worstArc)
		if !quick() {
			require.LessOrEqual(t, worstArc, 0.02, "with the most points a ring holds, every node's arcs are within 2%")
		}
		rv, err := NewRendezvous(nodes, RendezvousOptions{})
		require.NoError(t, err)
		for _, c := range []struct {
			name string
			p    Pool
			arcs bool
		}{{"ring", r, true}, {"rendezvous", rv, false}} {
			count := map[string]int{}
			for _, k := range keys {
				count[c.p.Locate(k)]++
			}
			worstNode, worstWeight := 0.0, 0.0
			byWeight, classWeight := map[int]int{}, map[int]int{}
			for _, n := range nodes {
				p := float64(n.Weight) / float64(total)
				dev := math.Abs(float64(count[n.Name])/float64(nkeys)-p) / p
				sd := math.Sqrt((1 - p) / (float64(nkeys) * p))
				if c.arcs {
					sd = math.Hypot(sd, 1/math.Sqrt(float64(n.Weight*vnodes)))
				}
				require.LessOrEqualf(t, dev, 4.5*sd, "%s, %d nodes: %s of weight %d off by %.2f%%", c.name, size, n.Name, n.Weight, 100*dev)
				if 3.5*sd <= 0.02 {
					require.LessOrEqualf(t, dev, 0.02, "%s, %d nodes: %s of weight %d", c.name, size, n.Name, n.Weight)
				}
				worstNode = max(worstNode, dev)
				byWeight[n.Weight] += count[n.Name]
				classWeight[n.Weight] += n.Weight
			}
			for w, got := range byWeight {
				p := float64(classWeight[w]) / float64(total)
				dev := math.Abs(float64(got)/float64(nkeys)-p) / p
				if !quick() {
					require.LessOrEqualf(t, dev, 0.02, "%s, %d nodes: nodes of weight %d together", c.name, size, w)
				}
				worstWeight = max(worstWeight, dev)
			}
			t.Logf("%s, %d nodes (weights 1..4, %d points per unit of weight for the ring), %d keys: worst node %.2f%% off weight/total, worst weight class %.2f%%",
				c.name, size, vnodes, nkeys, 100*worstNode, 100*worstWeight)
		}
	}
}
