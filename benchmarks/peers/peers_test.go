package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/serialx/hashring"

	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

var sink int

// parallelSink keeps the parallel loops' sums alive without a data race.
var parallelSink atomic.Int64

// BenchmarkLocate times every contestant on the same pool of 16-byte keys. Not at 1000
// shards: stathat/consistent re-sorts its ring after every member it adds and takes about
// 30 s to build one with 1000 members of 160 points.
func BenchmarkLocate(b *testing.B) {
	keys := measure.Keys(1, 1<<14, 16)
	mask := len(keys) - 1
	for _, c := range contestants(160, 1000) {
		for _, n := range []int{10, 100} {
			l, err := c.build(n)
			if err != nil {
				continue // not for this many shards
			}
			b.Run(fmt.Sprintf("impl=%s/shards=%d", c.id, n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sink += l.Locate(keys[i&mask])
					i++
				}
			})
		}
	}
}

// BenchmarkLocateParallel times lookups from GOMAXPROCS goroutines at once, where a lock
// on the lookup path (buraksezer/consistent and stathat/consistent take a read lock) shows.
func BenchmarkLocateParallel(b *testing.B) {
	keys := measure.Keys(1, 1<<14, 16)
	mask := len(keys) - 1
	for _, c := range contestants(160, 1000) {
		l, err := c.build(10)
		if err != nil {
			continue
		}
		b.Run(fmt.Sprintf("impl=%s/shards=10", c.id), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				s, i := 0, 0
				for pb.Next() {
					s += l.Locate(keys[i&mask])
					i++
				}
				parallelSink.Add(int64(s))
			})
		})
	}
}

// TestContestants checks every adapter: a shard in range for every key, the same one twice,
// and member names that read back as their index.
func TestContestants(t *testing.T) {
	for i := range 12345 {
		if got := nodeIndex(nodeName(i)); got != i {
			t.Fatalf("nodeIndex(nodeName(%d)) = %d", i, got)
		}
	}
	keys := append(measure.Keys(3, 2000, 16), "", "\xff", strings.Repeat("k", 100))
	ids := map[string]bool{}
	for _, c := range contestants(40, 1000) {
		if ids[c.id] || strings.ContainsAny(c.id, " /") {
			t.Errorf("%s: id %q repeated or not a benchmark name element", c.name, c.id)
		}
		ids[c.id] = true
		for _, n := range []int{1, 10, 11} {
			l, err := c.build(n)
			if err != nil {
				continue
			}
			for _, k := range keys {
				got := l.Locate(k)
				if got < 0 || got >= n || got != l.Locate(k) {
					t.Fatalf("%s(%d).Locate(%q) = %d, want a stable shard in [0, %d)", c.name, n, k, got, n)
				}
			}
		}
	}
}

