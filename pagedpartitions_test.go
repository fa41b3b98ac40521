package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPagedPartitionsContract(t *testing.T) {
	checkContract(t, contract{
		name:          "paged-partitions",
		newSharder:    func(n int) (Sharder, error) { return NewPagedPartitions(n, 16384, 1024) },
		sizes:         []int{1, 2, 7, 10, 64, 1000},
		tooMany:       16385,
		resizeIsFresh: false, // as Partitions: the new shard takes a slice of every range
		minimalGrow:   true,
		minimalShrink: true,
	})
}

func TestNewPagedPartitionsBadArguments(t *testing.T) {
	for _, c := range []struct {
		n, partitions, pageSize int
		want                    error
		msg                     string
	}{
		{1, 0, 16, ErrPartitionCount, "shard: paged partitions: 0 partitions: allowed range is [1, 16777216]"},
		{1, 1<<24 + 1, 16, ErrPartitionCount, "16777217 partitions"},
		{1, 100, 0, ErrPartitionCount, "shard: paged partitions: page size 0: want a power of two in [1, 65536]"},
		{1, 100, 24, ErrPartitionCount, "page size 24"},
		{1, 100, 1 << 17, ErrPartitionCount, "page size 131072"},
		{0, 100, 16, ErrShardCount, "shard: paged partitions: 0 shards: allowed range is [1, 100]"},
		{101, 100, 16, ErrShardCount, "101 shards: allowed range is [1, 100]"},
		{65537, 1 << 20, 1024, ErrShardCount, "65537 shards: allowed range is [1, 65536]"},
	} {
		_, err := NewPagedPartitions(c.n, c.partitions, c.pageSize)
		require.ErrorIs(t, err, c.want)
		require.ErrorContains(t, err, c.msg)
	}
	p, err := NewPagedPartitions(65536, 1<<20, 1<<16)
	require.NoError(t, err)
	require.Equal(t, 16, p.NumPages())
	require.Equal(t, 1<<16, p.PageSize())
}

// checkSamePlacement checks that p and q hold the same table and place keys alike.
func checkSamePlacement(t *testing.T, what string, p *Partitions, q *PagedPartitions, keys []string) {
	t.Helper()
	require.Equalf(t, p.Table(), q.Table(), "%s: tables differ", what)
	require.Equal(t, p.Shards(), q.Shards(), what)
	for _, k := range keys {
		if p.Partition(k) != q.Partition(k) || p.Locate(k) != q.Locate(k) {
			t.Fatalf("%s: key %q: Partitions gives partition %d shard %d, PagedPartitions %d and %d",
				what, k, p.Partition(k), p.Locate(k), q.Partition(k), q.Locate(k))
		}
	}
}

