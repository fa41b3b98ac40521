package rebalance

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// idSharder places a decimal user ID as the rebalancing post [004] does, by user_id % n.
type idSharder struct{ *shard.Modulo }

func (s idSharder) Locate(owner string) int {
	id, err := strconv.ParseUint(owner, 10, 64)
	if err != nil {
		return s.Modulo.Locate(owner)
	}
	return s.LocateID(id)
}

func newIDSharder(n int) (shard.Sharder, error) {
	m, err := shard.NewModulo(n)
	return idSharder{m}, err
}

// messages is the rebalancing post's [004] data set: users 1..n, and how many messages each
// has. Users 5k+1..5k+5 have as many, so that user_id % 5 spreads the messages exactly evenly.
func messages(users int) iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		for id := 1; id <= users; id++ {
			if !yield(strconv.Itoa(id), int64(1+((id-1)/5*7)%29)) {
				return
			}
		}
	}
}

// strategy is a placement whose capacity plan is checked against a real migration.
type strategy struct {
	name      string
	resized   func(n int) (shard.Sharder, error)
	multiples bool
}

func strategies(t testing.TB) []strategy {
	partitions := func(n int) (shard.Sharder, error) {
		// Partitions' resize depends on its table: resize a copy of the 5-shard one.
		p, err := shard.NewPartitions(5, 1024)
		require.NoError(t, err)
		if n == 5 {
			return p, nil
		}
		return p, p.Resize(n)
	}
	return []strategy{
		{"modulo n+1", newIDSharder, false},
		{"modulo doubling", newIDSharder, true},
		{"jump", func(n int) (shard.Sharder, error) { return shard.NewJump(n) }, false},
		{"ring", func(n int) (shard.Sharder, error) { return shard.NewRing(n, shard.RingOptions{}) }, false},
		{"partitions", partitions, false},
	}
}

// countingStore is a memStore that counts the rows every Copy lands, by source and
// destination.
type countingStore struct {
	*memStore
	mu     sync.Mutex
	copied map[pair]int64
}

func (c *countingStore) Copy(ctx context.Context, owner string, from, to int) error {
	if err := c.memStore.Copy(ctx, owner, from, to); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.copied[pair{from, to}] += int64(c.count(to, owner))
	return nil
}

