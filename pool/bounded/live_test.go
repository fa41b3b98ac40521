package bounded

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// model is the live form the slow obvious way: the loads in a map, and for each Acquire the
// whole preference order from AppendN, tried in turn against the capacity in big.Rat.
type model struct {
	c     float64
	load  map[string]int64 // members and departed nodes
	total int64
}

// place returns the node a new lease for key goes to.
func (m *model) place(p pool.Pool, key string) string {
	nodes := p.Nodes()
	weight, sum := map[string]int{}, 0
	for _, n := range nodes {
		weight[n.Name] = n.Weight
		sum += n.Weight
	}
	total := uint64(m.total + 1)
	for _, name := range p.AppendN(nil, key, len(nodes)) {
		if uint64(m.load[name]+1) <= slowCap(m.c, total, weight[name], sum) {
			return name
		}
	}
	return ""
}

// runOps plays a sequence of operations, one per byte pair, on a Balancer over p and on the
// model, and checks after every one that they agree: the node of each Acquire (so that no
// Acquire took a node past its capacity), every load and the total. Keys come from a small
// skewed set, so that owners fill up and keys walk on.
func runOps(t *testing.T, p pool.Pool, c float64, ops []byte) {
	t.Helper()
	b, err := New(p, Options{Factor: c})
	require.NoError(t, err)
	m := &model{c: c, load: map[string]int64{}}
	var leases []Lease
	released := map[int]bool{}
	extra := 0 // nodes added so far
	for len(ops) >= 2 {
		op, arg := ops[0], int(ops[1])
		ops = ops[2:]
		switch op % 8 {
		case 0, 1, 2, 3: // acquire; key k<arg/16> for small args, so a few keys are hot
			key := fmt.Sprintf("k%d", arg%(1+arg/16))
			want := m.place(p, key)
			l, err := b.Acquire(key)
			require.NoError(t, err)
			require.Equal(t, want, l.Node(), "Acquire(%q) with loads %v, total %d", key, m.load, m.total)
			m.load[want]++
			m.total++
			// The invariant itself: the node taken is within ceil(c × its share) of the new
			// total (the model's choice guarantees it; this says it outright).
			load, _ := b.Load(want)
			require.LessOrEqual(t, uint64(load), b.Capacity(want, uint64(m.total)), "%q above its capacity", want)
			leases = append(leases, l)
		case 4, 5: // release
			if len(leases) == 0 {
				continue
			}
			i := arg % len(leases)
			l := leases[i]
			err := l.Release()
			if released[i] {
				require.ErrorIs(t, err, ErrReleased, "second Release")
				continue
			}
			require.NoError(t, err)
			released[i] = true
			m.load[l.Node()]--
			m.total--
		case 6: // a node joins
			extra++
			require.NoError(t, b.Add(pool.Node{Name: fmt.Sprintf("extra-%d", extra), Weight: 1 + arg%3}))
		case 7: // a node leaves, or changes weight
			nodes := b.Nodes()
			n := nodes[arg%len(nodes)]
			if arg%2 == 0 && len(nodes) > 1 {
				require.NoError(t, b.Remove(n.Name))
			} else {
				require.NoError(t, b.SetWeight(n.Name, 1+arg%4))
			}
		}
		require.Equal(t, m.total, b.Total(), "total")
		for name, want := range m.load {
			require.GreaterOrEqual(t, want, int64(0))
			got, ok := b.Load(name)
			if want != 0 {
				require.True(t, ok, "the balancer forgot %q with %d leases out", name, want)
			}
			require.Equal(t, want, got, "load of %q", name)
		}
	}
	for i, l := range leases {
		if !released[i] {
			require.NoError(t, l.Release())
		}
	}
	require.Zero(t, b.Total())
}

func TestLiveAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	runs := 4
	if testing.Short() {
		runs = 1
	}
	for _, weighted := range []bool{false, true} {
		for name, p := range pools(t, nodesN(7, weighted)) {
			for _, c := range []float64{0, 1.1, 1.5, 2} {
				t.Run(fmt.Sprintf("%s/weighted=%v/c=%v", name, weighted, c), func(t *testing.T) {
					for range runs {
						ops := make([]byte, 400)
						for i := range ops {
							ops[i] = byte(r.Uint32())
						}
						// Fresh pool for each run: runOps changes the membership.
						p := freshPool(t, name, nodesN(7, weighted))
						runOps(t, p, c, ops)
					}
					_ = p
				})
			}
		}
	}
}

func freshPool(t testing.TB, name string, nodes []pool.Node) pool.Pool {
	return pools(t, nodes)[name]
}

// FuzzLive plays fuzzed operation sequences: acquires, releases (double ones too), joins,
// leaves and weight changes, checked against the model after every step.
func FuzzLive(f *testing.F) {
	f.Add([]byte{0, 200, 0, 200, 0, 200, 4, 0, 4, 0, 6, 1, 0, 17, 7, 2, 0, 99})
	f.Add([]byte{1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 7, 0, 1, 3, 5, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 2000 {
			ops = ops[:2000]
		}
		c := []float64{1.25, 1.01, 1.5, 3}[len(ops)%4]
		ring, err := pool.NewRing(nodesN(4, true), pool.RingOptions{})
		require.NoError(t, err)
		runOps(t, ring, c, ops)
	})
}