// For the same partition -> shard table, PagedPartitions places every key as Partitions
// does, through random resizes and moves, and reports as changed exactly the pages whose
// owners changed, each with its version one higher.
func TestPagedPartitionsMatchesPartitions(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	keys := append(randomKeys(33, 300, 10), adversarialKeys()...)
	rounds := 60
	if quick() {
		rounds = 15
	}
	for round := range rounds {
		np := 1 + r.IntN(3000)
		switch round {
		case 0:
			np = 16384
		case 1:
			np = maxPartitions
		}
		pageSize := 1 << r.IntN(13)
		n := 1 + r.IntN(min(np, 40))
		what := fmt.Sprintf("P=%d pagesize=%d", np, pageSize)
		p, err := NewPartitions(n, np)
		require.NoError(t, err)
		q, err := NewPagedPartitions(n, np, pageSize)
		require.NoError(t, err)
		checkSamePlacement(t, what+" new", p, q, keys)
		for step := range 8 {
			before, versions := q.Table(), q.Versions()
			var changed []int
			if r.IntN(2) == 0 {
				to := 1 + r.IntN(min(np, 40))
				want, err := p.PlanResize(to)
				require.NoError(t, err)
				got, err := q.PlanResize(to)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s: PlanResize(%d)", what, to)
				require.NoError(t, p.Resize(to))
				changed, err = q.ResizePages(to)
				require.NoError(t, err)
			} else {
				var moves []PartitionMove
				owners := q.Table()
				for range 1 + r.IntN(5) {
					m := PartitionMove{Partition: r.IntN(np), To: r.IntN(q.Shards())}
					m.From = owners[m.Partition]
					owners[m.Partition] = m.To
					moves = append(moves, m)
					require.NoError(t, p.Move(m.Partition, m.To))
				}
				changed, err = q.Move(moves...)
				require.NoError(t, err)
			}
			checkSamePlacement(t, fmt.Sprintf("%s step %d", what, step), p, q, keys)
			var want []int
			after, nowVersions := q.Table(), q.Versions()
			for i := range versions {
				lo, hi := i*pageSize, min((i+1)*pageSize, np)
				if slices.Equal(before[lo:hi], after[lo:hi]) {
					require.Equal(t, versions[i], nowVersions[i], "%s: page %d did not change but its version did", what, i)
				} else {
					want = append(want, i)
					require.Equal(t, versions[i]+1, nowVersions[i], "%s: page %d changed", what, i)
				}
			}
			require.Truef(t, slices.Equal(want, changed), "%s step %d: changed pages %v, want %v", what, step, changed, want)
		}
	}
}

// Resizing 2^20 partitions in 1024 pages from 10 to 11 shards changes about 10% of the
// partitions but only the pages that hold each shard's highest ones: each old shard gives
// away one contiguous run, which spans at most 11 pages.
func TestPagedPartitionsResizeChangesFewPages(t *testing.T) {
	q, err := NewPagedPartitions(10, 1<<20, 1024)
	require.NoError(t, err)
	plan, err := q.PlanResize(11)
	require.NoError(t, err)
	changed, err := q.ResizePages(11)
	require.NoError(t, err)
	t.Logf("10 -> 11 shards: %d of %d partitions move, %d of %d pages change", len(plan), 1<<20, len(changed), q.NumPages())
	require.LessOrEqual(t, len(changed), 10*11)
	require.GreaterOrEqual(t, len(changed), len(plan)/1024)
}

func TestPagedPartitionsMove(t *testing.T) {
	q, err := NewPagedPartitions(3, 40, 16)
	require.NoError(t, err)
	owner := func(part int) int { return q.Table()[part] }

	changed, err := q.Move(PartitionMove{Partition: 0, From: 0, To: 2}, PartitionMove{Partition: 39, From: 2, To: 1})
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, changed)
	require.Equal(t, []uint64{2, 1, 2}, q.Versions())
	require.Equal(t, 2, owner(0))
	require.Equal(t, 1, owner(39))

	// There and back in one batch changes nothing, version included.
	changed, err = q.Move(PartitionMove{Partition: 20, From: 1, To: 0}, PartitionMove{Partition: 20, From: 0, To: 1})
	require.NoError(t, err)
	require.Empty(t, changed)
	require.Equal(t, []uint64{2, 1, 2}, q.Versions())

	before := q.Table()
	for _, c := range []struct {
		moves []PartitionMove
		want  error
		msg   string
	}{
		{[]PartitionMove{{Partition: 40, From: 0, To: 1}}, ErrPartition, "move 0: partition 40: allowed range is [0, 40)"},
		{[]PartitionMove{{Partition: 1, From: 0, To: 1}, {Partition: -1, From: 0, To: 1}}, ErrPartition, "move 1: partition -1"},
		{[]PartitionMove{{Partition: 1, From: 0, To: 3}}, ErrShard, "move 0: partition 1 to shard 3: allowed range is [0, 3)"},
		{[]PartitionMove{{Partition: 0, From: 0, To: 1}}, ErrStalePage, "move 0: partition 0 is on shard 2, not on shard 0"},
		{[]PartitionMove{{Partition: 1, From: 0, To: 1}, {Partition: 1, From: 0, To: 2}}, ErrStalePage, "move 1: partition 1 is on shard 1, not on shard 0"},
	} {
		_, err := q.Move(c.moves...)
		require.ErrorIs(t, err, c.want)
		require.ErrorContains(t, err, "shard: paged partitions: "+c.msg)
		require.Equal(t, before, q.Table(), "a failed Move changed the table")
		require.Equal(t, []uint64{2, 1, 2}, q.Versions())
	}

	// A plan made before a change is refused after it.
	plan, err := q.PlanResize(2)
	require.NoError(t, err)
	_, err = q.Move(plan...)
	require.NoError(t, err)
	_, err = q.Move(plan...)
	require.ErrorIs(t, err, ErrStalePage, "applying a plan twice")
}

