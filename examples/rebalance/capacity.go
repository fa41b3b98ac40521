package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// The rebalancing post's [004] capacity rules, as this example applies them to its data: the
// shards are as full as the fullest shard is now at 75% of capacityUse, the data grows
// growthPerDay of itself a day, and new hardware takes leadTime to arrive.
const (
	capacityUse  = 0.75
	growthPerDay = 0.01
	leadTime     = 30 * 24 * time.Hour
)

// capacityReport is what printCapacity planned, for the copy rate the move then measures.
type capacityReport struct {
	names   []string
	moved   []int64 // rows each plan moves
	planned int64   // rows this run's resize moves
}

// printCapacity answers the rebalancing post's [004] capacity question for the messages on the
// shards of before (the grow phase's layout, before anything moved): when to grow, to how many
// shards and what the resize moves, for user_id % n growing by one shard at a time or by a
// multiple, and for the same users placed by jump, a ring and partitions; then what this run's
// resize, to after, moves. It does nothing and returns nil unless when.
func printCapacity(ctx context.Context, out io.Writer, d *dbs, before, after userSharder, when bool) (*capacityReport, error) {
	if !when {
		return nil, nil
	}
	sizes := map[string]int64{} // messages per user
	for i := range before.Shards() {
		rows, err := d.shards[i].QueryContext(ctx, "SELECT user_id, COUNT(*) FROM messages GROUP BY user_id")
		if err != nil {
			return nil, d.shard(i, err)
		}
		for rows.Next() {
			var user, n int64
			if err := rows.Scan(&user, &n); err != nil {
				rows.Close()
				return nil, d.shard(i, err)
			}
			sizes[strconv.FormatInt(user, 10)] += n
		}
		if err := rows.Close(); err != nil {
			return nil, d.shard(i, err)
		}
	}
	users := slices.Sorted(maps.Keys(sizes))
	messages := func(yield func(string, int64) bool) {
		for _, u := range users {
			if !yield(u, sizes[u]) {
				return
			}
		}
	}
	modulo := func(n int) (shard.Sharder, error) { return newUserSharder(n), nil }
	layout, err := rebalance.OwnerLayout(before, modulo, messages)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, u := range layout.Usage() {
		total += u
	}
	q := rebalance.Capacity{
		PerShard:     max(1, int64(float64(slices.Max(layout.Usage()))/capacityUse)),
		GrowthPerDay: max(1, growthPerDay*float64(total)),
		LeadTime:     leadTime,
	}
	fmt.Fprintf(out, "capacity (the rebalancing post [004]): %d messages, %d a shard (the fullest at %.0f%%), growing %.0f a day, new hardware in %.0f days; grow to under %.0f%% for that long:\n",
		total, q.PerShard, 100*float64(slices.Max(layout.Usage()))/float64(q.PerShard), q.GrowthPerDay, leadTime.Hours()/24, 100*rebalance.DefaultMaxUse)
	n := before.Shards()
	strategies := []struct {
		name      string
		resized   func(int) (shard.Sharder, error)
		multiples bool
	}{
		{"user_id % n, n+1", modulo, false},
		{"user_id % n, doubling", modulo, true},
		{"jump", func(n int) (shard.Sharder, error) { return shard.NewJump(n) }, false},
		{"ring", func(n int) (shard.Sharder, error) { return shard.NewRing(n, shard.RingOptions{}) }, false},
		{"partitions", func(m int) (shard.Sharder, error) {
			p, err := shard.NewPartitions(n, 1024) // resized from the n-shard table
			if err != nil || m == n {
				return p, err
			}
			return p, p.Resize(m)
		}, false},
	}
	report := &capacityReport{}
	for _, s := range strategies {
		b, err := s.resized(n)
		if err != nil {
			return nil, err
		}
		if layout, err = rebalance.OwnerLayout(b, s.resized, messages); err != nil {
			return nil, err
		}
		c := q
		c.Multiples = s.multiples
		p, err := rebalance.PlanCapacity(c, layout)
		if err != nil { // the same users placed otherwise may not fit this capacity
			fmt.Fprintf(out, "  %-21s %v\n", s.name, err)
			continue
		}
		fmt.Fprintf(out, "  %-21s in %.0f days to %2d shards: %5d of %d messages move (%4.1f%%), the fullest then at %.0f%% lasts %.0f days\n",
			s.name, p.ResizeIn.Hours()/24, p.Target, p.Moves.Moved(), p.Moves.Total, 100*p.Moves.Fraction(),
			100*p.FullestUseAfter, p.Lasts.Hours()/24)
		report.names = append(report.names, s.name)
		report.moved = append(report.moved, p.Moves.Moved())
	}
	p, err := rebalance.PlanOwners(before, after, messages)
	if err != nil {
		return nil, err
	}
	report.planned = p.Moved()
	fmt.Fprintf(out, "this run grows user_id %% n to %d shards (-grow): %d of %d messages move\n", after.Shards(), p.Moved(), p.Total)
	return report, nil
}

// printRate prints the copy rate an async grow phase's mover reached (copied messages in
// took), and how long the moves planned by printCapacity take at that rate.
func (r *capacityReport) printRate(out io.Writer, mode rebalance.Mode, copied int64, took time.Duration) {
	if r == nil || mode != rebalance.Async || copied == 0 || took <= 0 {
		return
	}
	rate := float64(copied) / took.Seconds()
	fmt.Fprintf(out, "copy rate: the mover copied %d messages (%d planned, the rest written while it ran) in %v, %.0f a second; at that rate the capacity plans take",
		copied, r.planned, took.Round(time.Millisecond), rate)
	for i, name := range r.names {
		sep := ","
		if i == len(r.names)-1 {
			sep = "\n"
		}
		fmt.Fprintf(out, " %v (%s)%s", time.Duration(float64(r.moved[i])/rate*float64(time.Second)).Round(time.Millisecond), name, sep)
	}
}
