package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
)

// Partitions places keys in two steps, the sharding lecture's [003] "constant number of
// sections": a key maps to one of a fixed number P of partitions by a rule that never changes,
// and a small table maps each partition to a shard. A resize or an operator moves whole
// partitions by editing the table; no key ever changes partition, so the table is all that
// must be shared (see MarshalText) and all that must be migrated.
//
// P bounds the number of shards: with too few partitions a new shard gets none, and more
// partitions allow finer balance. Redis Cluster is this scheme with P = 16384 slots (see
// NewRedisCluster).
//
// All methods are safe for concurrent use. Resize, Move and UnmarshalText are serialized
// with each other; the other methods take no lock and read one immutable table, the old one
// or the new one, never a mix. The zero Partitions holds no table: its use is as the target of
// UnmarshalText. Until then Shards, NumPartitions, Locate and Partition return 0, Owner panics
// as for any partition out of range, and the methods that return errors fail.
type Partitions struct {
	mu    sync.Mutex // serializes Resize, Move and UnmarshalText
	table atomic.Pointer[partitionTable]
}

// partitionTable is one immutable placement: never modified after it is published.
type partitionTable struct {
	hash   partitionHash
	shards int
	owner  []uint16 // owner[partition] = shard; len(owner) = P
}

// partitionHash says how a key becomes a partition. It is part of the saved table, so that a
// table made for one rule is never loaded under the other.
type partitionHash uint8

const (
	hashXXH64 partitionHash = iota // floor(XXH64(key) * P / 2^64)
	hashRedis                      // RedisSlot(key)
)

var partitionHashNames = [...]string{hashXXH64: "xxh64", hashRedis: "redis"}

const (
	// maxPartitions bounds P so that a shard number fits the uint16 table (n <= P) and the
	// whole table, at most 128 KiB, stays a small thing to cache, store and edit.
	maxPartitions = 1 << 16
	// redisSlots is Redis Cluster's fixed number of hash slots.
	redisSlots = 16384
)

// ErrPartitionCount reports a number of partitions outside [1, 65536], or a saved table whose
// partition count or key rule differs from the Partitions it is loaded into.
var ErrPartitionCount = errors.New("partition count out of range")

// ErrPartition reports a partition number outside [0, NumPartitions()).
var ErrPartition = errors.New("partition out of range")

// ErrPartitionTable reports a saved partition table that is malformed or inconsistent.
var ErrPartitionTable = errors.New("malformed partition table")

// PartitionMove says that partition Partition changes owner from shard From to shard To.
type PartitionMove struct {
	Partition, From, To int
}

// NewPartitions returns a Partitions sharder with n shards over a fixed number of partitions,
// n in [1, partitions] and partitions in [1, 65536]. A key's partition is
// floor(XXH64(key) * partitions / 2^64): the high word of a 64x64-bit product, Lemire's
// multiply-shift range reduction, which is as even as XXH64(key) % partitions (each partition
// gets floor or ceil of 2^64/P hash values) without a division.
//
// Shard i starts with a contiguous range of partitions, split exactly as
// redis-cli --cluster create splits Redis Cluster's 16384 slots among masters, so every shard
// holds floor(P/n) or ceil(P/n) partitions; see NewRedisCluster.
func NewPartitions(n, partitions int) (*Partitions, error) {
	if partitions < 1 || partitions > maxPartitions {
		return nil, fmt.Errorf("shard: partitions: %d partitions: allowed range is [1, %d]: %w", partitions, maxPartitions, ErrPartitionCount)
	}
	return newPartitions(hashXXH64, n, partitions)
}

// NewRedisCluster returns a Partitions sharder that places keys as a Redis Cluster of n
// masters does right after redis-cli --cluster create, n in [1, 16384]: a key's partition is
// its hash slot, RedisSlot(key), and master i (numbered in the order the masters were given
// to redis-cli) owns the i-th contiguous range of the 16384 slots. This split was checked
// against real clusters of 3 to 8 masters and against the plans redis-cli prints for up to
// 1000 masters (Redis 7.0).
//
// After slots are resharded in the cluster, load its table with UnmarshalText or apply the
// moves with Move: Resize plans its own minimal moves and does not predict what
// redis-cli --cluster rebalance or reshard would do.
func NewRedisCluster(n int) (*Partitions, error) {
	return newPartitions(hashRedis, n, redisSlots)
}

func newPartitions(hash partitionHash, n, partitions int) (*Partitions, error) {
	if err := checkCount("partitions", n, partitions); err != nil {
		return nil, err
	}
	p := &Partitions{}
	p.table.Store(&partitionTable{hash: hash, shards: n, owner: contiguousSplit(partitions, n)})
	return p, nil
}

