// Package segmap is an immutable hash map from strings to values, split into segments so
// that a change copies one segment and the list of segments, never the whole map. It backs
// the owner directories of package shard and package pool: their lookups read a published
// *Map without a lock, and every pin publishes a new *Map that shares each untouched segment
// with the old one. A change costs O(len(segments) + entries per segment), about 2·sqrt(n)
// at the segment sizes chosen here, instead of O(n) for a copied map.
//
// A segment keeps its keys in one byte slice and its hashes and values in flat slices, with
// an open-addressing index of 32-bit entry numbers: for a V without pointers, a segment holds
// a handful of pointers however many entries it has, so a million entries cost the garbage
// collector nothing to scan, and no allocation per key.
//
// A *Map is never modified after it is returned: every method is safe for concurrent use,
// and Get never allocates.
package segmap

import (
	"bytes"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"slices"

	"github.com/shardkit/shard/internal/keyhash"
)

// targetLen is the average number of entries per segment that Build aims at; Set doubles the
// segments when the average passes twice that. Near a million entries it balances the two
// costs of a change, copying the segment list (8 bytes per segment) and one segment (about
// 30 bytes per entry plus the keys).
const targetLen = 1024

// Map is an immutable map from strings to V. The nil *Map is an empty map.
type Map[V comparable] struct {
	segs  []*segment[V] // len is a power of two
	shift uint          // 64 - log2(len(segs)): a key's segment is its hash's top bits
	n     int
}

// segment holds some entries of a Map. It is never modified once it is part of a Map.
type segment[V comparable] struct {
	index  []uint32 // open addressing on the hash's low bits: entry number + 1, 0 if free
	hashes []uint64 // hashes[i] is XXH64 of key i
	ends   []uint32 // key i is keys[ends[i-1]:ends[i]], key 0 is keys[:ends[0]]
	keys   []byte
	vals   []V
}

// DuplicateError reports a key given twice to Build.
type DuplicateError struct{ Key string }

func (e *DuplicateError) Error() string { return fmt.Sprintf("%.64q given twice", e.Key) }

// New returns an empty map.
func New[V comparable]() *Map[V] {
	return &Map[V]{segs: []*segment[V]{emptySegment[V]()}, shift: 64}
}

func emptySegment[V comparable]() *segment[V] {
	return &segment[V]{index: make([]uint32, 1)}
}

// Len returns the number of entries.
func (m *Map[V]) Len() int {
	if m == nil {
		return 0
	}
	return m.n
}

// Get returns the value of key and whether key is in the map. It never allocates.
func (m *Map[V]) Get(key string) (V, bool) {
	if m == nil || m.n == 0 {
		var zero V
		return zero, false
	}
	h := keyhash.XXH64(key)
	s := m.segs[h>>m.shift] // a shift of 64 gives 0
	if e, ok := s.find(h, key); ok {
		return s.vals[e], true
	}
	var zero V
	return zero, false
}

// find returns the entry number of key, whose hash is h.
func (s *segment[V]) find(h uint64, key string) (int, bool) {
	mask := uint64(len(s.index) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := s.index[i]
		if e == 0 {
			return 0, false
		}
		if e--; s.hashes[e] == h && string(s.key(int(e))) == key {
			return int(e), true
		}
	}
}

func (s *segment[V]) key(e int) []byte {
	start := uint32(0)
	if e > 0 {
		start = s.ends[e-1]
	}
	return s.keys[start:s.ends[e]]
}

// Set returns a map in which key has the value v, sharing every other segment with m. It
// returns m itself when key already has the value v.
func (m *Map[V]) Set(key string, v V) *Map[V] {
	if m == nil {
		m = New[V]()
	}
	h := keyhash.XXH64(key)
	i := h >> m.shift
	old := m.segs[i]
	e, found := old.find(h, key)
	if found && old.vals[e] == v {
		return m
	}
	if !found && segmentsFor(m.n+1) > 2*len(m.segs) {
		return m.regroup(key, v)
	}
	var s *segment[V]
	if found {
		// Only the value changes: the keys, hashes and index are shared.
		s = &segment[V]{index: old.index, hashes: old.hashes, ends: old.ends, keys: old.keys, vals: slices.Clone(old.vals)}
		s.vals[e] = v
	} else {
		s = old.with(h, key, v)
	}
	next := &Map[V]{segs: slices.Clone(m.segs), shift: m.shift, n: m.n}
	next.segs[i] = s
	if !found {
		next.n++
	}
	return next
}

