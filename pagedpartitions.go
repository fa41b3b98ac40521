package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// PagedPartitions is Partitions with its partition -> shard table split into pages of a fixed
// number of partitions: the sharding lecture's [003] multi-level sections, where the
// section -> server table is itself sharded, so that the table can grow past what one record
// or one process comfortably holds (2^20 partitions in 1024 pages of 1024, say, up to 2^24). Each
// page carries a version that goes up by one whenever the page changes; pages are saved,
// shipped and loaded on their own, so a change of a few partitions ships a few pages, and a
// process may load only the pages it needs (see LoadPages and Lookup).
//
// A key's partition is floor(XXH64(key) * P / 2^64), as for NewPartitions, and a new table
// splits the partitions among the shards as NewPartitions does, so for the same P and the
// same partition -> shard table both place every key on the same shard. Resize moves the
// same partitions as Partitions.PlanResize says, and reports which pages changed.
//
// All methods are safe for concurrent use. Changes (Resize, Move, LoadPages, UnmarshalText)
// are serialized and publish a new table atomically; it shares every page that did not
// change. Lookups take no lock and never allocate, and cost one more dependent memory load
// than Partitions: the page's slice in the list of pages.
//
// The zero PagedPartitions holds no page: it has no shards and Locate returns 0 until
// UnmarshalText loads a whole table into it, or LoadPages some pages.
type PagedPartitions struct {
	mu    sync.Mutex // serializes Resize, Move, LoadPages and UnmarshalText
	table atomic.Pointer[pagedTable]
}

// pagedTable is one immutable placement: neither it nor its pages are modified once published.
type pagedTable struct {
	partitions int
	shift      uint // log2 of the page size
	shards     int
	pages      [][]uint16 // pages[i][j] is the shard of partition i<<shift + j; nil if not loaded
	versions   []uint64   // 0 where the page is not loaded
	missing    int        // pages not loaded
}

const (
	// maxPagedPartitions bounds P: 2^24 partitions take 32 MiB of table, far more than any
	// shard count needs, and a page text of 2^16 partitions at most 128 KiB.
	maxPagedPartitions = 1 << 24
	maxPageSize        = 1 << 16
	// maxPages bounds the pages, ceil(P / page size), whose list a table holds whole, even
	// with one page loaded: 2^16 take 2 MiB (2^24 partitions in pages of 256 or more), so
	// that a header of a few bytes cannot ask for gigabytes.
	maxPages = 1 << 16
)

// ErrStalePage reports a change made against an older table: a page whose version is older
// than the loaded one, a page with the loaded version but other owners (two writers gave
// one version to different pages), or a move whose From no longer owns its partition.
var ErrStalePage = errors.New("stale partition page")

// NewPagedPartitions returns a PagedPartitions with n shards over a fixed number of
// partitions in pages of pageSize partitions: partitions in [1, 2^24], pageSize a power of
// two in [1, 65536] (the last page may be shorter) that makes at most 65536 pages, n in
// [1, partitions] and at most 65536, since the pages hold 16-bit shard numbers. Every page starts at version 1. As with
// NewPartitions, shard i starts with the i-th contiguous range of partitions.
func NewPagedPartitions(n, partitions, pageSize int) (*PagedPartitions, error) {
	if partitions < 1 || partitions > maxPagedPartitions {
		return nil, fmt.Errorf("shard: paged partitions: %d partitions: allowed range is [1, %d]: %w", partitions, maxPagedPartitions, ErrPartitionCount)
	}
	if pageSize < 1 || pageSize > maxPageSize || pageSize&(pageSize-1) != 0 {
		return nil, fmt.Errorf("shard: paged partitions: page size %d: want a power of two in [1, %d]: %w", pageSize, maxPageSize, ErrPartitionCount)
	}
	if pages := (partitions-1)/pageSize + 1; pages > maxPages {
		return nil, fmt.Errorf("shard: paged partitions: %d partitions in pages of %d make %d pages: at most %d: %w", partitions, pageSize, pages, maxPages, ErrPartitionCount)
	}
	if err := checkCount("paged partitions", n, min(partitions, maxPartitions)); err != nil {
		return nil, err
	}
	t := newPagedTable(partitions, uint(bits.TrailingZeros(uint(pageSize))), n)
	flat := contiguousSplit(partitions, n)
	for i := range t.pages {
		lo, hi := t.pageRange(i)
		t.pages[i] = slices.Clone(flat[lo:hi])
		t.versions[i] = 1
	}
	t.missing = 0
	p := &PagedPartitions{}
	p.table.Store(t)
	return p, nil
}

