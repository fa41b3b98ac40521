package rebalance

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/shardkit/shard"
)

// ErrCapacity reports a capacity question that has no answer: a capacity, usage, growth
// rate, lead time, threshold or copy rate out of range (the error says which), usage above
// capacity, or no shard count up to the limit that meets the targets.
var ErrCapacity = errors.New("invalid capacity plan")

// Layout is a sharded data set as capacity planning sees it: what each shard holds, and what
// a resize would move, in one unit, rows or bytes. OwnerLayout, SampleLayout and
// PartitionLayout make one from a strategy itself, so that a plan reflects what that
// strategy really moves; they are read-only once made, so as safe for concurrent use as the
// sharders, functions and sequences given to them.
type Layout interface {
	// Usage returns what each shard holds now: one element per shard, each >= 0.
	Usage() []int64
	// Resize returns what a resize to n shards moves: flows, in the unit of Usage, from
	// each shard now to each shard after the resize. The flows from shard s add up to
	// Usage()[s].
	Resize(n int) (*Plan, error)
}

// OwnerLayout returns the Layout of owners, each given with its size, placed by before:
// Resize(n) places every owner by resized(n), which must return a sharder of n shards that
// places keys as before would after Resize(n) and shares no state with it (for stateless
// strategies, a new one of n shards). It is exact: its plans are what a Migration of these
// owners from before to resized(n) copies, to the row. owners is ranged over once here and
// once per Resize; a negative size, or an owner placed outside [0, before.Shards()), is an
// error wrapping ErrLayout.
func OwnerLayout(before shard.Sharder, resized func(n int) (shard.Sharder, error), owners iter.Seq2[string, int64]) (Layout, error) {
	if before == nil || resized == nil || owners == nil {
		return nil, fmt.Errorf("rebalance: owner layout: nil sharder, resize function or owners: %w", ErrLayout)
	}
	usage := make([]int64, before.Shards())
	for o, n := range owners {
		s := before.Locate(o)
		switch {
		case n < 0:
			return nil, fmt.Errorf("rebalance: owner layout: owner %.64q has size %d: sizes are >= 0: %w", o, n, ErrLayout)
		case s < 0 || s >= len(usage):
			return nil, fmt.Errorf("rebalance: owner layout: owner %.64q is placed on shard %d of %d: %w", o, s, len(usage), ErrLayout)
		}
		usage[s] += n
	}
	return &ownerLayout{sharded{before, resized, usage}, owners}, nil
}

// sharded is what the layouts of a Sharder share: its placement now, its resize and what
// each shard holds.
type sharded struct {
	before  shard.Sharder
	resized func(int) (shard.Sharder, error)
	usage   []int64
}

func (l *sharded) Usage() []int64 { return slices.Clone(l.usage) }

// after calls resized(n) and checks its result.
func (l *sharded) after(n int) (shard.Sharder, error) {
	after, err := l.resized(n)
	switch {
	case err != nil:
		return nil, fmt.Errorf("rebalance: layout: resize to %d shards: %w", n, err)
	case after == nil || after.Shards() != n:
		return nil, fmt.Errorf("rebalance: layout: resize to %d shards gave a sharder of %v: %w", n, shardsOf(after), ErrLayout)
	case shareState(l.before, after):
		return nil, fmt.Errorf("rebalance: layout: resize to %d shards gave the sharder itself, or one that wraps it: return a second sharder: %w", n, ErrLayout)
	}
	return after, nil
}

type ownerLayout struct {
	sharded
	owners iter.Seq2[string, int64]
}

func (l *ownerLayout) Resize(n int) (*Plan, error) {
	after, err := l.after(n)
	if err != nil {
		return nil, err
	}
	return PlanOwners(l.before, after, l.owners)
}

func shardsOf(s shard.Sharder) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprint(s.Shards(), " shards")
}

