package shard

import (
	"fmt"
	"iter"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/segmap"
)

// ErrDirectory reports a directory entry that cannot be used: an owner longer than
// MaxOwnerLen, a key given where its owner is meant, an owner given twice, or a saved
// directory that is malformed. It is the same value as pool.ErrDirectory.
var ErrDirectory = segmap.ErrDirectory

// MaxOwnerLen is the longest owner a Directory pins, in bytes.
const MaxOwnerLen = segmap.MaxOwnerLen

// Directory is a Sharder that looks a key's owner up in an explicit owner -> shard table
// first and falls back to another Sharder's rule for every owner it does not list: document
// 001's lookup table (old ID -> new location), for when IDs cannot change (they appear in
// public URLs, say) but single owners must be moved or pinned without changing the rule for
// everyone. A hot owner gets a shard of its own; a shard is drained one owner at a time.
//
// A key's owner is the key itself, or what the owner function given to NewDirectory returns
// for it (PrefixOwner routes "1-A1" as "1"; HashTag routes by Redis hash tag); the fallback
// places the owner, not the key, so everything an owner owns shares its shard, pinned or not.
//
// Locate takes no lock and never allocates, for pinned and unpinned keys alike: it reads one
// published table, an immutable map split into segments. Pin, Unpin, Load and UnmarshalText
// each publish a new table atomically, copying only the segment they change and the list of
// segments (at a million entries, about a thousand of each), so a lookup sees the directory
// before or after a change, never a mix. Changes and Resize are serialized with each other.
// Resize the fallback only through the Directory, which refuses a size that would strand a
// pinned owner on a removed shard.
//
// The zero Directory has no fallback: it has no shards, Locate returns 0, and every change
// returns an error. Make one with NewDirectory.
type Directory struct {
	s     Sharder
	owner func(key string) string
	mu    sync.Mutex // serializes Pin, Unpin, Load, UnmarshalText and Resize
	pins  atomic.Pointer[segmap.Map[int32]]
}

// NewDirectory returns a Directory with no entries that falls back to s. owner returns the
// owner of a key; nil means the key itself. owner must be deterministic, safe for concurrent
// use and should not allocate (PrefixOwner and HashTag do not): every Locate calls it. It
// panics if s is nil.
func NewDirectory(s Sharder, owner func(key string) string) *Directory {
	if s == nil {
		panic("shard: NewDirectory: nil Sharder")
	}
	d := &Directory{s: s, owner: owner}
	d.pins.Store(segmap.New[int32]())
	return d
}

// Clone returns a Directory over s with d's owner function and entries: the entries are
// shared, copy-on-write, so Clone costs O(segments), not O(entries), and later changes of
// either Directory do not show in the other. It fails with an error wrapping ErrShard,
// naming an owner, if s has too few shards for an entry.
//
// A Clone over a second instance of the rule is how a migration sees a change of the
// directory before it is made: pin or unpin owners in the clone, move the data of exactly
// those owners from d's placement to the clone's (the rebalance package's before and after),
// then make the same change in d, or route with the clone from then on.
func (d *Directory) Clone(s Sharder) (*Directory, error) {
	if s == nil {
		return nil, fmt.Errorf("shard: directory: clone: nil Sharder: %w", ErrDirectory)
	}
	pins := d.pins.Load()
	if err := stranded("clone", pins, s.Shards()); err != nil {
		return nil, err
	}
	c := &Directory{s: s, owner: d.owner}
	if pins == nil {
		pins = segmap.New[int32]()
	}
	c.pins.Store(pins)
	return c, nil
}

// ownerOf returns the owner of key.
func (d *Directory) ownerOf(key string) string {
	if d.owner == nil {
		return key
	}
	return d.owner(key)
}

// Locate returns the shard of key's owner: its entry if it has one, else where the fallback
// places the owner. It is in [0, Shards()), or 0 for the zero Directory.
func (d *Directory) Locate(key string) int {
	if d.s == nil {
		return 0
	}
	owner := d.ownerOf(key)
	if shard, ok := d.pins.Load().Get(owner); ok {
		return int(shard)
	}
	return d.s.Locate(owner)
}

// Fallback returns the Sharder d falls back to for owners without an entry (nil for the zero
// Directory): the rule, which places owners, where Locate places keys through their owner.
func (d *Directory) Fallback() Sharder { return d.s }

// Shards returns the fallback's number of shards, or 0 for the zero Directory.
func (d *Directory) Shards() int {
	if d.s == nil {
		return 0
	}
	return d.s.Shards()
}