// newPagedTable returns a table with no page loaded.
func newPagedTable(partitions int, shift uint, shards int) *pagedTable {
	pages := (partitions-1)>>shift + 1
	return &pagedTable{partitions: partitions, shift: shift, shards: shards,
		pages: make([][]uint16, pages), versions: make([]uint64, pages), missing: pages}
}

// pageRange returns the partitions [lo, hi) of page i.
func (t *pagedTable) pageRange(i int) (lo, hi int) {
	lo = i << t.shift
	return lo, min(lo+1<<t.shift, t.partitions)
}

// Locate returns the shard that owns key's partition, in [0, Shards()). It returns 0 for
// the zero PagedPartitions, and for a key whose page is not loaded (see Lookup).
func (p *PagedPartitions) Locate(key string) int {
	shard, _ := p.Lookup(key)
	return shard
}

// Lookup returns the shard that owns key's partition and true, or 0 and false when key's
// page is not loaded: a process that loads only some pages (LoadPages) looks keys up here,
// and on a miss loads page Partition(key) / PageSize() and looks again.
func (p *PagedPartitions) Lookup(key string) (shard int, ok bool) {
	t := p.table.Load()
	if t == nil {
		return 0, false
	}
	part := xxhPartition(key, t.partitions)
	page := t.pages[part>>t.shift]
	if off := part & (1<<t.shift - 1); off < len(page) { // a page not loaded has length 0
		return int(page[off]), true
	}
	return 0, false
}

// Partition returns the partition of key, in [0, NumPartitions()), or 0 for the zero
// PagedPartitions. It never changes for a given key and partition count.
func (p *PagedPartitions) Partition(key string) int {
	t := p.table.Load()
	if t == nil {
		return 0
	}
	return xxhPartition(key, t.partitions)
}

// NumPartitions returns the fixed number of partitions, or 0 for the zero PagedPartitions.
func (p *PagedPartitions) NumPartitions() int {
	if t := p.table.Load(); t != nil {
		return t.partitions
	}
	return 0
}

// PageSize returns the number of partitions per page (the last page may hold fewer), or 0
// for the zero PagedPartitions. Partition i is on page i / PageSize().
func (p *PagedPartitions) PageSize() int {
	if t := p.table.Load(); t != nil {
		return 1 << t.shift
	}
	return 0
}

// NumPages returns the number of pages, or 0 for the zero PagedPartitions.
func (p *PagedPartitions) NumPages() int {
	if t := p.table.Load(); t != nil {
		return len(t.pages)
	}
	return 0
}

// Shards returns the number of shards, or 0 while some page is not loaded (and for the zero
// PagedPartitions): a table without all its pages places only some keys, and is not yet a
// Sharder.
func (p *PagedPartitions) Shards() int {
	if t := p.table.Load(); t != nil && t.missing == 0 {
		return t.shards
	}
	return 0
}

// Versions returns the version of every page, 0 for a page that is not loaded: compare them
// with the central store's to see which pages to fetch.
func (p *PagedPartitions) Versions() []uint64 {
	if t := p.table.Load(); t != nil {
		return slices.Clone(t.versions)
	}
	return nil
}

// Table returns a copy of the whole partition table: element i is the shard that owns
// partition i. It returns nil unless every page is loaded.
func (p *PagedPartitions) Table() []int {
	t := p.table.Load()
	if t == nil || t.missing > 0 {
		return nil
	}
	out := make([]int, 0, t.partitions)
	for _, page := range t.pages {
		for _, s := range page {
			out = append(out, int(s))
		}
	}
	return out
}

