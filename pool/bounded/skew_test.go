package bounded

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSkew measures the load by requests under a Zipf(1.1) stream of requests over 10,000
// keys on 10 nodes: the fullest node over the average, for the plain pool and with bounded
// loads (c = 1.25, every request a lease held to the end), and the share of requests that
// the bound sends away from their key's owner (the locality it costs). Run with -v for the
// table; it fails if a bounded node passes ceil(1.25 × average).
func TestSkew(t *testing.T) {
	const n, keys = 10, 10000
	requests := 200000
	if testing.Short() {
		requests = 20000
	}
	r := rand.New(rand.NewPCG(11, 12))
	z := rand.NewZipf(r, 1.1, 1, keys-1)
	stream := make([]string, requests)
	for i := range stream {
		stream[i] = fmt.Sprint("key-", z.Uint64())
	}
	avg := float64(requests) / n
	t.Logf("%-10s %14s %14s %16s", "pool", "max/avg plain", "max/avg c=1.25", "off owner %")
	for _, name := range []string{"ring", "rendezvous", "maglev"} {
		p := pools(t, nodesN(n, false))[name]
		plain := map[string]int{}
		for _, k := range stream {
			plain[p.Locate(k)]++
		}
		b, err := New(p, Options{})
		require.NoError(t, err)
		off := 0
		for _, k := range stream {
			l, err := b.Acquire(k)
			require.NoError(t, err)
			if l.Node() != p.Locate(k) {
				off++
			}
		}
		maxPlain, maxBounded := 0, int64(0)
		for _, node := range p.Nodes() {
			maxPlain = max(maxPlain, plain[node.Name])
			load, _ := b.Load(node.Name)
			maxBounded = max(maxBounded, load)
		}
		t.Logf("%-10s %14.3f %14.3f %16.2f", name, float64(maxPlain)/avg, float64(maxBounded)/avg, 100*float64(off)/float64(requests))
		require.LessOrEqual(t, uint64(maxBounded), slowCap(1.25, uint64(requests), 1, n))
	}
}