// contiguousSplit gives shard i the i-th of n contiguous ranges of the p partitions.
//
// It follows redis-cli's clusterManagerCommandCreate (Redis 7.0): a float32 cursor advances
// by p/n, shard i ends at lround(cursor + p/n - 1), and the last shard ends at p-1. In
// float32 the cursor drifts: from 78 shards of 16384 on, the split differs from the exact
// one (redis-cli's printed plans confirm it), so the float32 arithmetic is kept to the bit.
// From 2688 shards of 16384 on, the drift makes some ranges uneven or run past the end;
// there the exact rule round((i+1)p/n - 1), rounding halves up, is used instead, which
// always gives floor(p/n) or ceil(p/n) partitions to every shard.
func contiguousSplit(p, n int) []uint16 {
	owner := make([]uint16, p)
	if redisCLISplit(owner, n) {
		return owner
	}
	first := 0
	for i := range n {
		last := int((2*uint64(i+1)*uint64(p) - uint64(n)) / (2 * uint64(n)))
		for j := first; j <= last; j++ {
			owner[j] = uint16(i)
		}
		first = last + 1
	}
	return owner
}

// redisCLISplit fills owner with redis-cli's split among n shards and reports whether that
// split is even (every range floor or ceil of p/n) and within bounds.
func redisCLISplit(owner []uint16, n int) bool {
	p := len(owner)
	per := float32(p) / float32(n)
	lo, hi := p/n, (p+n-1)/n
	var cursor float32
	first := 0
	for i := range n {
		// Each float32 operation rounds, as in C; lround rounds halves away from zero, as
		// math.Round does.
		last := int(math.Round(float64(float32(cursor+per) - 1)))
		if last > p || i == n-1 {
			last = p - 1
		}
		last = max(last, first)
		if size := last - first + 1; size < lo || size > hi || last >= p {
			return false
		}
		for j := first; j <= last; j++ {
			owner[j] = uint16(i)
		}
		first = last + 1
		cursor += per
	}
	return true
}

// Partition returns the partition of key, in [0, NumPartitions()), or 0 for the zero
// Partitions. It never changes for a given key and partition count.
func (p *Partitions) Partition(key string) int {
	t := p.table.Load()
	if t == nil { // the zero Partitions
		return 0
	}
	return t.partition(key)
}

func (t *partitionTable) partition(key string) int {
	if t.hash == hashRedis {
		return RedisSlot(key)
	}
	return xxhPartition(key, len(t.owner))
}

// xxhPartition returns floor(XXH64(key) * np / 2^64), in [0, np): the partition of key among
// np by the xxh64 rule, which PagedPartitions shares.
func xxhPartition(key string, np int) int {
	hi, _ := bits.Mul64(keyhash.XXH64(key), uint64(np))
	return int(hi)
}

// Locate returns the shard that owns key's partition, in [0, Shards()).
func (p *Partitions) Locate(key string) int {
	t := p.table.Load()
	if t == nil { // the zero Partitions
		return 0
	}
	return int(t.owner[t.partition(key)])
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys).
func (p *Partitions) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	t := p.table.Load()
	if t == nil { // the zero Partitions
		clear(dst)
		return
	}
	for i, k := range keys {
		dst[i] = int(t.owner[t.partition(k)])
	}
}

// Owner returns the shard that owns partition, in [0, Shards()). Like indexing a slice, it
// panics if partition is not in [0, NumPartitions()): a partition number comes from
// Partition or from counting up to NumPartitions, so a bad one is a bug in the caller, and an
// error result would burden every correct lookup. Move checks its arguments and returns
// errors, since its partition numbers come from operators.
func (p *Partitions) Owner(partition int) int {
	t := p.table.Load()
	if t == nil || uint(partition) >= uint(len(t.owner)) {
		panic(fmt.Sprintf("shard: Partitions.Owner(%d): partition out of range [0, %d)", partition, p.NumPartitions()))
	}
	return int(t.owner[partition])
}

// Table returns a copy of the partition table: element i is the shard that owns partition i.
// It returns nil for the zero Partitions.
func (p *Partitions) Table() []int {
	t := p.table.Load()
	if t == nil {
		return nil
	}
	out := make([]int, len(t.owner))
	for i, s := range t.owner {
		out[i] = int(s)
	}
	return out
}

// NumPartitions returns the fixed number of partitions, or 0 for the zero Partitions.
func (p *Partitions) NumPartitions() int {
	if t := p.table.Load(); t != nil {
		return len(t.owner)
	}
	return 0
}