// pagedTextOf returns MarshalPages of q's pages, failing the test on error.
func pagedTextOf(t *testing.T, q *PagedPartitions, pages ...int) []byte {
	t.Helper()
	text, err := q.MarshalPages(pages...)
	require.NoError(t, err)
	return text
}

func TestPagedPartitionsText(t *testing.T) {
	q, err := NewPagedPartitions(3, 40, 16)
	require.NoError(t, err)
	var b strings.Builder
	text, err := q.MarshalText()
	require.NoError(t, err)
	b.Write(text)
	for _, n := range []int{4, 7, 2, 5, 40, 1} {
		changed, err := q.ResizePages(n)
		require.NoError(t, err)
		fmt.Fprintf(&b, "# ResizePages(%d) changed pages %v\n", n, changed)
		b.Write(pagedTextOf(t, q, changed...))
	}
	text, err = q.MarshalText()
	require.NoError(t, err)
	b.Write(text)
	checkRegress(t, "regress/pagedpartitions.txt", b.String())

	// A whole table round-trips, into a zero value and into a table of the same layout.
	r, err := NewPagedPartitions(3, 1000, 64)
	require.NoError(t, err)
	_, err = r.Move(PartitionMove{Partition: 999, From: 2, To: 0}, PartitionMove{Partition: 64, From: 0, To: 1})
	require.NoError(t, err)
	text, err = r.MarshalText()
	require.NoError(t, err)
	var z PagedPartitions
	require.NoError(t, z.UnmarshalText(text))
	require.Equal(t, r.Table(), z.Table())
	require.Equal(t, r.Versions(), z.Versions())
	again, err := z.MarshalText()
	require.NoError(t, err)
	require.Equal(t, text, again)
	s, err := NewPagedPartitions(7, 1000, 64)
	require.NoError(t, err)
	err = s.UnmarshalText(text)
	require.ErrorIs(t, err, ErrStalePage, "a table of another history has other owners under version 1")
	require.ErrorContains(t, err, "line 7: page 2: version 1 is loaded with other owners")
	_, err = r.ResizePages(7)
	require.NoError(t, err)
	require.NoError(t, z.UnmarshalText(pagedTextOf(t, r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)), "the next state of the same history")
	require.Equal(t, r.Table(), z.Table())
	require.Equal(t, 7, z.Shards())

	// The example of MarshalPages's documentation loads into a zero value.
	var doc PagedPartitions
	require.NoError(t, doc.LoadPages([]byte("hash=xxh64 partitions=40 pagesize=16 shards=3\npage=0 version=1\n0-13 0\n14-15 1\npage=2 version=4\n0-6 2\n7 1\n")))
	require.Equal(t, []uint64{1, 0, 4}, doc.Versions())
}