// complete returns the current table, or an error unless every page is loaded.
func (p *PagedPartitions) complete(op string) (*pagedTable, error) {
	t := p.table.Load()
	switch {
	case t == nil:
		return nil, fmt.Errorf("shard: paged partitions: %s: no table: make one with NewPagedPartitions, or load one with UnmarshalText: %w", op, ErrPartitionTable)
	case t.missing > 0:
		return nil, fmt.Errorf("shard: paged partitions: %s: %d of %d pages are not loaded: %w", op, t.missing, len(t.pages), ErrPartitionTable)
	}
	return t, nil
}

// PlanResize returns the moves that Resize(n) would make, in increasing partition order,
// without making them: exactly what Partitions.PlanResize returns for the same table (the
// fewest moves that leave every shard floor(P/n) or ceil(P/n) partitions). n must be in
// [1, min(NumPartitions(), 65536)], and every page loaded.
func (p *PagedPartitions) PlanResize(n int) ([]PartitionMove, error) {
	t, err := p.complete("plan resize")
	if err != nil {
		return nil, err
	}
	if err := checkCount("paged partitions", n, min(t.partitions, maxPartitions)); err != nil {
		return nil, err
	}
	return t.planResize(n), nil
}

func (t *pagedTable) planResize(n int) []PartitionMove {
	flat := make([]uint16, 0, t.partitions)
	for _, page := range t.pages {
		flat = append(flat, page...)
	}
	return planResize(&partitionTable{shards: t.shards, owner: flat}, n)
}

// Resize sets the number of shards to n, making the moves of PlanResize(n); see ResizePages.
func (p *PagedPartitions) Resize(n int) error {
	_, err := p.ResizePages(n)
	return err
}

// ResizePages sets the number of shards to n, making exactly the moves that PlanResize(n)
// returns, and returns the pages that changed, in increasing order: the pages to save and
// ship (MarshalPages), since every other page is as it was, version and all. Growing from a
// balanced table moves from each shard its highest partitions, so the changed pages are few
// and contiguous. On error nothing changes.
func (p *PagedPartitions) ResizePages(n int) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.complete("resize")
	if err != nil {
		return nil, err
	}
	if err := checkCount("paged partitions", n, min(t.partitions, maxPartitions)); err != nil {
		return nil, err
	}
	next, changed, err := t.withMoves(t.planResize(n), n)
	if err != nil {
		return nil, err
	}
	p.table.Store(next)
	return changed, nil
}

// Move makes the moves, in order, all or none, and returns the pages that changed, in
// increasing order: the operator's tool to follow a migration by hand or to drain a shard
// before removing it, a batch at a time. Each move must name a partition in
// [0, NumPartitions()) (else the error wraps ErrPartition), a To in [0, Shards()) (ErrShard),
// and as From the partition's owner at that point (ErrStalePage): so a plan made earlier
// (PlanResize) is refused once the table has changed under it, and a move applied twice
// fails instead of doing something else. A move whose From equals To changes nothing.
func (p *PagedPartitions) Move(moves ...PartitionMove) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.complete("move")
	if err != nil {
		return nil, err
	}
	next, changed, err := t.withMoves(moves, t.shards)
	if err != nil {
		return nil, err
	}
	p.table.Store(next)
	return changed, nil
}