// Shards returns the current number of shards, or 0 for the zero Partitions. A shard may own
// no partition after Move or UnmarshalText (a shard being drained), but never after a
// constructor or Resize.
func (p *Partitions) Shards() int {
	if t := p.table.Load(); t != nil {
		return t.shards
	}
	return 0
}

// loaded returns the current table, or an error for the zero Partitions.
func (p *Partitions) loaded() (*partitionTable, error) {
	t := p.table.Load()
	if t == nil {
		return nil, fmt.Errorf("shard: partitions: no table: make one with NewPartitions or NewRedisCluster, or load one with UnmarshalText: %w", ErrPartitionTable)
	}
	return t, nil
}

// PlanResize returns the moves that Resize(n) would make, in increasing partition order,
// without making them; n must be in [1, NumPartitions()].
//
// The plan moves the fewest partitions that leave every shard with floor(P/n) or
// ceil(P/n) of them. A shard s that holds c(s) partitions and ends with f(s) must give away at
// least c(s) - f(s), so no plan moves fewer than the sum of the positive c(s) - f(s). Of the
// shards 0..n-1, P mod n must end with ceil(P/n); giving the ceiling to those that hold the
// most (ties to the lower shard number) minimizes that sum, since handing it to a shard with
// fewer partitions never lowers the excess more. Shards n and up end with none. The plan
// moves exactly that sum: each shard above its quota gives up its highest-numbered
// partitions, and these go, in increasing order, to the shards below their quota, lowest
// shard first.
//
// Growing from a balanced table therefore moves partitions only to the new shards, and
// shrinking only moves partitions off the removed ones. The result depends on the current
// table, not only on n: after Resize the table generally differs from a new Partitions with
// n shards (the new shard gets a slice of each old range, not a range of its own).
func (p *Partitions) PlanResize(n int) ([]PartitionMove, error) {
	t, err := p.loaded()
	if err != nil {
		return nil, err
	}
	if err := checkCount("partitions", n, len(t.owner)); err != nil {
		return nil, err
	}
	return planResize(t, n), nil
}

func planResize(t *partitionTable, n int) []PartitionMove {
	counts := make([]int, max(t.shards, n))
	for _, s := range t.owner {
		counts[s]++
	}
	quota := make([]int, len(counts)) // zero for the removed shards
	byCount := make([]int, n)
	for s := range byCount {
		byCount[s] = s
	}
	slices.SortStableFunc(byCount, func(a, b int) int { return counts[b] - counts[a] })
	q, r := len(t.owner)/n, len(t.owner)%n
	for i, s := range byCount {
		quota[s] = q
		if i < r {
			quota[s]++
		}
	}
	excess := 0
	for s, c := range counts {
		excess += max(0, c-quota[s])
	}
	released := make([]int, 0, excess) // descending partitions, given up by shards above their quota
	for part := len(t.owner) - 1; part >= 0; part-- {
		if s := t.owner[part]; counts[s] > quota[s] {
			counts[s]--
			released = append(released, part)
		}
	}
	moves := make([]PartitionMove, len(released))
	to := 0
	for i := range released {
		part := released[len(released)-1-i]
		for counts[to] >= quota[to] {
			to++
		}
		counts[to]++
		moves[i] = PartitionMove{Partition: part, From: int(t.owner[part]), To: to}
	}
	return moves
}

// Resize sets the number of shards to n, n in [1, NumPartitions()], making exactly the
// moves that PlanResize(n) returns when nothing else changes the table in between. On error
// the table is unchanged.
func (p *Partitions) Resize(n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.loaded()
	if err != nil {
		return err
	}
	if err := checkCount("partitions", n, len(t.owner)); err != nil {
		return err
	}
	owner := slices.Clone(t.owner)
	for _, m := range planResize(t, n) {
		owner[m.Partition] = uint16(m.To)
	}
	p.table.Store(&partitionTable{hash: t.hash, shards: n, owner: owner})
	return nil
}

// Move gives partition, in [0, NumPartitions()), to shard to, in [0, Shards()): the
// operator's tool to follow a migration by hand or to drain a shard before removing it.
// Errors wrap ErrPartition or ErrShard; on error the table is unchanged.
func (p *Partitions) Move(partition, to int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.loaded()
	if err != nil {
		return err
	}
	if partition < 0 || partition >= len(t.owner) {
		return fmt.Errorf("shard: partitions: move partition %d: allowed range is [0, %d): %w", partition, len(t.owner), ErrPartition)
	}
	if to < 0 || to >= t.shards {
		return fmt.Errorf("shard: partitions: move partition %d to shard %d: allowed range is [0, %d): %w", partition, to, t.shards, ErrShard)
	}
	if int(t.owner[partition]) == to {
		return nil
	}
	owner := slices.Clone(t.owner)
	owner[partition] = uint16(to)
	p.table.Store(&partitionTable{hash: t.hash, shards: t.shards, owner: owner})
	return nil
}