// Pages travel on their own: a reader applies exactly the pages a writer changed.
func TestPagedPartitionsShipPages(t *testing.T) {
	w, err := NewPagedPartitions(10, 1<<14, 256)
	require.NoError(t, err)
	var r PagedPartitions
	whole, err := w.MarshalText()
	require.NoError(t, err)
	require.NoError(t, r.UnmarshalText(whole))

	grow, err := w.ResizePages(11)
	require.NoError(t, err)
	growText := pagedTextOf(t, w, grow...)
	require.NoError(t, r.LoadPages(growText))
	require.Equal(t, w.Table(), r.Table())
	require.Equal(t, w.Versions(), r.Versions())
	require.Equal(t, 11, r.Shards())
	require.NoError(t, r.LoadPages(growText), "loading the same pages again is harmless")

	shrink, err := w.ResizePages(10)
	require.NoError(t, err)
	require.Greater(t, len(shrink), 1)
	before := r.Table()
	err = r.LoadPages(pagedTextOf(t, w, shrink[1:]...))
	require.ErrorIs(t, err, ErrPartitionTable)
	require.ErrorContains(t, err, fmt.Sprintf("shard: paged partitions: line 1: shards=10, but loaded page %d, not in the text, has partition", shrink[0]))
	require.Equal(t, before, r.Table())
	require.Equal(t, 11, r.Shards())
	require.NoError(t, r.LoadPages(pagedTextOf(t, w, shrink...)))
	require.Equal(t, w.Table(), r.Table())
	require.Equal(t, 10, r.Shards())

	// The grow text is now stale for the pages the shrink changed back.
	err = r.LoadPages(growText)
	require.ErrorIs(t, err, ErrStalePage)
	require.ErrorContains(t, err, "is older than the loaded version")
	whole, err = w.MarshalText()
	require.NoError(t, err)
	require.NoError(t, r.UnmarshalText(whole), "the writer's whole table is no older")
}

// A process that holds only some pages answers for their keys and knows it lacks the rest.
func TestPagedPartitionsPartial(t *testing.T) {
	w, err := NewPagedPartitions(5, 4096, 512)
	require.NoError(t, err)
	var r PagedPartitions
	require.Zero(t, r.Shards())
	require.NoError(t, r.LoadPages(pagedTextOf(t, w, 3, 5)))
	require.Equal(t, []uint64{0, 0, 0, 1, 0, 1, 0, 0}, r.Versions())
	require.Zero(t, r.Shards(), "a partial table is not a Sharder")
	require.Nil(t, r.Table())
	for _, k := range randomKeys(34, 2000, 8) {
		page := r.Partition(k) / r.PageSize()
		got, ok := r.Lookup(k)
		require.Equal(t, page == 3 || page == 5, ok, "Lookup(%q) on page %d", k, page)
		if ok {
			require.Equal(t, w.Locate(k), got)
			require.Equal(t, got, r.Locate(k))
		} else {
			require.Zero(t, r.Locate(k))
		}
	}
	_, err = r.MarshalText()
	require.ErrorContains(t, err, "shard: paged partitions: save: 6 of 8 pages are not loaded")
	_, err = r.MarshalPages(4)
	require.ErrorContains(t, err, "save page 4: not loaded")
	_, err = r.MarshalPages(8)
	require.ErrorIs(t, err, ErrPartition)
	require.ErrorIs(t, r.Resize(2), ErrPartitionTable)
	_, err = r.Move(PartitionMove{Partition: 1600, From: 3, To: 0})
	require.ErrorIs(t, err, ErrPartitionTable)
	require.Equal(t, pagedTextOf(t, w, 5, 3), pagedTextOf(t, &r, 3, 5))

	require.NoError(t, r.LoadPages(pagedTextOf(t, w, 0, 1, 2, 4, 6, 7)))
	require.Equal(t, 5, r.Shards())
	require.Equal(t, w.Table(), r.Table())
}