// with returns a copy of s with a new entry appended.
func (s *segment[V]) with(h uint64, key string, v V) *segment[V] {
	c := len(s.hashes) + 1
	end := uint64(len(s.keys)) + uint64(len(key))
	if end > math.MaxUint32 {
		// Owners are at most 64 KiB, so this takes 65536 of them in one segment, which a
		// hash that spreads keys does not produce before memory runs out.
		panic("segmap: a segment's keys exceed 4 GiB")
	}
	next := &segment[V]{
		hashes: append(make([]uint64, 0, c), s.hashes...),
		ends:   append(make([]uint32, 0, c), s.ends...),
		keys:   append(make([]byte, 0, end), s.keys...),
		vals:   append(make([]V, 0, c), s.vals...),
	}
	next.hashes = append(next.hashes, h)
	next.ends = append(next.ends, uint32(end))
	next.keys = append(next.keys, key...)
	next.vals = append(next.vals, v)
	if indexSize(c) == len(s.index) {
		next.index = slices.Clone(s.index)
		next.insert(h, c-1)
	} else {
		next.reindex()
	}
	return next
}

// indexSize returns the index length for c entries: the smallest power of two that keeps
// the index at most 3/4 full, so that a probe always ends at a free slot.
func indexSize(c int) int {
	size := 1
	for c > size/4*3 {
		size *= 2
	}
	return size
}

func (s *segment[V]) insert(h uint64, e int) {
	mask := uint64(len(s.index) - 1)
	i := h & mask
	for s.index[i] != 0 {
		i = (i + 1) & mask
	}
	s.index[i] = uint32(e + 1)
}

// reindex builds the index of s's entries.
func (s *segment[V]) reindex() {
	s.index = make([]uint32, indexSize(len(s.hashes)))
	for e, h := range s.hashes {
		s.insert(h, e)
	}
}

// Delete returns a map without key, sharing every other segment with m, and whether key was
// there. It returns m itself when key was not.
func (m *Map[V]) Delete(key string) (*Map[V], bool) {
	if m.Len() == 0 {
		return m, false
	}
	h := keyhash.XXH64(key)
	i := h >> m.shift
	old := m.segs[i]
	e, found := old.find(h, key)
	if !found {
		return m, false
	}
	start, end := uint32(0), old.ends[e]
	if e > 0 {
		start = old.ends[e-1]
	}
	s := &segment[V]{
		hashes: slices.Delete(slices.Clone(old.hashes), e, e+1),
		ends:   slices.Delete(slices.Clone(old.ends), e, e+1),
		keys:   slices.Delete(slices.Clone(old.keys), int(start), int(end)),
		vals:   slices.Delete(slices.Clone(old.vals), e, e+1),
	}
	for j := e; j < len(s.ends); j++ {
		s.ends[j] -= end - start
	}
	s.reindex()
	next := &Map[V]{segs: slices.Clone(m.segs), shift: m.shift, n: m.n - 1}
	next.segs[i] = s
	return next, true
}

// segmentsFor returns the number of segments Build gives n entries: the smallest power of two
// that keeps the average at most targetLen.
func segmentsFor(n int) int {
	return 1 << bits.Len(uint((n-1)/targetLen))
}

// regroup returns m with key set to v, rebuilt with as many segments as Build would give it:
// the step that keeps segments short as a map grows one Set at a time. It copies every entry,
// once each time the entry count doubles.
func (m *Map[V]) regroup(key string, v V) *Map[V] {
	all := func(yield func(string, V) bool) {
		for k, val := range m.All() {
			if !yield(k, val) {
				return
			}
		}
		yield(key, v)
	}
	next, err := Build(all)
	if err != nil {
		panic("segmap: regroup: " + err.Error()) // key was checked absent
	}
	return next
}

