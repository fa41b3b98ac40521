package rebalance

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/pool"
)

// PlanRing compares a ring before and after a resize and returns the ranges of positions
// (Ring.Position) that change shard: the sharding lecture's [003] "only contiguous arcs move",
// as Cassandra streams token ranges. It is the per-key plan exactly: a key changes shard if and
// only if its position is in one of the plan's Ranges, and then from that range's From to its
// To. Growing a ring of v points per shard by one shard moves at most v arcs, one per new
// point, fewer where neighbouring new points merge; removing one shard, at most v too. A
// range does not wrap: the arc that runs past the largest position around to 0, if it
// moves, is two Ranges, the last and the first, so such a plan holds at most v+1 Ranges.
//
// The rings must share their position function (the same constructor and Hash): rings
// whose positions differ are not a resize of one another, and PlanRing returns an error
// wrapping ErrLayout. It reads each ring's published table once, so it is safe for
// concurrent use with Resize; its time is linear in the points of both rings, its memory in
// the ranges and pairs of shards.
func PlanRing(before, after *shard.Ring) (*LeafPlan, error) {
	if before == nil || after == nil || before.Shards() == 0 || after.Shards() == 0 {
		return nil, fmt.Errorf("rebalance: plan ring: nil or zero ring: make rings with shard.NewRing and its siblings: %w", ErrLayout)
	}
	if err := samePositions("ring", before.Position, after.Position); err != nil {
		return nil, err
	}
	return compareTilings(ringTiles(before), ringTiles(after)), nil
}

func ringTiles(r *shard.Ring) iter.Seq[tile] {
	arcs := r.Arcs()
	return func(yield func(tile) bool) {
		for a := range arcs {
			if !yield(tile{First: a.First, Last: a.Last, Shard: a.Shard}) {
				return
			}
		}
	}
}

// PlanPoolRing is PlanRing for rings of named nodes, before and after a change of
// membership or weights: the plan's shard numbers index names, every node of either ring in
// increasing byte order. Under RingSuccessor, adding a node of weight w (w*v points) moves
// at most w*v arcs, and so does removing one; under RingNearest and RingNearestPoint a new
// point takes keys from both sides of its position, so at most 2*w*v. As in PlanRing, an arc
// across position 0 is two Ranges: one more than the arcs at most.
func PlanPoolRing(before, after *pool.Ring) (plan *LeafPlan, names []string, err error) {
	if before == nil || after == nil || len(before.Nodes()) == 0 || len(after.Nodes()) == 0 {
		return nil, nil, fmt.Errorf("rebalance: plan pool ring: nil or zero ring: make rings with pool.NewRing: %w", ErrLayout)
	}
	if err := samePositions("pool ring", before.Position, after.Position); err != nil {
		return nil, nil, err
	}
	index := map[string]int{}
	for _, r := range []*pool.Ring{before, after} {
		for _, n := range r.Nodes() {
			index[n.Name] = 0
		}
	}
	names = slices.Sorted(maps.Keys(index))
	for i, name := range names {
		index[name] = i
	}
	tiles := func(r *pool.Ring) iter.Seq[tile] {
		arcs := r.Arcs()
		return func(yield func(tile) bool) {
			for a := range arcs {
				if !yield(tile{First: a.First, Last: a.Last, Shard: index[a.Node]}) {
					return
				}
			}
		}
	}
	return compareTilings(tiles(before), tiles(after)), names, nil
}

// positionProbes are keys whose positions two rings must agree on to be compared: rings of
// different hash functions disagree on every one of them, barring a collision per key.
var positionProbes = []string{"", "0", "a", "key:1", "user:1000", "rebalance", "\xff\x00", "positions must agree"}

// samePositions returns an error wrapping ErrLayout if a and b place a probe key apart.
func samePositions(what string, a, b func(string) uint64) error {
	for _, k := range positionProbes {
		if pa, pb := a(k), b(k); pa != pb {
			return fmt.Errorf("rebalance: plan %s: the rings hash key %q to positions %#016x and %#016x: rings of different hash functions are not a resize of one another: %w",
				what, k, pa, pb, ErrLayout)
		}
	}
	return nil
}

// RangeStore is a Store that can also copy, count and delete rows by range of positions,
// for stores that keep each row's position (Ring.Position of its owner, in an indexed
// column) and can scan a range of it: a RangeMigration then moves a range plan one range at
// a time, without enumerating the owners first. The range methods follow the rules of
// Store's Copy, Count and Delete, with the rows whose position is in [first, last] (both
// included) in place of one owner's rows. The migration's marks are kept through Mark and
// SetMark, one per range, under an owner name that RangeMigration.Owner gives.
type RangeStore interface {
	Store
	// CopyRange makes the rows on shard to whose position is in [first, last] equal those
	// on shard from: rows of the same identity are replaced, rows on to that are not on
	// from are removed. It leaves from unchanged.
	CopyRange(ctx context.Context, first, last uint64, from, to int) error
	// CountRange returns how many rows on shard have a position in [first, last], read from
	// the shard itself.
	CountRange(ctx context.Context, first, last uint64, shard int) (int64, error)
	// DeleteRange removes every row whose position is in [first, last] from shard.
	DeleteRange(ctx context.Context, first, last uint64, shard int) error
}