// withMoves returns a copy of t with the moves made in order and the shard count set, and
// the pages that changed, each with its version one higher; or the error of the first move
// that Move refuses.
func (t *pagedTable) withMoves(moves []PartitionMove, shards int) (*pagedTable, []int, error) {
	next := &pagedTable{partitions: t.partitions, shift: t.shift, shards: shards,
		pages: slices.Clone(t.pages), versions: slices.Clone(t.versions), missing: t.missing}
	copied := make(map[int]bool)
	var touched []int
	for k, m := range moves {
		if m.Partition < 0 || m.Partition >= t.partitions {
			return nil, nil, fmt.Errorf("shard: paged partitions: move %d: partition %d: allowed range is [0, %d): %w", k, m.Partition, t.partitions, ErrPartition)
		}
		if m.To < 0 || m.To >= shards {
			return nil, nil, fmt.Errorf("shard: paged partitions: move %d: partition %d to shard %d: allowed range is [0, %d): %w", k, m.Partition, m.To, shards, ErrShard)
		}
		i, j := m.Partition>>t.shift, m.Partition&(1<<t.shift-1)
		if cur := next.pages[i][j]; int(cur) != m.From {
			return nil, nil, fmt.Errorf("shard: paged partitions: move %d: partition %d is on shard %d, not on shard %d: %w", k, m.Partition, cur, m.From, ErrStalePage)
		}
		if !copied[i] {
			copied[i] = true
			next.pages[i] = slices.Clone(t.pages[i])
			touched = append(touched, i)
		}
		next.pages[i][j] = uint16(m.To)
	}
	slices.Sort(touched)
	changed := touched[:0]
	for _, i := range touched {
		if slices.Equal(next.pages[i], t.pages[i]) { // moved there and back
			next.pages[i] = t.pages[i]
			continue
		}
		if next.versions[i] == math.MaxUint64 {
			return nil, nil, fmt.Errorf("shard: paged partitions: page %d: version %d cannot go up: %w", i, next.versions[i], ErrPartitionTable)
		}
		next.versions[i]++
		changed = append(changed, i)
	}
	return next, changed, nil
}

// MarshalText saves the whole table as text (see MarshalPages); it fails unless every page
// is loaded.
func (p *PagedPartitions) MarshalText() ([]byte, error) {
	t, err := p.complete("save")
	if err != nil {
		return nil, err
	}
	all := make([]int, len(t.pages))
	for i := range all {
		all[i] = i
	}
	return p.MarshalPages(all...)
}

// MarshalPages saves the given pages, in increasing order whatever their order in pages, as
// text: a header line with the key rule, the partition count, the page size and the shard
// count, then for each page a line with its number and version followed by one line per run
// of consecutive partitions with the same owner, numbered from the page's first partition
// (as Partitions.MarshalText numbers a whole table), each line ending in '\n':
//
//	hash=xxh64 partitions=40 pagesize=16 shards=3
//	page=0 version=1
//	0-13 0
//	14-15 1
//	page=2 version=4
//	0-6 2
//	7 1
//
// Here partition 2*16+7 = 39 is on shard 1. With no pages it saves the header alone, which
// carries a new shard count (see LoadPages). It fails for a page out of range (ErrPartition)
// or not loaded (ErrPartitionTable).
func (p *PagedPartitions) MarshalPages(pages ...int) ([]byte, error) {
	t := p.table.Load()
	if t == nil {
		return nil, fmt.Errorf("shard: paged partitions: save: no table: %w", ErrPartitionTable)
	}
	pages = slices.Compact(slices.Sorted(slices.Values(pages)))
	for _, i := range pages {
		switch {
		case i < 0 || i >= len(t.pages):
			return nil, fmt.Errorf("shard: paged partitions: save page %d: allowed range is [0, %d): %w", i, len(t.pages), ErrPartition)
		case t.pages[i] == nil:
			return nil, fmt.Errorf("shard: paged partitions: save page %d: not loaded: %w", i, ErrPartitionTable)
		}
	}
	b := fmt.Appendf(nil, "hash=xxh64 partitions=%d pagesize=%d shards=%d\n", t.partitions, 1<<t.shift, t.shards)
	for _, i := range pages {
		b = fmt.Appendf(b, "page=%d version=%d\n", i, t.versions[i])
		b = appendRuns(b, t.pages[i])
	}
	return b, nil
}

// UnmarshalText loads a whole table saved by MarshalText, replacing the current one
// atomically: the text must hold every page. Into a PagedPartitions that has pages, the
// text must have the same partition count and page size (else the error wraps
// ErrPartitionCount), and no page may go back: each page's version must be at least the
// loaded one, and equal only with the same owners (else ErrStalePage). The shard count may
// differ. Other errors name the line and wrap ErrPartitionTable; on error nothing changes.
func (p *PagedPartitions) UnmarshalText(text []byte) error {
	pt, err := parsePagedText(text)
	if err != nil {
		return err
	}
	if len(pt.pages) < len(pt.table.pages) {
		return pt.missingPage()
	}
	return p.load(pt)
}