// MarshalText saves the table as text, to keep in a central store that every router loads (the
// sharding lecture [003]). The format is a header line and one line per run of consecutive
// partitions with the same owner, in increasing order, each line ending in '\n':
//
//	hash=redis partitions=16384 shards=3
//	0-5460 0
//	5461-10922 1
//	10923-16383 2
//
// hash names the key-to-partition rule: xxh64 (NewPartitions) or redis (NewRedisCluster, 16384
// partitions). A run of one partition is written "7 2" rather than "7-7 2". Shards that own no
// partition simply have no line. It fails only for the zero Partitions.
func (p *Partitions) MarshalText() ([]byte, error) {
	t, err := p.loaded()
	if err != nil {
		return nil, err
	}
	b := fmt.Appendf(nil, "hash=%s partitions=%d shards=%d\n", partitionHashNames[t.hash], len(t.owner), t.shards)
	return appendRuns(b, t.owner), nil
}

// appendRuns appends one line "FIRST-LAST SHARD" per run of consecutive partitions of owner
// with the same shard, or "PARTITION SHARD" for a run of one, numbering owner from 0.
func appendRuns(b []byte, owner []uint16) []byte {
	for first := 0; first < len(owner); {
		last := first
		for last+1 < len(owner) && owner[last+1] == owner[first] {
			last++
		}
		b = strconv.AppendInt(b, int64(first), 10)
		if last > first {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(last), 10)
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(owner[first]), 10)
		b = append(b, '\n')
		first = last + 1
	}
	return b
}

// UnmarshalText loads a table saved by MarshalText, replacing the current one atomically.
// Into a zero Partitions it loads any valid table; into one that has a table, the saved table
// must have the same hash rule and partition count (else the error wraps ErrPartitionCount),
// since a key's partition must never change. The shard count may differ.
//
// The runs must cover every partition exactly once, in increasing order, and name shards below
// the header's shard count; a shard may own no partition, as after Move drained it. Lines of
// one partition may be written "7-7 2" or "7 2", and adjacent runs with the same owner are
// accepted. The final '\n' is optional; nothing else is tolerated: no blank lines, no extra
// spaces, no signs, no leading zeros, no '\r'. Errors name the line and the problem and wrap
// ErrPartitionTable; on error the table is unchanged.
func (p *Partitions) UnmarshalText(text []byte) error {
	t, err := parsePartitionTable(text)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.table.Load(); old != nil && (old.hash != t.hash || len(old.owner) != len(t.owner)) {
		return fmt.Errorf("shard: partitions: table has hash=%s partitions=%d, this Partitions has hash=%s partitions=%d: %w",
			partitionHashNames[t.hash], len(t.owner), partitionHashNames[old.hash], len(old.owner), ErrPartitionCount)
	}
	p.table.Store(t)
	return nil
}

func parsePartitionTable(text []byte) (*partitionTable, error) {
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("shard: partitions: table line %d: %s: %w", line, fmt.Sprintf(format, args...), ErrPartitionTable)
	}
	text, _ = bytes.CutSuffix(text, []byte("\n"))
	if bytes.HasSuffix(text, []byte("\n")) {
		return nil, fmt.Errorf("shard: partitions: table ends in a blank line: %w", ErrPartitionTable)
	}
	header, body, _ := bytes.Cut(text, []byte("\n"))
	f := bytes.Split(header, []byte(" "))
	if len(f) != 3 {
		return nil, bad(1, "header %.40q: want \"hash=NAME partitions=P shards=N\"", header)
	}
	name, ok := bytes.CutPrefix(f[0], []byte("hash="))
	t := &partitionTable{}
	switch {
	case ok && string(name) == "xxh64":
		t.hash = hashXXH64
	case ok && string(name) == "redis":
		t.hash = hashRedis
	default:
		return nil, bad(1, "%.40q: want hash=xxh64 or hash=redis", f[0])
	}
	v, ok := bytes.CutPrefix(f[1], []byte("partitions="))
	np, err := parseDecimal(v)
	if !ok || err != nil || np < 1 || np > maxPartitions {
		return nil, bad(1, "%.40q: want partitions=P with P in [1, %d]", f[1], maxPartitions)
	}
	if t.hash == hashRedis && np != redisSlots {
		return nil, bad(1, "hash=redis needs partitions=%d, not %d", redisSlots, np)
	}
	v, ok = bytes.CutPrefix(f[2], []byte("shards="))
	t.shards, err = parseDecimal(v)
	if !ok || err != nil || t.shards < 1 || t.shards > np {
		return nil, bad(1, "%.40q: want shards=N with N in [1, %d]", f[2], np)
	}
	t.owner = make([]uint16, np)
	next, err := parseRuns(body, t.owner, t.shards, 2, bad)
	if err != nil {
		return nil, err
	}
	if next < np {
		return nil, fmt.Errorf("shard: partitions: table ends early: partitions %d-%d have no owner: %w", next, np-1, ErrPartitionTable)
	}
	return t, nil
}