// Acquires, releases and membership changes from several goroutines: under -race this is
// the check that Acquire and Release need no lock. Every Acquire must succeed, a lease is
// released once, and at the end every count is back to zero.
func TestLiveConcurrent(t *testing.T) {
	ring, err := pool.NewRing(nodesN(8, true), pool.RingOptions{})
	require.NoError(t, err)
	b, err := New(ring, Options{})
	require.NoError(t, err)
	const workers = 4
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // membership churn
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("churn-%d", i%3)
			if err := b.Add(pool.Node{Name: name}); err == nil {
				require.NoError(t, b.Remove(name))
			}
		}
	}()
	var workersWG sync.WaitGroup
	for w := range workers {
		workersWG.Add(1)
		go func() {
			defer workersWG.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			var held []Lease
			for range rounds {
				if len(held) > 0 && r.IntN(2) == 0 {
					i := r.IntN(len(held))
					if err := held[i].Release(); err != nil {
						t.Error(err)
						return
					}
					held = append(held[:i], held[i+1:]...)
					continue
				}
				l, err := b.Acquire(fmt.Sprint("key-", r.IntN(20)))
				if err != nil {
					t.Error(err)
					return
				}
				held = append(held, l)
			}
			for _, l := range held {
				if err := l.Release(); err != nil {
					t.Error(err)
				}
				if err := l.Release(); err == nil {
					t.Error("second Release returned nil")
				}
			}
		}()
	}
	workersWG.Wait()
	close(stop)
	wg.Wait()
	require.Zero(t, b.Total())
	for _, n := range b.Nodes() {
		load, _ := b.Load(n.Name)
		require.Zero(t, load, n.Name)
	}
}

// With one lease per key and equal weights, no node ever holds more than ceil(c × average):
// the property the paper states, checked with the loads only growing.
func TestLiveNeverAboveCap(t *testing.T) {
	for name, p := range pools(t, nodesN(10, false)) {
		b, err := New(p, Options{})
		require.NoError(t, err)
		for i := range 2000 {
			_, err := b.Acquire(fmt.Sprint("hot-", i%7)) // seven keys only: owners fill up
			require.NoError(t, err)
			limit := slowCap(1.25, uint64(i+1), 1, 10)
			for _, n := range b.Nodes() {
				load, _ := b.Load(n.Name)
				require.LessOrEqual(t, uint64(load), limit, "%s: %s after %d acquires", name, n.Name, i+1)
			}
		}
	}
}

// A Capacity rule that leaves no room: Acquire returns ErrInfeasible and counts nothing, or
// with Full, gives the lease to the node Full names.
func TestLiveFull(t *testing.T) {
	ring, err := pool.NewRing(nodesN(3, false), pool.RingOptions{})
	require.NoError(t, err)
	none := func([]pool.Node) func(int, uint64) uint64 { return func(int, uint64) uint64 { return 0 } }
	b, err := New(ring, Options{Capacity: none})
	require.NoError(t, err)
	_, err = b.Acquire("k")
	require.ErrorIs(t, err, ErrInfeasible)
	require.Zero(t, b.Total())

	b, err = New(ring, Options{Capacity: none, Full: func(nodes []pool.Node) string { return nodes[len(nodes)-1].Name }})
	require.NoError(t, err)
	for range 3 {
		l, err := b.Acquire("k")
		require.NoError(t, err)
		require.Equal(t, "node-02", l.Node())
	}
	load, _ := b.Load("node-02")
	require.Equal(t, int64(3), load)
	require.Equal(t, int64(3), b.Total())
	require.NoError(t, b.Remove("node-02"))
	l, err := b.Acquire("k")
	require.NoError(t, err)
	require.Equal(t, "node-01", l.Node(), "Full is asked again after a change")
}

// Acquire and Release do not allocate once released leases are there to recycle: on the
// owner's fast path and on the walk past a full owner (pool.Ring's AppendN into the recycled
// buffer).
func TestLiveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	ring, err := pool.NewRing(nodesN(10, false), pool.RingOptions{})
	require.NoError(t, err)
	b, err := New(ring, Options{})
	require.NoError(t, err)
	one := func() {
		l, err := b.Acquire("key")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	require.Zero(t, testing.AllocsPerRun(100, one), "owner with room")
	var held []Lease
	owner := ring.Locate("hot")
	for { // "hot" until its owner is full for one lease more
		load, _ := b.Load(owner)
		if len(held) >= 20 && uint64(load) >= b.Capacity(owner, uint64(b.Total()+1)) {
			break
		}
		l, err := b.Acquire("hot")
		require.NoError(t, err)
		held = append(held, l)
	}
	walk := func() {
		l, err := b.Acquire("hot")
		if err != nil {
			t.Fatal(err)
		}
		if l.Node() == ring.Locate("hot") {
			t.Fatal("the owner should be full")
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	require.Zero(t, testing.AllocsPerRun(100, walk), "owner full: the walk")
	for _, l := range held {
		require.NoError(t, l.Release())
	}
}

// A released lease's record is reused by the next Acquire; the old lease must not release
// the new one.
func TestLiveReleaseAfterReuse(t *testing.T) {
	ring, err := pool.NewRing(nodesN(3, false), pool.RingOptions{})
	require.NoError(t, err)
	b, err := New(ring, Options{})
	require.NoError(t, err)
	for range 100 {
		old, err := b.Acquire("a")
		require.NoError(t, err)
		require.NoError(t, old.Release())
		l, err := b.Acquire("b")
		require.NoError(t, err)
		require.ErrorIs(t, old.Release(), ErrReleased)
		require.Equal(t, int64(1), b.Total(), "the stale Release changed the counts")
		require.NoError(t, l.Release())
		require.ErrorIs(t, l.Release(), ErrReleased)
		require.Zero(t, b.Total())
	}
}