func TestPagedPartitionsTextErrors(t *testing.T) {
	q, err := NewPagedPartitions(2, 40, 16)
	require.NoError(t, err)
	_, err = q.Move(PartitionMove{Partition: 17, From: 0, To: 1})
	require.NoError(t, err) // page 1 at version 2
	before, versions := q.Table(), q.Versions()
	const h = "hash=xxh64 partitions=40 pagesize=16 shards=2\n"
	const p0, p2 = "page=0 version=1\n0-15 0\n", "page=2 version=1\n0-7 1\n"
	for _, c := range []struct {
		text, msg string
		want      error
	}{
		{"", `line 1: header "": want "hash=xxh64 partitions=P pagesize=S shards=N"`, ErrPartitionTable},
		{"hash=xxh64 partitions=40 shards=2\n", "line 1: header", ErrPartitionTable},
		{"hash=redis partitions=40 pagesize=16 shards=2\n", `line 1: "hash=redis": want hash=xxh64`, ErrPartitionTable},
		{"hash=xxh64 partitions=040 pagesize=16 shards=2\n", "line 1: \"partitions=040\": want partitions=P with P in [1, 16777216]", ErrPartitionTable},
		{"hash=xxh64 partitions=40 pagesize=24 shards=2\n", `line 1: "pagesize=24": want pagesize=S with S a power of two in [1, 65536]`, ErrPartitionTable},
		{"hash=xxh64 partitions=40 pagesize=16 shards=41\n", `line 1: "shards=41": want shards=N with N in [1, 40]`, ErrPartitionTable},
		{h + "page=0 version=1\n0-15 0\n\n", "line 4: blank line at the end", ErrPartitionTable},
		{h + "page=0\n0-15 0\n", `line 2: "page=0": want "page=I version=V"`, ErrPartitionTable},
		{h + "page=0 version=+1\n0-15 0\n", "line 2", ErrPartitionTable},
		{h + "page=0 version=0\n0-15 0\n", "line 2: page 0: version 0: versions start at 1", ErrPartitionTable},
		{h + "page=3 version=1\n0-15 0\n", "line 2: page 3: the table has pages 0-2", ErrPartitionTable},
		{h + p0 + "page=0 version=2\n0-15 0\n", "line 4: page 0 after page 0: pages must be in increasing order, each once", ErrPartitionTable},
		{h + p2 + p0, "line 4: page 0 after page 2", ErrPartitionTable},
		{h + "page=0 version=1\n0-14 0\npage=1 version=3\n0-15 1\n", "line 2: page 0 ends early: its partitions 15-15 have no owner", ErrPartitionTable},
		{h + "page=0 version=1\npage=1 version=3\n0-15 1\n", "line 2: page 0 ends early: its partitions 0-15 have no owner", ErrPartitionTable},
		{h + "page=0 version=1\n0-9 0\n9-15 1\n", "line 4: range 9-15 overlaps partitions already given (next expected 10)", ErrPartitionTable},
		{h + "page=2 version=1\n0-8 1\n", "line 3: range 0-8: partitions end at 7", ErrPartitionTable},
		{h + "page=2 version=1\n0-7 2\n", "line 3: shard 2: allowed range is [0, 2)", ErrPartitionTable},
		{h + "page=2 version=1\n0-7 1\r\n", "line 3", ErrPartitionTable},
		{h + "page=2 version=1\n0-07 1\n", `line 3: "0-07 1": want "FIRST-LAST SHARD" or "PARTITION SHARD" in decimal`, ErrPartitionTable},
		{h + p0 + "page=1 version=1\n0-15 0\n", "line 4: page 1: version 1 is older than the loaded version 2", ErrStalePage},
		{h + p0 + "page=1 version=2\n0-15 0\n", "line 4: page 1: version 2 is loaded with other owners: a changed page needs a new version", ErrStalePage},
		{"hash=xxh64 partitions=40 pagesize=8 shards=2\npage=0 version=1\n0-7 0\n", "text has partitions=40 pagesize=8, this table has partitions=40 pagesize=16", ErrPartitionCount},
		{"hash=xxh64 partitions=48 pagesize=16 shards=2\npage=0 version=1\n0-15 0\n", "text has partitions=48 pagesize=16", ErrPartitionCount},
		{"hash=xxh64 partitions=40 pagesize=16 shards=1\npage=0 version=1\n0-15 0\n", "line 1: shards=1, but loaded page 1, not in the text, has partition 17 on shard 1", ErrPartitionTable},
	} {
		err := q.LoadPages([]byte(c.text))
		require.ErrorIsf(t, err, c.want, "%q", c.text)
		require.ErrorContainsf(t, err, "shard: paged partitions: "+c.msg, "%q", c.text)
		require.Equal(t, before, q.Table(), "a failed load changed the table")
		require.Equal(t, versions, q.Versions())
		if c.want == ErrPartitionTable && c.msg != "" && !strings.HasPrefix(c.msg, "line 1: shards=") {
			// The same text is malformed as a whole table too.
			err := q.UnmarshalText([]byte(c.text))
			require.ErrorIsf(t, err, ErrPartitionTable, "%q", c.text)
			require.ErrorContainsf(t, err, "shard: paged partitions: "+c.msg, "%q", c.text)
		}
	}
	// A whole table that goes back, or has another layout.
	p1 := "page=1 version=2\n0 0\n1 1\n2-3 0\n4-15 1\n"
	for _, c := range []struct {
		text, msg string
		want      error
	}{
		{h + p0 + p1 + p2, "", nil},
		{h + p0 + "page=1 version=1\n0-15 0\n" + p2, "line 4: page 1: version 1 is older than the loaded version 2", ErrStalePage},
		{h + p0 + "page=1 version=2\n0-15 0\n" + p2, "line 4: page 1: version 2 is loaded with other owners", ErrStalePage},
		{"hash=xxh64 partitions=40 pagesize=32 shards=2\npage=0 version=1\n0-31 0\npage=1 version=1\n0-7 1\n", "text has partitions=40 pagesize=32, this table has partitions=40 pagesize=16", ErrPartitionCount},
	} {
		err := q.UnmarshalText([]byte(c.text))
		if c.want == nil {
			require.NoError(t, err, "the loaded table itself")
			continue
		}
		require.ErrorIsf(t, err, c.want, "%q", c.text)
		require.ErrorContainsf(t, err, "shard: paged partitions: "+c.msg, "%q", c.text)
		require.Equal(t, before, q.Table(), "a failed load changed the table")
		require.Equal(t, versions, q.Versions())
	}
	// A whole table must have every page.
	for _, c := range []struct{ text, msg string }{
		{h, "text ends after 0 pages: pages 0-2 are missing"},
		{h + p0, "text ends after 1 pages: pages 1-2 are missing"},
		{h + p0 + p2, "line 4: page 2 follows page 0: page 1 is missing"},
	} {
		err := q.UnmarshalText([]byte(c.text))
		require.ErrorIs(t, err, ErrPartitionTable)
		require.ErrorContains(t, err, "shard: paged partitions: "+c.msg)
	}
	require.Equal(t, before, q.Table())
}