// The rebalancing post's [004] scenario: messages sharded by user_id % 5, the servers 75% full,
// grow to a count that brings the total under 50% and lasts a month of growth. For every
// strategy, the plan's moved rows are what a Migration to the planned count then copies, to the
// row, and the shards hold what the plan says they will.
func TestCapacityDocument004(t *testing.T) {
	const users = 1000
	ctx := context.Background()
	for _, s := range strategies(t) {
		before, err := s.resized(5)
		require.NoError(t, err)
		layout, err := OwnerLayout(before, s.resized, messages(users))
		require.NoError(t, err)
		usage := layout.Usage()
		// Modulo spreads the messages exactly evenly (see messages): every strategy's
		// fullest shard holds at least that, so it has reached 75% of this capacity.
		var total int64
		for _, u := range usage {
			total += u
		}
		perShard := total / 5 * 4 / 3
		p, err := PlanCapacity(Capacity{PerShard: perShard, GrowthPerDay: 100, LeadTime: 30 * 24 * time.Hour, CopyRate: 500, Multiples: s.multiples}, layout)
		require.NoError(t, err, s.name)
		require.GreaterOrEqual(t, p.FullestUse, 0.75, s.name)
		require.Zero(t, p.ResizeIn, s.name)
		require.Equal(t, -30*24*time.Hour, p.OrderIn, "%s: the hardware is a month late", s.name)
		require.Equal(t, 1.0, p.Scale)
		require.LessOrEqual(t, p.UseAfter, 0.5, s.name)
		require.GreaterOrEqual(t, p.Lasts, 30*24*time.Hour, s.name)
		want := 8
		if s.multiples {
			want = 10
		}
		require.Equal(t, want, p.Target, s.name)

		after, err := s.resized(p.Target)
		require.NoError(t, err)
		store := &countingStore{memStore: newMemStore(p.Target), copied: map[pair]int64{}}
		var owners []string
		for o, n := range messages(users) {
			owners = append(owners, o)
			for id := range n {
				store.put(before.Locate(o), o, int(id), "message")
			}
		}
		m, err := New("grow-"+s.name, before, after, store, Options{Concurrency: 4})
		require.NoError(t, err)
		require.NoError(t, m.Run(ctx, slices.Values(owners)))
		require.NoError(t, m.Finish(ctx, slices.Values(owners)))
		planned := map[pair]int64{}
		for _, f := range p.Moves.Flows {
			if f.From != f.To {
				planned[pair{f.From, f.To}] = f.Count
			}
		}
		require.Equal(t, planned, store.copied, "%s: rows copied by the migration, by source and destination", s.name)
		for shard, rows := range store.shards {
			var n int64
			for _, r := range rows {
				n += int64(len(r))
			}
			require.Equal(t, p.Usage[shard], n, "%s: shard %d after the migration", s.name, shard)
		}
		require.Equal(t, time.Duration(float64(p.Moves.Moved())/500*float64(time.Second)), p.CopyTime)
		t.Logf("%-15s -> %2d shards: %5d of %d rows move (%4.1f%%), fullest after %.1f%%, lasts %.0f days, copy %v",
			s.name, p.Target, p.Moves.Moved(), p.Moves.Total, 100*p.Moves.Fraction(), 100*p.FullestUseAfter, p.Lasts.Hours()/24, p.CopyTime)
	}
}