// parseRuns fills owner from the lines of body, "FIRST-LAST SHARD" or "PARTITION SHARD",
// which must give each partition once, in increasing order from 0, to a shard below shards.
// It returns the first partition no line gave; errors come from bad with the line number,
// counting the first line of body as firstLine.
func parseRuns(body []byte, owner []uint16, shards, firstLine int, bad func(line int, format string, args ...any) error) (int, error) {
	np := len(owner)
	next := 0 // the first partition not yet covered
	for i := firstLine; len(body) > 0; i++ {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		rng, shard, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			return 0, bad(i, "%.40q: want \"FIRST-LAST SHARD\" or \"PARTITION SHARD\"", line)
		}
		a, b, isRange := bytes.Cut(rng, []byte("-"))
		first, err1 := parseDecimal(a)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = parseDecimal(b)
		}
		s, err3 := parseDecimal(shard)
		switch {
		case err1 != nil || err2 != nil || err3 != nil:
			return 0, bad(i, "%.40q: want \"FIRST-LAST SHARD\" or \"PARTITION SHARD\" in decimal", line)
		case first > last:
			return 0, bad(i, "range %d-%d is backwards", first, last)
		case first < next:
			return 0, bad(i, "range %d-%d overlaps partitions already given (next expected %d)", first, last, next)
		case first > next:
			return 0, bad(i, "gap: partitions %d-%d have no owner", next, first-1)
		case last >= np:
			return 0, bad(i, "range %d-%d: partitions end at %d", first, last, np-1)
		case s >= shards:
			return 0, bad(i, "shard %d: allowed range is [0, %d)", s, shards)
		}
		for j := first; j <= last; j++ {
			owner[j] = uint16(s)
		}
		next = last + 1
	}
	return next, nil
}

var errDecimal = errors.New("not a decimal")

// parseDecimal accepts 1 to 6 ASCII digits without leading zeros, enough for every partition
// and shard number, and nothing else (strconv.Atoi also takes signs and underscores are one
// step away); one spelling per number, as the trie's parser.
func parseDecimal(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 6 || len(b) > 1 && b[0] == '0' {
		return 0, errDecimal
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errDecimal
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// RedisSlot returns the Redis Cluster hash slot of key, in [0, 16384), as CLUSTER KEYSLOT
// does: CRC16 of HashTag(key) modulo 16384. The CRC is CRC-16/XMODEM (polynomial 0x1021,
// initial value 0, no reflection), the one the Redis Cluster specification names, whose
// check value for "123456789" is 0x31C3. It never allocates.
func RedisSlot(key string) int {
	tag := HashTag(key)
	t := &crc16Tables
	var crc uint16
	// Four bytes a step: the two that meet the CRC register and two that follow it, each
	// looked up with the number of zero bytes still behind it (slicing-by-4), which shortens
	// the chain of dependent lookups fourfold.
	for len(tag) >= 4 {
		crc = t[3][byte(crc>>8)^tag[0]] ^ t[2][byte(crc)^tag[1]] ^ t[1][tag[2]] ^ t[0][tag[3]]
		tag = tag[4:]
	}
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ t[0][byte(crc>>8)^tag[i]]
	}
	return int(crc & (redisSlots - 1))
}

// crc16Tables[k][b] is the CRC-16/XMODEM of the byte b followed by k zero bytes.
var crc16Tables = func() (t [4][256]uint16) {
	for i := range t[0] {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[0][i] = c
	}
	for k := 1; k < len(t); k++ {
		for i, c := range t[k-1] {
			t[k][i] = c<<8 ^ t[0][byte(c>>8)]
		}
	}
	return t
}()