// RangeMigration moves a range plan range by range while the application keeps reading and
// writing: a Migration whose owners are the plan's ranges. Each range is copied, counted on
// both shards (nothing is deleted before the new shard holds as many of its rows as the old
// one), marked, then deleted from its old shard, with the Migration's resumption after a
// crash, its modes and its errors (ErrCopyMismatch, ErrCopyLost). A key is served by its
// range's shard, the old one until the range is marked; a key in no range does not move.
//
// The keys of one range share one lock, held in this process (as a plain Store's per-owner
// locks are: every access to keys being moved goes through the same RangeMigration): while
// a range moves, Do of any of its keys waits for it, and in Lazy mode the first Do of a key
// moves its whole range, so prefer Async for large ranges. All methods are safe for
// concurrent use.
type RangeMigration struct {
	m             *Migration
	before, after shard.Sharder
	position      func(string) uint64
	ranges        []HashRange
	names         []string
}

// NewRangeMigration returns a migration with the given ID that moves ranges, the plan from
// before to after (PlanRing's or PlanLeaves' Ranges), through store. position returns a
// key's position, the values the ranges are ranges of (Ring.Position for a ring). The ranges
// must be in increasing order, not overlap, and each change shard (From != To, both >= 0),
// else the error wraps ErrLayout; the rest of the arguments are checked as New checks them.
// Do checks every key against before and after: a key they move must be in a range that
// moves it the same way.
func NewRangeMigration(id string, before, after shard.Sharder, position func(key string) uint64, ranges []HashRange, store RangeStore, opts Options) (*RangeMigration, error) {
	if err := checkRanges(ranges); err != nil {
		return nil, err
	}
	if position == nil || isNil(store) || isNil(before) || isNil(after) {
		return nil, fmt.Errorf("rebalance: range migration %q: nil position, store or sharder: %w", id, ErrConfig)
	}
	rm := &RangeMigration{before: before, after: after, position: position, ranges: slices.Clone(ranges),
		names: make([]string, len(ranges))}
	byName := make(map[string]int, len(ranges))
	for i, r := range ranges {
		rm.names[i] = rangeName(r)
		byName[rm.names[i]] = i
	}
	shards := 0
	for _, r := range ranges {
		shards = max(shards, r.From+1, r.To+1)
	}
	rs := &rangeStore{RangeStore: store, ranges: rm.ranges, byName: byName}
	m, err := New(id, &rangeSide{rs: rs, shards: shards}, &rangeSide{rs: rs, shards: shards, after: true}, rs, opts)
	if err != nil {
		return nil, err
	}
	rm.m = m
	return rm, nil
}

// checkRanges returns an error wrapping ErrLayout for a list of ranges that is not a plan.
func checkRanges(ranges []HashRange) error {
	for i, r := range ranges {
		switch {
		case r.First > r.Last:
			return fmt.Errorf("rebalance: range %d [%#016x, %#016x]: first after last: %w", i, r.First, r.Last, ErrLayout)
		case r.From < 0 || r.To < 0 || r.From == r.To:
			return fmt.Errorf("rebalance: range %d [%#016x, %#016x]: shard %d -> %d: a range moves between two shards >= 0: %w", i, r.First, r.Last, r.From, r.To, ErrLayout)
		case i > 0 && r.First <= ranges[i-1].Last:
			return fmt.Errorf("rebalance: range %d [%#016x, %#016x] starts at or before the end of range %d [%#016x, %#016x]: ranges must be in increasing order and not overlap: %w",
				i, r.First, r.Last, i-1, ranges[i-1].First, ranges[i-1].Last, ErrLayout)
		}
	}
	return nil
}

// rangeName is the owner name of a range in the Migration, its marks and its errors.
func rangeName(r HashRange) string {
	b := append([]byte("range "), "0x"...)
	b = strconv.AppendUint(b, r.First, 16)
	b = append(b, "-0x"...)
	return string(strconv.AppendUint(b, r.Last, 16))
}

// errZeroRange is the error of the zero RangeMigration's Do, Run and Finish.
var errZeroRange = fmt.Errorf("rebalance: zero RangeMigration: make one with NewRangeMigration: %w", ErrConfig)

// ID returns the migration's ID, "" for the zero RangeMigration.
func (rm *RangeMigration) ID() string {
	if rm.m == nil {
		return ""
	}
	return rm.m.ID()
}

// Ranges returns a copy of the ranges the migration moves.
func (rm *RangeMigration) Ranges() []HashRange { return slices.Clone(rm.ranges) }