func FuzzPagedPartitionsLoadPages(f *testing.F) {
	f.Add([]byte("hash=xxh64 partitions=40 pagesize=16 shards=3\npage=0 version=1\n0-13 0\n14-15 1\npage=2 version=4\n0-6 2\n7 1\n"))
	f.Add([]byte("hash=xxh64 partitions=3 pagesize=1 shards=2\npage=0 version=1\n0 1\npage=1 version=9\n0-0 0\npage=2 version=1\n0 1"))
	f.Add([]byte("hash=xxh64 partitions=1048576 pagesize=65536 shards=1\n"))
	f.Add([]byte("hash=xxh64 partitions=40 pagesize=16 shards=3\npage=1 version=1\n0-9 0\n9-15 1\n"))
	keys := randomKeys(35, 50, 6)
	f.Fuzz(func(t *testing.T, text []byte) {
		var q PagedPartitions
		var err error
		// Memory in proportion to the text, besides the list of pages its header asks for
		// (at most 2^16 pages: 2 MiB, made up to three times).
		if got := allocated(func() { err = q.LoadPages(text) }); got > uint64(64*len(text)+8<<20) {
			t.Fatalf("%d bytes of text: %d bytes allocated", len(text), got)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrPartitionTable)
			require.Truef(t, strings.HasPrefix(err.Error(), "shard: paged partitions: "), "%v", err)
			require.Zero(t, q.NumPages(), "a failed load left pages")
			return
		}
		var loaded []int
		for i, v := range q.Versions() {
			if v > 0 {
				loaded = append(loaded, i)
			}
		}
		out, err := q.MarshalPages(loaded...)
		require.NoError(t, err)
		var r PagedPartitions
		require.NoError(t, r.LoadPages(out), "MarshalPages output %q does not load", out)
		require.Equal(t, q.Versions(), r.Versions())
		require.Equal(t, out, pagedTextOf(t, &r, loaded...), "MarshalPages is not canonical")
		require.NoError(t, q.LoadPages(out), "loading the same pages again")
		for _, k := range keys {
			s, ok := q.Lookup(k)
			want, wantOK := r.Lookup(k)
			require.Equal(t, want, s)
			require.Equal(t, wantOK, ok)
			require.True(t, s >= 0 && s < 65536)
		}
	})
}