// LoadPages applies the pages of a text saved by MarshalPages, atomically: all of them or,
// on error, none. Into the zero PagedPartitions it loads just these pages (so a process
// holds only the pages it needs: see Lookup); into one that has pages, the text must have the
// same partition count and page size (ErrPartitionCount), and no page may go back (as for
// UnmarshalText, ErrStalePage); a page with the loaded version and owners is left alone, so
// loading a text again is harmless.
//
// The header's shard count replaces the loaded one. Every loaded page must then name only
// shards below it: a text that shrinks the table must carry every page that Resize changed
// (ResizePages lists them); else the error wraps ErrPartitionTable.
func (p *PagedPartitions) LoadPages(text []byte) error {
	pt, err := parsePagedText(text)
	if err != nil {
		return err
	}
	return p.load(pt)
}

// load publishes the current table with the pages of pt applied.
func (p *PagedPartitions) load(pt *pagedText) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.table.Load()
	in := pt.table
	if cur == nil {
		cur = newPagedTable(in.partitions, in.shift, in.shards)
	} else if cur.partitions != in.partitions || cur.shift != in.shift {
		return fmt.Errorf("shard: paged partitions: text has partitions=%d pagesize=%d, this table has partitions=%d pagesize=%d: %w",
			in.partitions, 1<<in.shift, cur.partitions, 1<<cur.shift, ErrPartitionCount)
	}
	next := &pagedTable{partitions: cur.partitions, shift: cur.shift, shards: in.shards,
		pages: slices.Clone(cur.pages), versions: slices.Clone(cur.versions), missing: cur.missing}
	given := make(map[int]bool, len(pt.pages))
	for k, i := range pt.pages {
		given[i] = true
		old, v := cur.versions[i], in.versions[i]
		switch {
		case v < old:
			return fmt.Errorf("shard: paged partitions: line %d: page %d: version %d is older than the loaded version %d: %w", pt.lines[k], i, v, old, ErrStalePage)
		case v == old && !slices.Equal(in.pages[i], cur.pages[i]):
			return fmt.Errorf("shard: paged partitions: line %d: page %d: version %d is loaded with other owners: a changed page needs a new version: %w", pt.lines[k], i, v, ErrStalePage)
		case v == old:
			continue // the same page: keep the loaded one
		}
		if cur.pages[i] == nil {
			next.missing--
		}
		next.pages[i], next.versions[i] = in.pages[i], v
	}
	if in.shards < cur.shards {
		for i, page := range next.pages {
			if given[i] {
				continue // checked by the parser
			}
			for j, s := range page {
				if int(s) >= in.shards {
					lo, _ := next.pageRange(i)
					return fmt.Errorf("shard: paged partitions: line 1: shards=%d, but loaded page %d, not in the text, has partition %d on shard %d: load it with the pages that changed: %w",
						in.shards, i, lo+j, s, ErrPartitionTable)
				}
			}
		}
	}
	p.table.Store(next)
	return nil
}

// pagedText is a parsed text: the header in a table with only the given pages, in order.
type pagedText struct {
	table *pagedTable
	pages []int // the pages given, increasing
	lines []int // the line of each page's "page=" line
}

// missingPage returns the error for a whole table that lacks a page.
func (pt *pagedText) missingPage() error {
	for k, i := range pt.pages {
		if i != k {
			return fmt.Errorf("shard: paged partitions: line %d: page %d follows page %d: page %d is missing: %w", pt.lines[k], i, k-1, k, ErrPartitionTable)
		}
	}
	return fmt.Errorf("shard: paged partitions: text ends after %d pages: pages %d-%d are missing: %w",
		len(pt.pages), len(pt.pages), len(pt.table.pages)-1, ErrPartitionTable)
}