// Owner returns the owner name under which the migration keeps range i's mark in the Store,
// for i in [0, len(Ranges())): "range 0x<first>-0x<last>", in lowercase hexadecimal. Like
// indexing a slice, it panics for i out of range.
func (rm *RangeMigration) Owner(i int) string { return rm.names[i] }

// Stats counts the ranges this value has moved so far, by Run and by Do.
func (rm *RangeMigration) Stats() Stats {
	if rm.m == nil {
		return Stats{}
	}
	return rm.m.Stats()
}

// find returns the index of the range that holds h, or -1.
func (rm *RangeMigration) find(h uint64) int {
	i, _ := slices.BinarySearchFunc(rm.ranges, h, func(r HashRange, h uint64) int { return cmp.Compare(r.Last, h) })
	if i < len(rm.ranges) && rm.ranges[i].First <= h {
		return i
	}
	return -1
}

// Do calls fn with the shard that serves key now, and returns fn's error: for a key in a
// range, the range's old shard until the range is marked, its new one after (moving the
// range first in Lazy mode, as Migration.Do moves an owner); for any other key, its shard,
// which before and after agree on. A key that before and after place otherwise than the
// ranges say is an error wrapping ErrLayout, and fn is not called. fn must not call Do, Run
// or Finish.
func (rm *RangeMigration) Do(ctx context.Context, key string, fn func(shard int) error) error {
	if rm.m == nil {
		return errZeroRange
	}
	h := rm.position(key)
	from, to := rm.before.Locate(key), rm.after.Locate(key)
	i := rm.find(h)
	switch {
	case i < 0 && from == to:
		return fn(to)
	case i < 0:
		return fmt.Errorf("rebalance: range migration %q: key %q at position %#016x moves from shard %d to %d, but no range holds it: the ranges are not the plan from before to after: %w",
			rm.m.ID(), key, h, from, to, ErrLayout)
	case rm.ranges[i].From != from || rm.ranges[i].To != to:
		return fmt.Errorf("rebalance: range migration %q: key %q at position %#016x is in %s, which moves from shard %d to %d, but before and after place it on %d and %d: %w",
			rm.m.ID(), key, h, rm.names[i], rm.ranges[i].From, rm.ranges[i].To, from, to, ErrLayout)
	}
	return rm.m.Do(ctx, rm.names[i], fn)
}

// Run moves every range that is not Done, as Migration.Run moves owners: Progress counts
// ranges. Running it again after an error or a crash resumes.
func (rm *RangeMigration) Run(ctx context.Context) error {
	if rm.m == nil {
		return errZeroRange
	}
	return rm.m.Run(ctx, slices.Values(rm.names))
}

// Finish checks that every range is Done, as Migration.Finish does for owners; from then on
// Do routes by after alone.
func (rm *RangeMigration) Finish(ctx context.Context) error {
	if rm.m == nil {
		return errZeroRange
	}
	return rm.m.Finish(ctx, slices.Values(rm.names))
}

// rangeStore is a RangeStore seen by a Migration whose owners are range names: Copy, Count
// and Delete of an owner are those of its range; Mark and SetMark pass through.
type rangeStore struct {
	RangeStore
	ranges []HashRange
	byName map[string]int
}

func (s *rangeStore) lookup(name string) (HashRange, error) {
	i, ok := s.byName[name]
	if !ok { // unreachable: the Migration only names the ranges it was given
		return HashRange{}, fmt.Errorf("rebalance: %q is not a range of this migration: %w", name, ErrConfig)
	}
	return s.ranges[i], nil
}

func (s *rangeStore) Copy(ctx context.Context, name string, from, to int) error {
	r, err := s.lookup(name)
	if err != nil {
		return err
	}
	return s.CopyRange(ctx, r.First, r.Last, from, to)
}

func (s *rangeStore) Count(ctx context.Context, name string, shard int) (int64, error) {
	r, err := s.lookup(name)
	if err != nil {
		return 0, err
	}
	return s.CountRange(ctx, r.First, r.Last, shard)
}

func (s *rangeStore) Delete(ctx context.Context, name string, shard int) error {
	r, err := s.lookup(name)
	if err != nil {
		return err
	}
	return s.DeleteRange(ctx, r.First, r.Last, shard)
}

// rangeSide is the Sharder a RangeMigration's Migration sees, before (From) or after (To):
// it places a range name on the range's shard.
type rangeSide struct {
	rs     *rangeStore
	shards int
	after  bool
}

func (s *rangeSide) Locate(name string) int {
	r, err := s.rs.lookup(name)
	switch {
	case err != nil:
		return 0 // unreachable, as in lookup
	case s.after:
		return r.To
	}
	return r.From
}

func (s *rangeSide) Resize(int) error {
	return fmt.Errorf("rebalance: the ranges of a range migration are fixed: %w", shard.ErrShardCount)
}

func (s *rangeSide) Shards() int { return s.shards }