func TestPagedPartitionsZeroValue(t *testing.T) {
	var q PagedPartitions
	require.Zero(t, q.Shards())
	require.Zero(t, q.NumPartitions())
	require.Zero(t, q.NumPages())
	require.Zero(t, q.PageSize())
	require.Zero(t, q.Locate("x"))
	require.Zero(t, q.Partition("x"))
	_, ok := q.Lookup("x")
	require.False(t, ok)
	require.Nil(t, q.Table())
	require.Nil(t, q.Versions())
	require.ErrorIs(t, q.Resize(1), ErrPartitionTable)
	_, err := q.PlanResize(1)
	require.ErrorIs(t, err, ErrPartitionTable)
	_, err = q.Move()
	require.ErrorIs(t, err, ErrPartitionTable)
	_, err = q.MarshalText()
	require.ErrorIs(t, err, ErrPartitionTable)
	_, err = q.MarshalPages()
	require.ErrorIs(t, err, ErrPartitionTable)
}

func TestPagedPartitionsAllocs(t *testing.T) {
	q, err := NewPagedPartitions(10, 1<<20, 1024)
	require.NoError(t, err)
	for _, k := range []string{"", "user:1000", strings.Repeat("x", 4096)} {
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = q.Locate(k) }))
		require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = q.Lookup(k) }))
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = q.Partition(k) }))
	}
}

// BenchmarkPagedPartitionsLocate runs next to BenchmarkPartitionsLocate: the same keys, a
// flat table of 65536 partitions, and paged tables of 65536 and of 2^20 partitions.
func BenchmarkPagedPartitionsLocate(b *testing.B) {
	keys := randomKeys(12, 1<<14, 16)
	p, err := NewPartitions(1000, 1<<16)
	require.NoError(b, err)
	b.Run("strategy=partitions/partitions=65536", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			partitionsSink += p.Locate(keys[i&(len(keys)-1)])
		}
	})
	for _, c := range []struct{ partitions, pageSize int }{{1 << 16, 1024}, {1 << 20, 1024}, {1 << 24, 1 << 16}} {
		q, err := NewPagedPartitions(1000, c.partitions, c.pageSize)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("strategy=paged-partitions/partitions=%d/pagesize=%d", c.partitions, c.pageSize), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				partitionsSink += q.Locate(keys[i&(len(keys)-1)])
			}
		})
	}
}