func TestCounts(t *testing.T) {
	got, err := counts("-scale", " 10,1000 ,, 1000000")
	if err != nil || fmt.Sprint(got) != "[10 1000 1000000]" {
		t.Errorf("counts = %v, %v", got, err)
	}
	if got, err := counts("-scale", ""); err != nil || len(got) != 0 {
		t.Errorf("counts(\"\") = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "-3", "ten", "10,x"} {
		if _, err := counts("-scale", bad); err == nil || !strings.Contains(err.Error(), "-scale") {
			t.Errorf("counts(%q): error %v, want one naming the flag", bad, err)
		}
	}
	for n, want := range map[int]string{10: "10", 1000: "1000", 10000: "10^4", 1000000: "10^6", 20000: "20000"} {
		if got := shardCount(n); got != want {
			t.Errorf("shardCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestRun runs the whole program on a few keys: every table and every target row appear,
// and no target is left unmeasured.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every contestant at several counts")
	}
	var out strings.Builder
	c := config{keys: 2000, shards: 10, keylen: 16, pool: 256, vnodes: 40, rounds: 1, minDur: 0,
		scale: []int{10, 100, 1000, 10000, 1000000}, batch: []int{10, 1000}, replicas: []int{10, 100, 1000, 10000},
		cache: []int{1000, 10000}, build: 1000, burakMax: 1000, zipf: 1.1}
	if err := run(&out, c); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"| ours/jump-back ", "10^6 |", "LocateBatch, 256 keys per call", "| ours/jump LocateBatch ",
		"ours/jump-back at 10^6", "| every ours ", "GOMAXPROCS 2", "| ours/pool-ring AppendN ", "GetClosestN",
		"building with 1000 members", "| ours/pool-maglev ", "n/a (buraksezer above -buraksezer-max 1000)",
		"skew: 2000 requests by Zipf(1.1)", "ns per lookup by cache state", "| one load from memory ", "| ours/pool-ring + bounded.Balancer Acquire+Release (bounds requests) "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "n/a (not measured") {
		t.Errorf("a target was not measured:\n%s", s)
	}
}

// BenchmarkAppendN times three distinct members per key (replicas): our pools' AppendN with
// room in dst (ring, rendezvous, Maglev, Memento), buraksezer/consistent's GetClosestN and serialx/hashring's GetNodes, on the
// same members and keys.
func BenchmarkAppendN(b *testing.B) {
	keys := measure.Keys(1, 1<<14, 16)
	mask := len(keys) - 1
	for _, n := range []int{10, 100, 1000} {
		names := nodeNames(n)
		nodes := make([]pool.Node, n)
		members := make([]consistent.Member, n)
		weights := make(map[string]int, n)
		for i, name := range names {
			nodes[i], members[i], weights[name] = pool.Node{Name: name}, member(name), 160
		}
		ring, err := pool.NewRing(nodes, pool.RingOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rdv, err := pool.NewRendezvous(nodes, pool.RendezvousOptions{})
		if err != nil {
			b.Fatal(err)
		}
		mg, err := pool.NewMaglev(nodes, pool.MaglevOptions{})
		if err != nil {
			b.Fatal(err)
		}
		mm, err := pool.NewMemento(nodes)
		if err != nil {
			b.Fatal(err)
		}
		bur := consistent.New(members, consistent.Config{Hasher: xxHasher{}, PartitionCount: max(consistent.DefaultPartitionCount, 2*n+1)})
		ser := hashring.NewWithWeights(weights)
		impls := []struct {
			id     string
			append func(k string) int
		}{
			{"ours-pool-ring", func(k string) int { var d [3]string; return len(ring.AppendN(d[:0], k, 3)[2]) }},
			{"ours-pool-rendezvous", func(k string) int { var d [3]string; return len(rdv.AppendN(d[:0], k, 3)[2]) }},
			{"ours-pool-maglev", func(k string) int { var d [3]string; return len(mg.AppendN(d[:0], k, 3)[2]) }},
			{"ours-pool-memento", func(k string) int { var d [3]string; return len(mm.AppendN(d[:0], k, 3)[2]) }},
			{"buraksezer", func(k string) int { m, _ := bur.GetClosestN(bytesOf(k), 3); return len(m[2].String()) }},
			{"serialx", func(k string) int { m, _ := ser.GetNodes(k, 3); return len(m[2]) }},
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("impl=%s/shards=%d/n=3", impl.id, n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sink += impl.append(keys[i&mask])
					i++
				}
			})
		}
	}
}

// TestSkewBounded: with bounded loads no node holds more than ceil(1.25 × the average) of the
// requests; buraksezer/consistent's partitions bound nothing of the kind.
func TestSkewBounded(t *testing.T) {
	var out strings.Builder
	c := config{keys: 5000, shards: 10, keylen: 16, pool: 256, vnodes: 40, rounds: 1, zipf: 1.1}
	if err := skewTable(&out, c, 256); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.Contains(line, "bounded.Balancer") {
			continue
		}
		cells := strings.Split(line, "|")
		v, err := strconv.ParseFloat(strings.TrimSpace(cells[3]), 64)
		if err != nil || v > 1.25 {
			t.Errorf("bounded max/avg %q: want at most 1.25\n%s", cells[3], out.String())
		}
		return
	}
	t.Errorf("no bounded row:\n%s", out.String())
}
