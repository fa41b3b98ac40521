package shard

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
)

// This file holds the ID-features article's [001] co-location tools: IDs that land in a chosen
// partition (IDAllocator), IDs that carry their owner's ID as a prefix (PrefixID,
// ParsePrefixID), and Sharders that route a key by that prefix or by a Redis hash tag
// (ByPrefix, ByHashTag), so that a user's row, articles and comments always share a shard.

// MaxID is the largest ID an IDAllocator issues: 2^63-1, so that every ID fits a signed
// 64-bit column (SQL BIGINT, Java long) as well as a uint64.
const MaxID = math.MaxInt64

// ErrIDPartition reports an IDAllocator partition that does not exist (k outside [0, n)), or
// a last issued ID that does not belong to the partition it is resumed in.
var ErrIDPartition = errors.New("ID not in partition")

// ErrIDSpace reports that an IDAllocator has issued the last ID of its partition that is at
// most MaxID. It never wraps around.
var ErrIDSpace = errors.New("ID space exhausted")

// ErrPrefixID reports a string that is not a well-formed prefix ID.
var ErrPrefixID = errors.New("malformed prefix ID")

// IDAllocator issues the IDs of partition k of n: k, k+n, k+2n, ... for k > 0, and n, 2n, 3n,
// ... for partition 0, so every ID it issues is in [1, MaxID] and satisfies id % n == k. It is
// SQL Server's IDENTITY(k, n) per partition as the ID-features article [001] sets it up
// (partition 0 is IDENTITY(n, n), since 0 is not a valid ID), so Modulo.LocateID(id) finds the
// partition again for as long as the shard count stays n.
//
// Unlike a database sequence, which skips the values of rolled-back inserts, it never skips
// one: the IDs issued are exactly the first ones of the sequence, in order, however many
// goroutines call Next. It keeps no state outside the process: to continue after a restart,
// pass the last issued ID to ResumeIDAllocator.
//
// Create one with NewIDAllocator or ResumeIDAllocator; the zero value issues no ID. Next and
// Last are safe for concurrent use; they take no lock.
type IDAllocator struct {
	last  atomic.Uint64 // the last ID issued; 0 before the first
	first uint64        // the first ID of the partition: k, or n for k == 0
	step  uint64        // n
}

// NewIDAllocator returns an allocator for partition k of n, k in [0, n), n >= 1, that has
// issued no ID yet. NewIDAllocator(0, 1) issues 1, 2, 3, ...
func NewIDAllocator(k, n int) (*IDAllocator, error) {
	return ResumeIDAllocator(k, n, 0)
}

// ResumeIDAllocator returns an allocator for partition k of n whose next ID follows last,
// the last ID issued before (for example SELECT MAX(id) of the partition's table). A last of
// 0 means none was issued yet. Any other last must be an ID of partition k: in [1, MaxID]
// with last % n == k, else the error wraps ErrIDPartition.
func ResumeIDAllocator(k, n int, last uint64) (*IDAllocator, error) {
	if err := checkCount("id allocator", n, math.MaxInt); err != nil {
		return nil, err
	}
	if k < 0 || k >= n {
		return nil, fmt.Errorf("shard: id allocator: partition %d of %d: allowed range is [0, %d]: %w", k, n, n-1, ErrIDPartition)
	}
	step := uint64(n)
	if last != 0 && (last > MaxID || last%step != uint64(k)) {
		return nil, fmt.Errorf("shard: id allocator: last ID %d is not an ID of partition %d of %d (want ID %% %d == %d, ID <= %d): %w",
			last, k, n, n, k, uint64(MaxID), ErrIDPartition)
	}
	a := &IDAllocator{first: uint64(k), step: step}
	if k == 0 {
		a.first = step
	}
	a.last.Store(last)
	return a, nil
}

// Next returns the next ID of the partition, in [1, MaxID]. Once the partition's last ID
// of at most MaxID has been issued, Next returns an error wrapping ErrIDSpace, and keeps
// returning it.
func (a *IDAllocator) Next() (uint64, error) {
	if a.step == 0 {
		return 0, fmt.Errorf("shard: id allocator: not made by NewIDAllocator or ResumeIDAllocator: %w", ErrIDPartition)
	}
	for {
		last := a.last.Load()
		next := a.first
		if last != 0 {
			if last > MaxID-a.step {
				return 0, fmt.Errorf("shard: id allocator: partition %d of %d: no ID after %d up to %d: %w",
					a.first%a.step, a.step, last, uint64(MaxID), ErrIDSpace) // first%step is k
			}
			next = last + a.step
		}
		// A failed CAS means another goroutine took next; try again with its ID.
		if a.last.CompareAndSwap(last, next) {
			return next, nil
		}
	}
}

// Last returns the last ID issued, or 0 if none was.
func (a *IDAllocator) Last() uint64 {
	return a.last.Load()
}