// Resize resizes the fallback to n shards. It refuses, with an error wrapping ErrShard that
// names the least owner concerned and how many there are, when an owner is pinned to a
// shard that n would remove: unpin or repin those first (after moving their data). On error
// nothing changes.
func (d *Directory) Resize(n int) error {
	if d.s == nil {
		return fmt.Errorf("shard: directory: resize: zero Directory has no fallback: make one with NewDirectory: %w", ErrShardCount)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n >= 1 { // else the fallback's own error says what counts it accepts
		if err := stranded("resize", d.pins.Load(), n); err != nil {
			return err
		}
	}
	return d.s.Resize(n)
}

// stranded returns an error if an entry of pins names a shard not below n.
func stranded(op string, pins *segmap.Map[int32], n int) error {
	count, owner := pins.Matching(func(s int32) bool { return int(s) >= n })
	if count == 0 {
		return nil
	}
	shard, _ := pins.Get(owner)
	return fmt.Errorf("shard: directory: %s to %d shards: owner %.64q is pinned to shard %d (owners pinned to shards >= %d: %d): unpin or repin them first: %w",
		op, n, owner, shard, n, count, ErrShard)
}

// Pin sets owner's entry to shard, in [0, Shards()): from now on every key of owner is
// placed there, whatever the fallback says. owner must be an owner as the owner function
// returns it (with PrefixOwner, "1", not "1-A1"), at most MaxOwnerLen bytes, else the error
// wraps ErrDirectory; a shard out of range is an error wrapping ErrShard. Pin changes only the
// placement: moving owner's data first is the caller's (or the rebalance package's) job. On
// error nothing changes.
func (d *Directory) Pin(owner string, shard int) error {
	if d.s == nil {
		return errZeroDirectory("pin")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkEntry(owner, shard); err != nil {
		return fmt.Errorf("shard: directory: pin %w", err)
	}
	d.pins.Store(d.pins.Load().Set(owner, int32(shard)))
	return nil
}

func errZeroDirectory(op string) error {
	return fmt.Errorf("shard: directory: %s: zero Directory: make one with NewDirectory: %w", op, ErrDirectory)
}

// checkEntry returns an error if owner cannot be pinned to shard. Its message lacks the
// package prefix, which the caller adds with what it was doing.
func (d *Directory) checkEntry(owner string, shard int) error {
	if err := segmap.CheckOwner(owner, d.owner); err != nil {
		return err
	}
	if shard < 0 || shard >= d.s.Shards() || shard > math.MaxInt32 {
		return fmt.Errorf("owner %.64q to shard %d: allowed range is [0, %d): %w", owner, shard, d.s.Shards(), ErrShard)
	}
	return nil
}

// Unpin removes owner's entry, so that the fallback places owner again, and reports whether
// there was one.
func (d *Directory) Unpin(owner string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	next, ok := d.pins.Load().Delete(owner)
	if ok {
		d.pins.Store(next)
	}
	return ok
}

// Pinned returns owner's entry and whether it has one. Like Locate, it takes no lock and
// never allocates.
func (d *Directory) Pinned(owner string) (shard int, ok bool) {
	s, ok := d.pins.Load().Get(owner)
	return int(s), ok
}

// Len returns the number of entries.
func (d *Directory) Len() int { return d.pins.Load().Len() }

// Entries yields every entry, in increasing byte order of the owners, as the directory was
// when Entries was called: the rows to store in a database table (see Load).
func (d *Directory) Entries() iter.Seq2[string, int] {
	pins := d.pins.Load()
	return func(yield func(string, int) bool) {
		for owner, shard := range pins.Sorted() {
			if !yield(owner, int(shard)) {
				return
			}
		}
	}
}

// Load replaces every entry with entries, in any order, atomically: the way to read the
// directory back from a database table (SELECT owner, shard FROM directory). Each entry is
// checked as Pin checks it, and an owner given twice is an error wrapping ErrDirectory; the
// error names the entry. On error nothing changes.
func (d *Directory) Load(entries iter.Seq2[string, int]) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.s == nil {
		return errZeroDirectory("load")
	}
	pins, err := segmap.BuildChecked(entries, func(owner string, shard int) (int32, error) {
		return int32(shard), d.checkEntry(owner, shard)
	})
	if err != nil {
		return fmt.Errorf("shard: directory: load: %w", err)
	}
	d.pins.Store(pins)
	return nil
}

// MarshalText saves the entries as text: a header line and one line per entry in increasing
// byte order of the owners, the owner as a Go string literal and the shard in decimal:
//
//	directory entries=2
//	"1" 4
//	"user:42" 0
//
// It never fails.
func (d *Directory) MarshalText() ([]byte, error) {
	return segmap.AppendText(nil, d.pins.Load(), func(b []byte, s int32) []byte {
		return strconv.AppendInt(b, int64(s), 10)
	}), nil
}

// UnmarshalText replaces every entry with those of a text saved by MarshalText, atomically.
// Lines must be in increasing order of the owners, each once, and the header's count must
// match; shards are written without sign or leading zeros and must be below Shards(). Errors
// name the line and wrap ErrDirectory; on error nothing changes.
func (d *Directory) UnmarshalText(text []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.s == nil {
		return errZeroDirectory("text")
	}
	pins, err := segmap.ParseText(text, func(owner string, field []byte) (int32, error) {
		shard, ok := parseUint(field, 31)
		if !ok {
			return 0, fmt.Errorf("owner %.64q: shard %.20q: want a shard number in decimal", owner, field)
		}
		return int32(shard), d.checkEntry(owner, int(shard))
	})
	if err != nil {
		return fmt.Errorf("shard: directory: text %v: %w", err, ErrDirectory)
	}
	d.pins.Store(pins)
	return nil
}

// parseUint parses a decimal number of at most bits bits written as MarshalText writes it:
// ASCII digits only, no sign, no leading zeros (one spelling per number).
func parseUint(b []byte, bits int) (uint64, bool) {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b), 10, bits) // takes no sign, and '_' only in base 0
	return v, err == nil
}