// refDays returns the first day, by bisection, on which a shard of usage (growth landing in
// proportion to it, evenly while it is all zero) reaches the threshold: the slow way to the
// closed form of lastingDays.
func refDays(usage []int64, c Capacity) float64 {
	var total float64
	for _, u := range usage {
		total += float64(u)
	}
	limit := c.Threshold * float64(c.PerShard)
	reached := func(t float64) bool {
		for _, u := range usage {
			share := 1 / float64(len(usage))
			if total > 0 {
				share = float64(u) / total
			}
			if float64(u)+c.GrowthPerDay*t*share >= limit {
				return true
			}
		}
		return false
	}
	if reached(0) {
		return 0
	}
	hi := 1.0
	for !reached(hi) {
		hi *= 2
	}
	lo := 0.0
	for range 80 { // from hi's power of two to float64's precision
		if mid := (lo + hi) / 2; reached(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// refCapacity answers c the slow way: every count from the current one up, each checked in
// full; it returns the day of the resize and the target, 0 if none up to MaxShards fits.
func refCapacity(t *testing.T, c Capacity, layout Layout) (float64, int, *Plan) {
	c.Threshold, c.MaxUse = cmpOrFloat(c.Threshold, 0.75), cmpOrFloat(c.MaxUse, 0.5)
	usage := layout.Usage()
	var total int64
	for _, u := range usage {
		total += u
	}
	day := refDays(usage, c)
	scale := 1.0
	if total > 0 {
		scale = (float64(total) + c.GrowthPerDay*day) / float64(total)
	}
	for n := len(usage) + 1; n <= c.MaxShards; n++ {
		if c.Multiples && n%len(usage) != 0 {
			continue
		}
		p, err := layout.Resize(n)
		require.NoError(t, err)
		if scale != 1 {
			p.Total = 0
			for i := range p.Flows {
				p.Flows[i].Count = int64(math.Round(float64(p.Flows[i].Count) * scale))
				p.Total += p.Flows[i].Count
			}
		}
		after := make([]int64, n)
		var sum int64
		for _, f := range p.Flows {
			after[f.To] += f.Count
			sum += f.Count
		}
		full := false
		for _, u := range after {
			full = full || float64(u) >= c.Threshold*float64(c.PerShard)
		}
		use := float64(sum) / float64(int64(n)*c.PerShard)
		if !full && use <= c.MaxUse && refDays(after, c) >= c.LeadTime.Hours()/24 {
			return day, n, p
		}
	}
	return day, 0, nil
}

func cmpOrFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// Random data, capacities, growth and lead times: PlanCapacity agrees with the slow
// reference on the day of the resize, the target count and what it moves.
func TestPlanCapacityAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 4))
	cases := 150
	if raceEnabled || testing.Short() {
		cases = 40
	}
	found := 0
	for i := range cases {
		n := 1 + r.IntN(12)
		sizes := make([]int64, 20+r.IntN(300))
		for j := range sizes {
			sizes[j] = int64(r.IntN(60))
		}
		owners := func(yield func(string, int64) bool) {
			for j, s := range sizes {
				if !yield("owner-"+strconv.Itoa(j), s) {
					return
				}
			}
		}
		newJump := func(n int) (shard.Sharder, error) { return shard.NewJump(n) }
		before, _ := shard.NewJump(n)
		layout, err := OwnerLayout(before, newJump, owners)
		require.NoError(t, err)
		fullest := slices.Max(layout.Usage())
		var total int64
		for _, u := range layout.Usage() {
			total += u
		}
		c := Capacity{
			PerShard:     max(1, fullest+int64(r.IntN(int(fullest)+1))),
			GrowthPerDay: 0.1 + float64(total)*0.03*r.Float64(), // up to 3% a day
			LeadTime:     time.Duration(r.IntN(60*24)) * time.Hour,
			Multiples:    r.IntN(3) == 0,
			MaxShards:    16 * n,
		}
		if r.IntN(2) == 0 {
			c.Threshold = 0.5 + r.Float64()/2
			c.MaxUse = c.Threshold * (0.2 + 0.8*r.Float64())
		}
		what := fmt.Sprintf("case %d: %d shards, usage %v, %+v", i, n, layout.Usage(), c)
		day, target, moves := refCapacity(t, c, layout)
		p, err := PlanCapacity(c, layout)
		if target == 0 {
			require.ErrorIs(t, err, ErrCapacity, what)
			continue
		}
		found++
		require.NoError(t, err, what)
		require.InDelta(t, day, p.ResizeIn.Hours()/24, 1e-6*max(1, day), what)
		require.Equal(t, target, p.Target, what)
		// The reference's day is a bisection's: a count scaled to the day may round the
		// other way.
		require.Equal(t, len(moves.Flows), len(p.Moves.Flows), what)
		for j, f := range moves.Flows {
			g := p.Moves.Flows[j]
			require.True(t, f.From == g.From && f.To == g.To && f.Count-g.Count <= 1 && g.Count-f.Count <= 1, "%s: flow %+v, want %+v", what, g, f)
		}
	}
	require.Greater(t, found, cases/2, "most random cases have a target")
}