// SampleLayout returns the Layout of shards that hold usage (one element per shard of
// before) when only these totals are known: Resize(n) places the keys of sample by before
// and by resized(n) (as for OwnerLayout) and moves each shard's usage in the proportions its
// sample keys move, rounded so that the flows from a shard add up to its usage. It is an
// estimate, as good as the sample is like the data: a few thousand keys per shard give the
// proportions to about 1/sqrt(keys). A shard that holds data but none of the sample's keys
// makes Resize fail with an error wrapping ErrCapacity.
func SampleLayout(usage []int64, before shard.Sharder, resized func(n int) (shard.Sharder, error), sample iter.Seq[string]) (Layout, error) {
	if before == nil || resized == nil || sample == nil {
		return nil, fmt.Errorf("rebalance: sample layout: nil sharder, resize function or sample: %w", ErrLayout)
	}
	if len(usage) != before.Shards() {
		return nil, fmt.Errorf("rebalance: sample layout: usage of %d shards for a sharder of %d: %w", len(usage), before.Shards(), ErrCapacity)
	}
	if err := checkUsage(usage); err != nil {
		return nil, err
	}
	return &sampleLayout{sharded{before, resized, slices.Clone(usage)}, sample}, nil
}

type sampleLayout struct {
	sharded
	sample iter.Seq[string]
}

func (l *sampleLayout) Resize(n int) (*Plan, error) {
	after, err := l.after(n)
	if err != nil {
		return nil, err
	}
	keys := PlanKeys(l.before, after, l.sample).Flows // ordered by From
	counts := map[pair]int64{}
	var total int64
	i := 0
	for from, used := range l.usage {
		for i < len(keys) && keys[i].From < from {
			i++ // a shard outside [0, Shards()): a sharder that breaks its contract
		}
		j := i
		var sampled int64
		for ; j < len(keys) && keys[j].From == from; j++ {
			sampled += keys[j].Count
		}
		flows := keys[i:j]
		i = j
		if used == 0 {
			continue
		}
		if sampled == 0 {
			return nil, fmt.Errorf("rebalance: sample layout: shard %d holds %d but no key of the sample: sample more keys: %w", from, used, ErrCapacity)
		}
		for k, share := range apportion(used, flows, sampled) {
			counts[pair{from, flows[k].To}] += share
		}
		total += used
	}
	return plan(counts, total), nil
}

// apportion splits total in the proportions of the flows' counts (which add up to of), by
// largest remainders: the parts add up to total exactly.
func apportion(total int64, flows []Flow, of int64) []int64 {
	parts := make([]int64, len(flows))
	rest := make([]float64, len(flows))
	left := total
	for i, f := range flows {
		exact := float64(total) * float64(f.Count) / float64(of)
		parts[i] = int64(exact)
		rest[i] = exact - float64(parts[i])
		left -= parts[i]
	}
	order := make([]int, len(flows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rest[b], rest[a]) })
	for i := 0; left > 0; i = (i + 1) % len(order) {
		parts[order[i]]++
		left--
	}
	return parts
}

// PartitionTable is a partition table that plans its own resize: *shard.Partitions and
// *shard.PagedPartitions.
type PartitionTable interface {
	Table() []int
	Shards() int
	PlanResize(n int) ([]shard.PartitionMove, error)
}

// PartitionLayout returns the Layout of a partition table whose partition i holds usage[i]:
// Resize(n) moves exactly the partitions that p.PlanResize(n) moves, each with all it
// holds. p must not change while the layout is used: a plan that moves a partition from a
// shard other than the one it had is an error wrapping ErrLayout.
func PartitionLayout(p PartitionTable, usage []int64) (Layout, error) {
	if p == nil {
		return nil, fmt.Errorf("rebalance: partition layout: nil table: %w", ErrLayout)
	}
	table := p.Table()
	if len(table) == 0 || len(usage) != len(table) {
		return nil, fmt.Errorf("rebalance: partition layout: usage of %d partitions for a table of %d: %w", len(usage), len(table), ErrCapacity)
	}
	if err := checkUsage(usage); err != nil {
		return nil, err
	}
	l := &partitionLayout{p: p, table: table, partUsage: slices.Clone(usage), usage: make([]int64, p.Shards())}
	for i, s := range table {
		if s < 0 || s >= len(l.usage) {
			return nil, fmt.Errorf("rebalance: partition layout: partition %d on shard %d of %d: %w", i, s, len(l.usage), ErrLayout)
		}
		l.usage[s] += usage[i]
	}
	return l, nil
}

type partitionLayout struct {
	p         PartitionTable
	table     []int
	partUsage []int64
	usage     []int64
}

func (l *partitionLayout) Usage() []int64 { return slices.Clone(l.usage) }

