package bounded

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// movedItems returns how many items Assign places differently before and after change.
func movedItems(t *testing.T, nodes []pool.Node, items []Item, c float64, change func(*pool.Ring) error) int {
	t.Helper()
	ring, err := pool.NewRing(nodes, pool.RingOptions{})
	require.NoError(t, err)
	before, err := Assign(ring, items, Options{Factor: c})
	require.NoError(t, err)
	require.NoError(t, change(ring))
	after, err := Assign(ring, items, Options{Factor: c})
	require.NoError(t, err)
	moved := 0
	for i := range items {
		if before[i] != after[i] {
			moved++
		}
	}
	return moved
}

// TestMovement measures what a join and a leave move under the batch form, against what
// consistent hashing moves (about m/(n+1) on a join, m/n on a leave) and against the shape of
// Mirrokni, Thorup and Zadimoghaddam's bound, O(C/ε²) balls per bin insertion or deletion
// for c = 1+ε and C = ceil(c·m/n). Each figure is the mean over trials joining or removing a
// different node. Run with -v for the table.
func TestMovement(t *testing.T) {
	const n = 20
	trials := 10
	if testing.Short() {
		trials = 2
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	t.Logf("%-5s %-6s %-6s %5s | %10s %10s %8s | %10s %10s %8s", "c", "m/n", "C", "C/ε²", "join moved", "÷(m/n+1)", "÷(C/ε²)", "leave mvd", "÷(m/n)", "÷(C/ε²)")
	for _, perNode := range []int{10, 100} {
		items := unitItems(n * perNode)
		for _, c := range []float64{1.1, 1.25, 1.5, 2, MaxFactor} {
			eps := c - 1
			capacity := math.Ceil(c * float64(perNode))
			paper := capacity / (eps * eps)
			var join, leave float64
			for trial := range trials {
				nodes := nodesN(n, false)
				join += float64(movedItems(t, nodes, items, c, func(r *pool.Ring) error {
					return r.Add(pool.Node{Name: fmt.Sprint("joiner-", trial)})
				}))
				leave += float64(movedItems(t, nodes, items, c, func(r *pool.Ring) error {
					return r.Remove(nodes[trial].Name)
				}))
			}
			join /= float64(trials)
			leave /= float64(trials)
			joinCH := float64(len(items)) / (n + 1)
			leaveCH := float64(len(items)) / n
			if c == MaxFactor { // no bound: consistent hashing itself
				t.Logf("%-5s %-6d %-6s %5s | %10.1f %10.2f %8s | %10.1f %10.2f %8s", "none", perNode, "-", "-",
					join, join/joinCH, "-", leave, leave/leaveCH, "-")
				continue
			}
			t.Logf("%-5v %-6d %-6.0f %5.0f | %10.1f %10.2f %8.3f | %10.1f %10.2f %8.3f", c, perNode, capacity, paper,
				join, join/joinCH, join/paper, leave, leave/leaveCH, leave/paper)
			if c == DefaultFactor && !testing.Short() { // the README's table, from these trials
				row := fmt.Sprintf("| %d | %.2f | %.2f | %.3f, %.3f |", perNode, join/joinCH, leave/leaveCH, join/paper, leave/paper)
				require.True(t, strings.Contains(string(readme), row), "README.md: the bounded loads' movement table lacks the row %q", row)
			}
			// The paper's bound with constant 1, and at most 2.5 times consistent hashing's
			// movement (1.8 times is the most measured: c = 1.1 with 10 keys per node).
			require.LessOrEqual(t, join, paper, "join, c=%v, m/n=%d", c, perNode)
			require.LessOrEqual(t, leave, paper, "leave, c=%v, m/n=%d", c, perNode)
			require.LessOrEqual(t, join, 2.5*joinCH, "join, c=%v, m/n=%d", c, perNode)
			require.LessOrEqual(t, leave, 2.5*leaveCH, "leave, c=%v, m/n=%d", c, perNode)
		}
	}
}