// A sample of keys estimates what each shard sends where: within a few standard deviations
// of the exact plan, and every shard's usage accounted for to the unit.
func TestSampleLayout(t *testing.T) {
	newJump := func(n int) (shard.Sharder, error) { return shard.NewJump(n) }
	before, _ := shard.NewJump(10)
	owners := func(yield func(string, int64) bool) {
		for i := range 50_000 {
			if !yield("user:"+strconv.Itoa(i), int64(1+i%9)) {
				return
			}
		}
	}
	exact, err := OwnerLayout(before, newJump, owners)
	require.NoError(t, err)
	usage := exact.Usage()
	sample := func(yield func(string) bool) {
		for i := range 20_000 {
			if !yield("sample:" + strconv.Itoa(i)) {
				return
			}
		}
	}
	est, err := SampleLayout(usage, before, newJump, sample)
	require.NoError(t, err)
	require.Equal(t, usage, est.Usage())
	want, err := exact.Resize(13)
	require.NoError(t, err)
	got, err := est.Resize(13)
	require.NoError(t, err)
	require.Equal(t, want.Total, got.Total)
	sent := make([]int64, 10)
	for _, f := range got.Flows {
		sent[f.From] += f.Count
		// 2000 sample keys a shard: a flow's share is off by sqrt(p(1-p)/2000), 0.011 at
		// most, plus the owners' own spread; 0.04 is over 3.5 of those.
		require.InDelta(t, float64(want.Count(f.From, f.To))/float64(usage[f.From]), float64(f.Count)/float64(usage[f.From]), 0.04, "%d -> %d", f.From, f.To)
	}
	require.Equal(t, usage, sent, "every unit of every shard goes somewhere")
	require.InDelta(t, want.Fraction(), got.Fraction(), 0.01)

	_, err = est.Resize(10)
	require.NoError(t, err)
	few, err := SampleLayout(usage, before, newJump, slices.Values([]string{"a", "b"}))
	require.NoError(t, err)
	_, err = few.Resize(11)
	require.ErrorIs(t, err, ErrCapacity, "two keys cannot speak for ten shards")
	_, err = SampleLayout(usage[:9], before, newJump, sample)
	require.ErrorIs(t, err, ErrCapacity)
	_, err = SampleLayout([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, -1}, before, newJump, sample)
	require.ErrorIs(t, err, ErrCapacity)
}

// A partition layout moves whole partitions exactly as the table plans: the same plan as
// placing every owner, and an error once the table changed under it.
func TestPartitionLayout(t *testing.T) {
	for _, paged := range []bool{false, true} {
		var p interface {
			shard.Sharder
			PartitionTable
			Partition(string) int
			UnmarshalText([]byte) error
			MarshalText() ([]byte, error)
		}
		var err error
		if paged {
			p, err = shard.NewPagedPartitions(5, 256, 16)
		} else {
			p, err = shard.NewPartitions(5, 256)
		}
		require.NoError(t, err)
		usage := make([]int64, 256)
		owners := func(yield func(string, int64) bool) {
			for i := range 5000 {
				if !yield("owner:"+strconv.Itoa(i), int64(i%13)) {
					return
				}
			}
		}
		for o, n := range owners {
			usage[p.Partition(o)] += n
		}
		resized := func(n int) (shard.Sharder, error) {
			text, err := p.MarshalText()
			require.NoError(t, err)
			var c shard.Sharder
			if paged {
				q := &shard.PagedPartitions{}
				err = q.UnmarshalText(text)
				c = q
			} else {
				q := &shard.Partitions{}
				err = q.UnmarshalText(text)
				c = q
			}
			require.NoError(t, err)
			return c, c.Resize(n)
		}
		byOwner, err := OwnerLayout(p, resized, owners)
		require.NoError(t, err)
		byPartition, err := PartitionLayout(p, usage)
		require.NoError(t, err)
		require.Equal(t, byOwner.Usage(), byPartition.Usage())
		for _, n := range []int{6, 7, 10, 3} {
			want, err := byOwner.Resize(n)
			require.NoError(t, err)
			got, err := byPartition.Resize(n)
			require.NoError(t, err)
			require.Equal(t, want, got, "paged %v, 5 -> %d", paged, n)
		}
		_, err = byPartition.Resize(257)
		require.ErrorIs(t, err, shard.ErrShardCount)
		require.NoError(t, p.Resize(6)) // the table changes under the layout
		_, err = byPartition.Resize(7)
		require.ErrorIs(t, err, ErrLayout)
		_, err = PartitionLayout(p, usage[:10])
		require.ErrorIs(t, err, ErrCapacity)
	}
}