func (l *partitionLayout) Resize(n int) (*Plan, error) {
	moves, err := l.p.PlanResize(n)
	if err != nil {
		return nil, fmt.Errorf("rebalance: partition layout: resize to %d shards: %w", n, err)
	}
	to := slices.Clone(l.table)
	for _, m := range moves {
		if m.Partition < 0 || m.Partition >= len(to) || to[m.Partition] != m.From {
			return nil, fmt.Errorf("rebalance: partition layout: the table moves partition %d from shard %d, which the layout does not have there: the table changed: %w", m.Partition, m.From, ErrLayout)
		}
		to[m.Partition] = m.To
	}
	counts := map[pair]int64{}
	var total int64
	for i, from := range l.table {
		if u := l.partUsage[i]; u > 0 {
			counts[pair{from, to[i]}] += u
			total += u
		}
	}
	return plan(counts, total), nil
}

// checkUsage returns an error wrapping ErrCapacity for a negative usage.
func checkUsage(usage []int64) error {
	for i, u := range usage {
		if u < 0 {
			return fmt.Errorf("rebalance: capacity: usage %d of element %d: usage is >= 0: %w", u, i, ErrCapacity)
		}
	}
	return nil
}

// Defaults of Capacity, from the rebalancing post [004]: grow when the
// servers are 70-80% full, and keep the total use under 50%.
const (
	DefaultThreshold = 0.75
	DefaultMaxUse    = 0.5
)

// Capacity is the rebalancing post's [004] capacity question: when must the shards grow, to how
// many, and what will the move cost? Grow when the fullest shard reaches Threshold of its
// capacity; grow to a count that brings the total use down to MaxUse, and far enough that no
// second resize is needed before new hardware can arrive (LeadTime).
//
// Growth is linear, GrowthPerDay units a day, and lands on the shards in proportion to what
// they hold (evenly while nothing is held): every owner is assumed to grow alike. For data
// that grows by a percentage, plan again as it grows, or pass the rate expected at the
// horizon.
type Capacity struct {
	// PerShard is what one shard holds at most, in the layout's unit; > 0. New shards hold
	// as much.
	PerShard int64
	// GrowthPerDay is how much the whole data set grows a day, in that unit; > 0.
	GrowthPerDay float64
	// LeadTime is how long new hardware takes to arrive (the rebalancing post [004]: days to a
	// month); >= 0. After the resize, the fullest shard must take at least this long to reach
	// Threshold again.
	LeadTime time.Duration
	// Threshold is the share of PerShard at which the fullest shard triggers a resize, in
	// (0, 1]. Zero means DefaultThreshold, 0.75.
	Threshold float64
	// MaxUse is the most of the total capacity in use right after the resize, in
	// (0, Threshold]. Zero means DefaultMaxUse, 0.5.
	MaxUse float64
	// CopyRate is how many units the migration copies a second, measured on your system;
	// >= 0. Zero means unknown: CapacityPlan.CopyTime is then zero.
	CopyRate float64
	// Multiples restricts the counts considered to multiples of the current one: modulo's
	// doubling, where a key stays or moves to s + j*n (the sharding lecture [003]), which moves
	// far less than modulo's n -> n+1.
	Multiples bool
	// MaxShards is the largest count considered. Zero means twice the least count the
	// totals allow (see PlanCapacity).
	MaxShards int
}

