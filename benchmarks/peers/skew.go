package main

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/pool/bounded"
)

// The skew table: requests drawn by Zipf(S) over the quality keys, on -shards members, for
// buraksezer/consistent, whose bounded loads (load factor 1.25, its default) cap the
// partitions each member owns, and for our ring alone and under package pool/bounded
// (c = 1.25), which caps the requests each node holds. Columns: ns per request in one race
// (for ours under bounded loads, an Acquire and the Release of the lease taken 1024 requests
// before, so that 1024 are out), the fullest member's requests over the average, and the
// requests placed past their key's owner.

// skewTable prints the skew table.
func skewTable(w io.Writer, c config, timingLen int) error {
	n := c.shards
	keys := measure.Keys(2, c.keys, c.keylen)
	r := rand.New(rand.NewPCG(25, 11))
	z := rand.NewZipf(r, c.zipf, 1, uint64(len(keys)-1))
	requests := make([]string, len(keys))
	for i := range requests {
		requests[i] = keys[z.Uint64()]
	}
	timing := requests[:min(len(requests), timingLen)]

	burak, err := buraksezerAt(n)
	if err != nil {
		return err
	}
	ring, err := poolOf(n, func(nodes []pool.Node) (pool.Pool, error) {
		return pool.NewRing(nodes, pool.RingOptions{Vnodes: c.vnodes})
	})
	if err != nil {
		return err
	}
	newBalancer := func() (*bounded.Balancer, error) { return bounded.New(ring, bounded.Options{Factor: 1.25}) }

	// Loads by requests, every request held.
	burakLoads, plainLoads, boundedLoads := make([]int, n), make([]int, n), make([]int, n)
	bal, err := newBalancer()
	if err != nil {
		return err
	}
	off := 0
	for _, k := range requests {
		burakLoads[nodeIndex(burak.LocateKey(bytesOf(k)).String())]++
		owner := ring.Locate(k)
		plainLoads[nodeIndex(owner)]++
		l, err := bal.Acquire(k)
		if err != nil {
			return err
		}
		boundedLoads[nodeIndex(l.Node())]++
		if l.Node() != owner {
			off++
		}
	}

	timed, err := newBalancer()
	if err != nil {
		return err
	}
	held := &heldLeases{b: timed, held: make([]bounded.Lease, 1024)}
	ns := measure.Race([]measure.Locator{&buraksezer{burak}, poolLocator{ring}, held}, timing, c.rounds, c.minDur)

	fmt.Fprintf(w, "\nskew: %d requests by Zipf(%g) over %d keys on %d members; bounded loads at 1.25 on both sides; time: %d of the requests, lower quartile of %d interleaved rounds\n\n",
		len(requests), c.zipf, len(keys), n, len(timing), c.rounds)
	var t measure.Table
	t.Header = []string{"implementation", "ns/request", "max/avg by requests", "off owner %"}
	t.Add("buraksezer/consistent+xxhash LocateKey (bounds partitions)", fmt.Sprintf("%.1f", ns[0]), fmt.Sprintf("%.3f", maxAvg(burakLoads)), "0.00")
	t.Add("ours/pool-ring Locate (no bound)", fmt.Sprintf("%.1f", ns[1]), fmt.Sprintf("%.3f", maxAvg(plainLoads)), "0.00")
	t.Add("ours/pool-ring + bounded.Balancer Acquire+Release (bounds requests)", fmt.Sprintf("%.1f", ns[2]),
		fmt.Sprintf("%.3f", maxAvg(boundedLoads)), fmt.Sprintf("%.2f", 100*float64(off)/float64(len(requests))))
	_, err = t.WriteTo(w)
	return err
}

func maxAvg(loads []int) float64 {
	m, sum := 0, 0
	for _, l := range loads {
		m, sum = max(m, l), sum+l
	}
	return float64(m) * float64(len(loads)) / float64(sum)
}

// poolLocator times a pool's Locate.
type poolLocator struct{ p pool.Pool }

func (p poolLocator) Locate(k string) int { return len(p.p.Locate(k)) }

// heldLeases acquires a lease per request and releases the one taken len(held) requests
// before: a steady state with len(held) leases out.
type heldLeases struct {
	b    *bounded.Balancer
	held []bounded.Lease
	i    int
}

func (h *heldLeases) Locate(k string) int {
	l, err := h.b.Acquire(k)
	if err != nil {
		panic(err) // the default rule always has room
	}
	if old := h.held[h.i]; old.Node() != "" { // the zero Lease until the ring is full
		if err := old.Release(); err != nil {
			panic(err)
		}
	}
	h.held[h.i] = l
	h.i = (h.i + 1) % len(h.held)
	return len(l.Node())
}