// Build returns a map of the entries, or a *DuplicateError naming a key given twice.
func Build[V comparable](entries iter.Seq2[string, V]) (*Map[V], error) {
	type entry struct {
		h   uint64
		key string
		v   V
	}
	// Collect in chunks, which never copies what was collected, then place the entries in
	// segment order with a counting sort: O(n), and twice the entries' size at most.
	const chunkLen = 1 << 12
	var chunks [][]entry
	n := 0
	for k, v := range entries {
		if n%chunkLen == 0 {
			chunks = append(chunks, make([]entry, 0, chunkLen))
		}
		c := &chunks[len(chunks)-1]
		*c = append(*c, entry{keyhash.XXH64(k), k, v})
		n++
	}
	nseg := segmentsFor(n)
	m := &Map[V]{segs: make([]*segment[V], nseg), shift: uint(64 - bits.TrailingZeros(uint(nseg))), n: n}
	starts := make([]int, nseg+1)
	for _, c := range chunks {
		for _, e := range c {
			starts[e.h>>m.shift+1]++
		}
	}
	for i := range nseg {
		starts[i+1] += starts[i]
	}
	all := make([]entry, n)
	next := slices.Clone(starts[:nseg])
	for ci, c := range chunks {
		for _, e := range c {
			all[next[e.h>>m.shift]] = e
			next[e.h>>m.shift]++
		}
		chunks[ci] = nil // let the collector take it
	}
	for i := range m.segs {
		group := all[starts[i]:starts[i+1]]
		size := 0
		for _, e := range group {
			size += len(e.key)
		}
		if uint64(size) > math.MaxUint32 {
			panic("segmap: a segment's keys exceed 4 GiB")
		}
		s := &segment[V]{
			hashes: make([]uint64, 0, len(group)),
			ends:   make([]uint32, 0, len(group)),
			keys:   make([]byte, 0, size),
			vals:   make([]V, 0, len(group)),
		}
		for _, e := range group {
			s.hashes = append(s.hashes, e.h)
			s.keys = append(s.keys, e.key...)
			s.ends = append(s.ends, uint32(len(s.keys)))
			s.vals = append(s.vals, e.v)
		}
		s.index = make([]uint32, indexSize(len(group)))
		for e, h := range s.hashes {
			if _, dup := s.find(h, group[e].key); dup {
				return nil, &DuplicateError{Key: group[e].key}
			}
			s.insert(h, e)
		}
		m.segs[i] = s
	}
	return m, nil
}

// All yields every entry, in no particular order but the same for equal maps. Each key is a
// new string.
func (m *Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m == nil {
			return
		}
		for _, s := range m.segs {
			for e := range s.hashes {
				if !yield(string(s.key(e)), s.vals[e]) {
					return
				}
			}
		}
	}
}

// Sorted yields every entry in increasing byte order of the keys. It sorts 8 bytes per
// entry first; each key is a new string.
func (m *Map[V]) Sorted() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m.Len() == 0 {
			return
		}
		refs := make([]uint64, 0, m.n) // segment << 32 | entry
		for si, s := range m.segs {
			for e := range s.hashes {
				refs = append(refs, uint64(si)<<32|uint64(e))
			}
		}
		slices.SortFunc(refs, func(a, b uint64) int { return bytes.Compare(m.keyOf(a), m.keyOf(b)) })
		for _, r := range refs {
			if !yield(string(m.keyOf(r)), m.segs[r>>32].vals[uint32(r)]) {
				return
			}
		}
	}
}

func (m *Map[V]) keyOf(ref uint64) []byte { return m.segs[ref>>32].key(int(uint32(ref))) }

// Matching returns how many entries have a value for which match is true, and the least
// key among them ("" when there is none). It allocates only the key it returns.
func (m *Map[V]) Matching(match func(V) bool) (count int, least string) {
	var min []byte
	if m == nil {
		return 0, ""
	}
	for _, s := range m.segs {
		for e, v := range s.vals {
			if !match(v) {
				continue
			}
			if k := s.key(e); count == 0 || bytes.Compare(k, min) < 0 {
				min = k
			}
			count++
		}
	}
	return count, string(min)
}

// Segments returns the number of segments, for tests and measurements.
func (m *Map[V]) Segments() int {
	if m == nil {
		return 0
	}
	return len(m.segs)
}