// CapacityPlan is the answer to a Capacity question. Fractions are of PerShard (one
// shard's) or of PerShard times the count (the total).
type CapacityPlan struct {
	// Shards is the number of shards now, Use the total use now, and Fullest the fullest
	// shard, which holds FullestUse of its capacity.
	Shards     int
	Use        float64
	Fullest    int
	FullestUse float64

	// ResizeIn is how long until the fullest shard reaches Threshold at GrowthPerDay: when to
	// resize; zero if it has already. OrderIn is ResizeIn - LeadTime: the hardware must be
	// ordered within it, and a negative OrderIn says the order is that much late. Durations
	// too long for a time.Duration (292 years) are the largest one.
	ResizeIn time.Duration
	OrderIn  time.Duration
	// Scale is the data at the resize over the data now, 1 when the resize is now.
	Scale float64

	// Target is the least count, after the current one (a multiple of it with Multiples),
	// such that right after the resize at ResizeIn the total use is at most MaxUse and the
	// fullest shard, as the strategy places the data, stays below Threshold for at least
	// LeadTime (Lasts).
	Target int
	// Usage is what each of the Target shards holds right after the resize.
	Usage []int64
	// UseAfter is the total use after the resize; FullestAfter the fullest shard after it,
	// at FullestUseAfter of its capacity.
	UseAfter        float64
	FullestAfter    int
	FullestUseAfter float64
	// Lasts is how long after the resize until the fullest shard reaches Threshold again.
	Lasts time.Duration

	// Moves is what the resize moves, in units from each shard to each shard, as the
	// strategy moves them: the layout's plan for Target shards, scaled by Scale (and rounded)
	// when the resize is later than now. Moves.Moved() is the data to copy.
	Moves *Plan
	// CopyTime is Moves.Moved() at CopyRate, zero if CopyRate is zero.
	CopyTime time.Duration
}

// PlanCapacity answers c for the data of layout: when to grow, to how many shards and what
// the resize moves, as the layout's strategy moves it. It tries the counts from the least
// that the totals allow (no strategy spreads data better than evenly) upwards, one
// layout.Resize per count (for an OwnerLayout, a pass over the owners), until one meets the
// targets: one or two for an even strategy. Bad input, and no count up to MaxShards that
// meets the targets, are errors wrapping ErrCapacity; errors of the layout are returned as
// they are.
func PlanCapacity(c Capacity, layout Layout) (*CapacityPlan, error) {
	c.Threshold = cmp.Or(c.Threshold, DefaultThreshold)
	c.MaxUse = cmp.Or(c.MaxUse, DefaultMaxUse)
	if err := c.check(); err != nil {
		return nil, err
	}
	if layout == nil {
		return nil, fmt.Errorf("rebalance: capacity: nil layout: %w", ErrCapacity)
	}
	usage := layout.Usage()
	if len(usage) == 0 {
		return nil, fmt.Errorf("rebalance: capacity: the layout has no shard: %w", ErrCapacity)
	}
	if err := checkUsage(usage); err != nil {
		return nil, err
	}
	capacity := float64(c.PerShard)
	p := &CapacityPlan{Shards: len(usage)}
	var total int64
	for s, u := range usage {
		if u > c.PerShard {
			return nil, fmt.Errorf("rebalance: capacity: shard %d holds %d, above its capacity %d: %w", s, u, c.PerShard, ErrCapacity)
		}
		if u > usage[p.Fullest] {
			p.Fullest = s
		}
		total += u
	}
	p.Use = float64(total) / (capacity * float64(len(usage)))
	p.FullestUse = float64(usage[p.Fullest]) / capacity
	resizeDays := lastingDays(usage, total, c)
	p.ResizeIn = days(resizeDays)
	p.OrderIn = days(resizeDays - c.LeadTime.Hours()/24)
	then := float64(total) + c.GrowthPerDay*resizeDays // the data at the resize
	p.Scale = 1
	if total > 0 {
		p.Scale = then / float64(total)
	}

	// No strategy spreads the data more evenly than evenly: the total use and the lead
	// time both need at least this many shards (see Capacity).
	leadDays := c.LeadTime.Hours() / 24
	least := max(p.Shards+1,
		ceilCount(then/(c.MaxUse*capacity)),
		ceilCount((then+c.GrowthPerDay*leadDays)/(c.Threshold*capacity)))
	step := 1
	if c.Multiples {
		step = p.Shards
		least = (least + step - 1) / step * step
	}
	limit := c.MaxShards
	if limit == 0 {
		limit = 2 * least
	}
	if least > limit {
		return nil, fmt.Errorf("rebalance: capacity: the totals need at least %d shards, MaxShards is %d: %w", least, limit, ErrCapacity)
	}
	var best string // why the last count tried fell short
	for n := least; n <= limit; n += step {
		moves, err := layout.Resize(n)
		if err != nil {
			return nil, err
		}
		moves = scalePlan(moves, p.Scale)
		after := make([]int64, n)
		var sum int64
		for _, f := range moves.Flows {
			if f.To < 0 || f.To >= n {
				return nil, fmt.Errorf("rebalance: capacity: the layout's resize to %d shards moves data to shard %d: %w", n, f.To, ErrLayout)
			}
			after[f.To] += f.Count
			sum += f.Count
		}
		fullest := 0
		for s, u := range after {
			if u > after[fullest] {
				fullest = s
			}
		}
		lasts := lastingDays(after, sum, c)
		use := float64(sum) / (capacity * float64(n))
		if use <= c.MaxUse && lasts >= leadDays && float64(after[fullest]) < c.Threshold*capacity {
			p.Target, p.Usage, p.UseAfter, p.Moves = n, after, use, moves
			p.FullestAfter, p.FullestUseAfter = fullest, float64(after[fullest])/capacity
			p.Lasts = days(lasts)
			if c.CopyRate > 0 {
				p.CopyTime = duration(float64(moves.Moved()) / c.CopyRate * float64(time.Second))
			}
			return p, nil
		}
		best = fmt.Sprintf("%d shards: shard %d at %.1f%%, %.1f%% in total, %.1f days to the threshold",
			n, fullest, 100*float64(after[fullest])/capacity, 100*use, lasts)
	}
	return nil, fmt.Errorf("rebalance: capacity: no count in [%d, %d] keeps the total at most %.0f%% and every shard below %.0f%% for the lead time of %v (the last tried, %s): a single owner too big for one shard, or raise MaxShards: %w",
		least, limit, 100*c.MaxUse, 100*c.Threshold, c.LeadTime, best, ErrCapacity)
}