// parsePagedText parses the format of MarshalPages. The final '\n' is optional; nothing else
// is tolerated: no blank lines, no extra spaces, no signs, no leading zeros, no '\r'.
func parsePagedText(text []byte) (*pagedText, error) {
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("shard: paged partitions: line %d: %s: %w", line, fmt.Sprintf(format, args...), ErrPartitionTable)
	}
	text, _ = bytes.CutSuffix(text, []byte("\n"))
	if bytes.HasSuffix(text, []byte("\n")) {
		return nil, bad(bytes.Count(text, []byte("\n"))+1, "blank line at the end")
	}
	header, body, _ := bytes.Cut(text, []byte("\n"))
	f := bytes.Split(header, []byte(" "))
	if len(f) != 4 {
		return nil, bad(1, "header %.60q: want \"hash=xxh64 partitions=P pagesize=S shards=N\"", header)
	}
	if string(f[0]) != "hash=xxh64" {
		return nil, bad(1, "%.40q: want hash=xxh64", f[0])
	}
	v, ok := bytes.CutPrefix(f[1], []byte("partitions="))
	np, okNum := parseUint(v, 64)
	if !ok || !okNum || np < 1 || np > maxPagedPartitions {
		return nil, bad(1, "%.40q: want partitions=P with P in [1, %d]", f[1], maxPagedPartitions)
	}
	v, ok = bytes.CutPrefix(f[2], []byte("pagesize="))
	size, okNum := parseUint(v, 64)
	if !ok || !okNum || size < 1 || size > maxPageSize || size&(size-1) != 0 {
		return nil, bad(1, "%.40q: want pagesize=S with S a power of two in [1, %d]", f[2], maxPageSize)
	}
	if pages := (np-1)/size + 1; pages > maxPages { // checked before the list of pages is made
		return nil, bad(1, "partitions=%d pagesize=%d make %d pages: at most %d", np, size, pages, maxPages)
	}
	v, ok = bytes.CutPrefix(f[3], []byte("shards="))
	shards, okNum := parseUint(v, 64)
	if maxShards := min(np, maxPartitions); !ok || !okNum || shards < 1 || shards > maxShards {
		return nil, bad(1, "%.40q: want shards=N with N in [1, %d]", f[3], maxShards)
	}
	t := newPagedTable(int(np), uint(bits.TrailingZeros64(size)), int(shards))
	pt := &pagedText{table: t}
	for line := 2; len(body) > 0; {
		var head, runs []byte
		head, body, _ = bytes.Cut(body, []byte("\n"))
		f := bytes.Split(head, []byte(" "))
		var i, version uint64
		ok := len(f) == 2
		if ok {
			v, ok1 := bytes.CutPrefix(f[0], []byte("page="))
			w, ok2 := bytes.CutPrefix(f[1], []byte("version="))
			var ok3, ok4 bool
			i, ok3 = parseUint(v, 64)
			version, ok4 = parseUint(w, 64)
			ok = ok1 && ok2 && ok3 && ok4
		}
		switch {
		case !ok:
			return nil, bad(line, "%.40q: want \"page=I version=V\"", head)
		case i >= uint64(len(t.pages)):
			return nil, bad(line, "page %d: the table has pages 0-%d", i, len(t.pages)-1)
		case len(pt.pages) > 0 && int(i) <= pt.pages[len(pt.pages)-1]:
			return nil, bad(line, "page %d after page %d: pages must be in increasing order, each once", i, pt.pages[len(pt.pages)-1])
		case version == 0:
			return nil, bad(line, "page %d: version 0: versions start at 1", i)
		}
		// The page's runs are the lines up to the next "page=" line.
		if !bytes.HasPrefix(body, []byte("page=")) {
			if end := bytes.Index(body, []byte("\npage=")); end >= 0 {
				runs, body = body[:end], body[end+1:]
			} else {
				runs, body = body, nil
			}
		}
		lo, hi := t.pageRange(int(i))
		owner := make([]uint16, hi-lo)
		next, err := parseRuns(runs, owner, t.shards, line+1, bad)
		if err != nil {
			return nil, err
		}
		if next < len(owner) {
			return nil, bad(line, "page %d ends early: its partitions %d-%d have no owner", i, next, len(owner)-1)
		}
		t.pages[i], t.versions[i] = owner, version
		pt.pages = append(pt.pages, int(i))
		pt.lines = append(pt.lines, line)
		line++
		if len(runs) > 0 {
			line += bytes.Count(runs, []byte("\n")) + 1
		}
	}
	return pt, nil
}