// PrefixID returns owner + "-" + local, the ID of a record local that belongs to owner, so
// that ByPrefix places both on one shard.
//
// A prefix ID is two or more non-empty segments joined by '-'; its first segment is its owner,
// the root record whose ID decides the shard. Segments may hold any bytes except '-'. The
// articles of user "1" are "1-A1", "1-A2", ... (the ID-features article [001]). owner may
// itself be a prefix ID, and the result keeps its root: a comment on article "1-A1" is
// PrefixID("1-A1", "C1") = "1-A1-C1", whose owner is still user "1". The ID-features article
// [001] routes a comment by its article and the article by its user; co-location is
// transitive, so routing every record by its root keeps a user's row, articles and comments on
// one shard through every resize, where routing a comment by its article's whole ID would
// scatter them. The article stays visible in the comment's ID: the comments of "1-A1" are the
// IDs that begin with "1-A1-". The ID-features article's [001] flat form "1-C1" is a
// well-formed prefix ID too.
//
// An empty owner or local part, or one that begins or ends with '-' or holds "--", is an
// error wrapping ErrPrefixID.
func PrefixID(owner, local string) (string, error) {
	if err := checkSegments("owner", owner); err != nil {
		return "", fmt.Errorf("shard: PrefixID(%.64q, %.64q): %v: %w", owner, local, err, ErrPrefixID)
	}
	if err := checkSegments("local part", local); err != nil {
		return "", fmt.Errorf("shard: PrefixID(%.64q, %.64q): %v: %w", owner, local, err, ErrPrefixID)
	}
	return owner + "-" + local, nil
}

// ParsePrefixID splits a prefix ID at its first '-' into its owner, which contains no '-',
// and its local part, which may (the local part of "1-A1-C1" is "A1-C1"). It is the inverse
// of PrefixID for root owners. A string without '-', or with an empty segment, is an error
// wrapping ErrPrefixID. It never allocates unless it fails.
func ParsePrefixID(id string) (owner, local string, err error) {
	i := strings.IndexByte(id, '-')
	if i < 0 {
		return "", "", fmt.Errorf("shard: prefix ID %.64q: no '-' between owner and local part: %w", id, ErrPrefixID)
	}
	if i == 0 {
		return "", "", fmt.Errorf("shard: prefix ID %.64q: empty owner before the first '-': %w", id, ErrPrefixID)
	}
	if err := checkSegments("local part", id[i+1:]); err != nil {
		return "", "", fmt.Errorf("shard: prefix ID %.64q: %v: %w", id, err, ErrPrefixID)
	}
	return id[:i], id[i+1:], nil
}

// checkSegments reports whether s is one or more non-empty segments joined by '-'.
func checkSegments(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return fmt.Errorf("%s %.64q has an empty segment ('-' at an end, or \"--\")", what, s)
	}
	return nil
}

// PrefixOwner returns the part of key that ByPrefix routes by: the bytes before the first
// '-', when there is at least one, or else the whole key. So "1", "1-A1" and "1-A1-C1" all
// route as "1", while "plain" and "-x" (no owner) route whole, as Redis routes a key without
// a hash tag. Keys that ParsePrefixID rejects still route by this rule. It never allocates.
func PrefixOwner(key string) string {
	if i := strings.IndexByte(key, '-'); i > 0 {
		return key[:i]
	}
	return key
}

// Prefixed is a Sharder that places every key where the wrapped Sharder places the key's
// owner (see PrefixOwner), so a record and everything whose prefix ID it owns share a shard,
// through every Resize: the wrapped strategy moves them together, as it moves the owner.
//
// Create one with ByPrefix. The zero Prefixed wraps nothing: Shards and Locate return 0 and
// Resize fails. Its methods are as safe for concurrent use as the wrapped Sharder's; Locate
// adds no lock and no allocation.
type Prefixed struct {
	s Sharder
}

// ByPrefix returns a Sharder that routes keys by their prefix-ID owner through s. It panics
// if s is nil.
func ByPrefix(s Sharder) *Prefixed {
	if s == nil {
		panic("shard: ByPrefix: nil Sharder")
	}
	return &Prefixed{s: s}
}

// Locate returns s.Locate(PrefixOwner(key)), in [0, Shards()).
func (p *Prefixed) Locate(key string) int {
	if p.s == nil { // the zero Prefixed
		return 0
	}
	return p.s.Locate(PrefixOwner(key))
}

// Resize resizes the wrapped Sharder to n shards.
func (p *Prefixed) Resize(n int) error {
	if p.s == nil {
		return fmt.Errorf("shard: zero Prefixed: make one with ByPrefix: %w", ErrShardCount)
	}
	return p.s.Resize(n)
}

// Shards returns the wrapped Sharder's number of shards.
func (p *Prefixed) Shards() int {
	if p.s == nil {
		return 0
	}
	return p.s.Shards()
}

// Tagged is a Sharder that places every key where the wrapped Sharder places the key's Redis
// hash tag (see HashTag), so "{user1000}.following" and "{user1000}.followers" share a shard,
// through every Resize. A key without a tag routes whole, as in Redis Cluster.
//
// Create one with ByHashTag. The zero Tagged wraps nothing: Shards and Locate return 0 and
// Resize fails. Its methods are as safe for concurrent use as the wrapped Sharder's; Locate
// adds no lock and no allocation.
type Tagged struct {
	s Sharder
}

// ByHashTag returns a Sharder that routes keys by their Redis hash tag through s. It panics
// if s is nil.
func ByHashTag(s Sharder) *Tagged {
	if s == nil {
		panic("shard: ByHashTag: nil Sharder")
	}
	return &Tagged{s: s}
}

// Locate returns s.Locate(HashTag(key)), in [0, Shards()).
func (t *Tagged) Locate(key string) int {
	if t.s == nil { // the zero Tagged
		return 0
	}
	return t.s.Locate(HashTag(key))
}

// Resize resizes the wrapped Sharder to n shards.
func (t *Tagged) Resize(n int) error {
	if t.s == nil {
		return fmt.Errorf("shard: zero Tagged: make one with ByHashTag: %w", ErrShardCount)
	}
	return t.s.Resize(n)
}

// Shards returns the wrapped Sharder's number of shards.
func (t *Tagged) Shards() int {
	if t.s == nil {
		return 0
	}
	return t.s.Shards()
}