// check validates c, its zero thresholds already replaced by the defaults.
func (c Capacity) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("rebalance: capacity: "+format+": %w", append(args, ErrCapacity)...)
	}
	switch {
	case c.PerShard <= 0:
		return bad("capacity %d per shard: want > 0", c.PerShard)
	case !(c.GrowthPerDay > 0) || math.IsInf(c.GrowthPerDay, 0):
		return bad("growth %v a day: want a finite rate > 0 (data that does not grow never needs a resize)", c.GrowthPerDay)
	case c.LeadTime < 0:
		return bad("lead time %v: want >= 0", c.LeadTime)
	case !(c.Threshold > 0 && c.Threshold <= 1):
		return bad("threshold %v: want (0, 1]", c.Threshold)
	case !(c.MaxUse > 0 && c.MaxUse <= c.Threshold):
		return bad("MaxUse %v: want (0, threshold %v]", c.MaxUse, c.Threshold)
	case !(c.CopyRate >= 0) || math.IsInf(c.CopyRate, 0):
		return bad("copy rate %v a second: want a finite rate >= 0", c.CopyRate)
	case c.MaxShards < 0:
		return bad("MaxShards %d: want >= 0", c.MaxShards)
	}
	return nil
}

// lastingDays returns how many days until the first shard of usage (total the sum) reaches
// the threshold, growth landing in proportion to usage (evenly when total is zero); 0 if
// one has already.
func lastingDays(usage []int64, total int64, c Capacity) float64 {
	limit := c.Threshold * float64(c.PerShard)
	soonest := math.Inf(1)
	for _, u := range usage {
		share := 1 / float64(len(usage))
		if total > 0 {
			share = float64(u) / float64(total)
		}
		if share > 0 {
			soonest = min(soonest, (limit-float64(u))/(c.GrowthPerDay*share))
		}
	}
	return max(soonest, 0)
}

// days converts days to a Duration, saturating at the largest Durations.
func days(d float64) time.Duration {
	return duration(d * float64(24*time.Hour))
}

func duration(ns float64) time.Duration {
	switch {
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(ns)
}

// ceilCount returns ceil(x) as a shard count, saturating far above any count tried.
func ceilCount(x float64) int {
	if x >= 1<<30 { // fits int on 32-bit platforms too
		return 1 << 30
	}
	return int(math.Ceil(x))
}

// scalePlan returns p with every count times scale, rounded; p itself when scale is 1.
func scalePlan(p *Plan, scale float64) *Plan {
	if scale == 1 {
		return p
	}
	out := &Plan{Flows: make([]Flow, 0, len(p.Flows))}
	for _, f := range p.Flows {
		f.Count = int64(math.Round(float64(f.Count) * scale))
		out.Flows = append(out.Flows, f)
		out.Total += f.Count
	}
	return out
}