func TestCapacityRejects(t *testing.T) {
	newJump := func(n int) (shard.Sharder, error) { return shard.NewJump(n) }
	before, _ := shard.NewJump(3)
	layout, err := OwnerLayout(before, newJump, messages(30))
	require.NoError(t, err)
	good := Capacity{PerShard: 1000, GrowthPerDay: 10, LeadTime: 24 * time.Hour}
	_, err = PlanCapacity(good, layout)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		change func(*Capacity)
	}{
		{"negative capacity", func(c *Capacity) { c.PerShard = -1 }},
		{"zero capacity", func(c *Capacity) { c.PerShard = 0 }},
		{"usage above capacity", func(c *Capacity) { c.PerShard = 10 }},
		{"zero growth", func(c *Capacity) { c.GrowthPerDay = 0 }},
		{"negative growth", func(c *Capacity) { c.GrowthPerDay = -5 }},
		{"NaN growth", func(c *Capacity) { c.GrowthPerDay = math.NaN() }},
		{"infinite growth", func(c *Capacity) { c.GrowthPerDay = math.Inf(1) }},
		{"negative lead time", func(c *Capacity) { c.LeadTime = -time.Hour }},
		{"threshold above 1", func(c *Capacity) { c.Threshold = 1.5 }},
		{"negative threshold", func(c *Capacity) { c.Threshold = -0.5 }},
		{"MaxUse above threshold", func(c *Capacity) { c.Threshold, c.MaxUse = 0.6, 0.7 }},
		{"negative MaxUse", func(c *Capacity) { c.MaxUse = -0.1 }},
		{"negative copy rate", func(c *Capacity) { c.CopyRate = -1 }},
		{"negative MaxShards", func(c *Capacity) { c.MaxShards = -1 }},
		{"MaxShards too low", func(c *Capacity) { c.MaxShards = 2 }},
	} {
		bad := good
		c.change(&bad)
		_, err := PlanCapacity(bad, layout)
		require.ErrorIs(t, err, ErrCapacity, c.name)
		require.ErrorContains(t, err, "rebalance: capacity: ", c.name)
	}
	// An owner of 700 reaches 750 within days wherever it goes: no count lasts a month.
	whale := func(yield func(string, int64) bool) { _ = yield("whale", 700) && yield("minnow", 100) }
	big, err := OwnerLayout(before, newJump, whale)
	require.NoError(t, err)
	_, err = PlanCapacity(Capacity{PerShard: 1000, GrowthPerDay: 10, LeadTime: 30 * 24 * time.Hour}, big)
	require.ErrorIs(t, err, ErrCapacity)
	require.ErrorContains(t, err, "no count in [4, 8]")
	_, err = PlanCapacity(good, nil)
	require.ErrorIs(t, err, ErrCapacity)

	// Layouts refuse what no data set has, and resizes that are not one.
	negative := func(yield func(string, int64) bool) { _ = yield("a", 3) && yield("b", -1) }
	_, err = OwnerLayout(before, newJump, negative)
	require.ErrorIs(t, err, ErrLayout)
	_, err = OwnerLayout(before, newJump, nil)
	require.ErrorIs(t, err, ErrLayout)
	for name, resized := range map[string]func(int) (shard.Sharder, error){
		"itself":      func(int) (shard.Sharder, error) { return before, nil },
		"a wrapper":   func(int) (shard.Sharder, error) { return shard.ByPrefix(before), nil },
		"wrong count": func(n int) (shard.Sharder, error) { return shard.NewJump(n + 1) },
		"nil":         func(int) (shard.Sharder, error) { return nil, nil },
	} {
		l, err := OwnerLayout(before, resized, messages(30))
		require.NoError(t, err)
		_, err = l.Resize(4)
		require.ErrorIs(t, err, ErrLayout, name)
		_, err = PlanCapacity(good, l)
		require.ErrorIs(t, err, ErrLayout, name)
	}
	_, err = PlanOwners(before, before, negative)
	require.ErrorIs(t, err, ErrLayout)
}
