package shard

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/ring"
)

// Ring is a consistent-hash ring (Karger et al.; the sharding lecture [003]): every shard owns
// a number of points (virtual nodes) on a circle of 64-bit positions, and a key belongs to the
// owner of the first point at or after the key's position, wrapping around to the smallest
// point.
//
// Growing from n to n+1 shards adds only the new shard's points, so keys move only to the new
// shard, about 1/(n+1) of them; shrinking removes only the highest shard's points, so only its
// keys move. A ring resized to n places every key exactly as a new ring with n shards does.
//
// Two points at the same position: the point of the higher-numbered shard owns it. This is
// what Java's TreeMap.put does when points are inserted shard by shard (a later put replaces
// an equal key), and it keeps resizes minimal: a new shard's point wins its ties, and removing
// it gives the position back to the shard it had hidden.
//
// Lookups do not search all points: the ring's table (internal/ring, the engine every ring of
// this module shares) indexes the top bits of the positions, so Locate reads one index entry
// and scans the one or two points of that bucket. A ring keeps about 35 bytes per point
// (BenchmarkRingBuild): the table and the sorted points Resize reuses.
//
// Make rings with NewRing, NewJedisRing or NewMurmurRing. The zero Ring has no points and no
// hash: Shards, Points and Locate return 0 and Resize fails. Locate, Shards and Points are
// safe for concurrent use, also with Resize; Resize calls are serialized.
type Ring struct {
	mu    sync.Mutex // serializes Resize and guards all
	table atomic.Pointer[ringTable]
	// all holds every point of shards [0, built), sorted as the table sorts them (position,
	// then the higher shard first); Resize builds a table from it and hashes only the names
	// of shards it has never had. built is the most shards the ring ever had, so a shrink and
	// regrow is cheap.
	all   []ring.Point
	built int

	strategy  string // names the ring in errors
	kind      ringKind
	hash      func(string) uint64
	name      func(shard, vnode int) string
	vnodes    int
	maxShards int
}

// RingOptions configure NewRing. The zero value is a ring of 160 points per shard, named
// "<shard>-<vnode>" and placed by XXH64.
type RingOptions struct {
	// Hash returns the position of a key, and of a point from its name; positions are
	// ordered as unsigned 64-bit integers. It must be deterministic and safe for concurrent
	// use, and should not allocate: every Locate calls it. Nil means XXH64 (seed 0).
	Hash func(key string) uint64
	// Vnodes is the number of points per shard, in [1, 4194304]. Zero means 160, as Jedis.
	Vnodes int
	// Name returns the name of point vnode (in [0, Vnodes)) of shard; the point's position is
	// Hash(Name(shard, vnode)). Distinct (shard, vnode) pairs should get distinct names. Only
	// the constructor and Resize call it, one call at a time. Nil means strconv.Itoa(shard) +
	// "-" + strconv.Itoa(vnode), which is unambiguous since neither number contains '-'.
	Name func(shard, vnode int) string
}

// ErrVnodes reports a number of points per shard outside [1, 4194304]. Errors of the ring
// constructors wrap it, so callers can test for it with errors.Is.
var ErrVnodes = errors.New("vnode count out of range")

const (
	// maxRingPoints bounds shards*vnodes: the ring engine's limit.
	maxRingPoints = ring.MaxPoints
	// defaultVnodes is Jedis's 160 points per shard of weight 1.
	defaultVnodes = 160
	// jedisVnodes is the number of points Jedis gives a shard of weight 1.
	jedisVnodes = 160
)

// NewRing returns a ring of n shards, n in [1, 4194304/vnodes], each owning opts.Vnodes
// points at opts.Hash(opts.Name(shard, vnode)). A count out of range returns an error wrapping
// ErrShardCount, a vnode count out of range one wrapping ErrVnodes.
func NewRing(n int, opts RingOptions) (*Ring, error) {
	kind := customKind
	if opts.Hash == nil {
		opts.Hash, kind = keyhash.XXH64, xxhKind
	}
	if opts.Vnodes == 0 {
		opts.Vnodes = defaultVnodes
	}
	if opts.Name == nil {
		opts.Name = defaultVnodeName
	}
	return newRing("ring", kind, n, opts)
}

// NewJedisRing returns a ring of n shards, n in [1, 26214], that places every key where
// Jedis's sharded client places it: redis.clients.jedis.util.Sharded with Hashing.MD5 and n
// unnamed JedisShardInfo of weight 1, as the two-algorithms post [000] describes.
//
// Shard i owns 160 points named "SHARD-<i>-NODE-<j>", j in [0, 160); a position is the first
// four bytes of the MD5 digest read little-endian (keyhash.JedisMD5), and a key goes to the
// first point >= its position, else to the smallest point (TreeMap.tailMap, firstKey).
// Jedis hashes a String key's UTF-8 bytes and a byte[] key's raw bytes; Locate hashes the
// bytes of the Go string, so it agrees with both. Jedis's optional key-tag pattern is not
// applied: hash the tag yourself if you configured one.
func NewJedisRing(n int) (*Ring, error) {
	return newRing("jedis ring", jedisKind, n, RingOptions{
		Hash:   jedisPosition,
		Vnodes: jedisVnodes,
		Name: func(shard, vnode int) string {
			return "SHARD-" + strconv.Itoa(shard) + "-NODE-" + strconv.Itoa(vnode)
		},
	})
}

// NewMurmurRing returns a ring of n shards, n in [1, 4194304/vnodes], each owning vnodes
// points, vnodes in [1, 4194304] (zero is an error here: say how many you want; Cassandra
// uses 16 or 256 tokens per node). Point j of shard i has the token MurmurToken("<i>-<j>"),
// and a key goes to the shard of the first token >= MurmurToken(key), tokens ordered as
// signed 64-bit integers as Cassandra orders them, else to the smallest token.
//
// Keys get exactly Cassandra's tokens; the shards' tokens are this ring's own (Cassandra
// assigns node tokens randomly or with its allocation algorithm), so the ring reproduces
// Cassandra's placement only if given the same node tokens, which this constructor does not
// take.
func NewMurmurRing(n, vnodes int) (*Ring, error) {
	if vnodes == 0 {
		return nil, vnodesError("murmur ring", vnodes)
	}
	return newRing("murmur ring", murmurKind, n, RingOptions{
		Hash:   murmurPosition,
		Vnodes: vnodes,
		Name:   defaultVnodeName,
	})
}

// MurmurToken returns the token Cassandra's Murmur3Partitioner gives key, in
// [math.MinInt64, math.MaxInt64]: h1 of MurmurHash3 x64 128 (seed 0) as Cassandra computes it
// (keyhash.Cassandra128), with math.MinInt64 mapped to math.MaxInt64, except that the empty
// key has the minimum token math.MinInt64, as in Cassandra. It never allocates and is safe
// for concurrent use.
func MurmurToken(key string) int64 {
	if len(key) == 0 {
		return math.MinInt64
	}
	h1, _ := keyhash.Cassandra128(key)
	if int64(h1) == math.MinInt64 {
		return math.MaxInt64
	}
	return int64(h1)
}

// jedisPosition moves the 32-bit Jedis position to the top bits, which keeps its order and
// lets the index use the bits that vary.
func jedisPosition(key string) uint64 {
	return uint64(keyhash.JedisMD5(key)) << 32
}

// murmurPosition flips the sign bit, which orders signed tokens as unsigned positions.
func murmurPosition(key string) uint64 {
	return uint64(MurmurToken(key)) ^ 1<<63
}

func defaultVnodeName(shard, vnode int) string {
	return strconv.Itoa(shard) + "-" + strconv.Itoa(vnode)
}

func vnodesError(strategy string, v int) error {
	return fmt.Errorf("shard: %s: %d vnodes: allowed range is [1, %d]: %w", strategy, v, maxRingPoints, ErrVnodes)
}

// ringKind tells Locate which built-in hash a ring uses.
type ringKind uint8

const (
	customKind ringKind = iota
	xxhKind
	jedisKind
	murmurKind
)

func newRing(strategy string, kind ringKind, n int, opts RingOptions) (*Ring, error) {
	if opts.Vnodes < 1 || opts.Vnodes > maxRingPoints {
		return nil, vnodesError(strategy, opts.Vnodes)
	}
	r := &Ring{
		strategy:  strategy,
		kind:      kind,
		hash:      opts.Hash,
		name:      opts.Name,
		vnodes:    opts.Vnodes,
		maxShards: maxRingPoints / opts.Vnodes,
	}
	if err := r.Resize(n); err != nil {
		return nil, err
	}
	return r, nil
}

// Locate returns the shard that owns key, in [0, Shards()): the owner of the first point at
// or after the key's position, or of the smallest point if there is none.
func (r *Ring) Locate(key string) int {
	t := r.table.Load()
	if t == nil { // the zero Ring
		return 0
	}
	return int(t.Locate(r.position(key)))
}

// position returns the position of key. Direct calls for the built-in hashes save the
// indirect call and let them inline.
func (r *Ring) position(key string) uint64 {
	switch r.kind {
	case murmurKind:
		return murmurPosition(key)
	case jedisKind:
		return jedisPosition(key)
	case xxhKind:
		return keyhash.XXH64(key)
	}
	return r.hash(key)
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys). It hashes 32 keys, then looks all of them up together
// (ring.Table.LocateBatch), so their cache misses overlap.
func (r *Ring) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	t := r.table.Load()
	if t == nil { // the zero Ring
		clear(dst)
		return
	}
	var hs [ring.Batch]uint64
	var owners [ring.Batch]int32
	for len(keys) > 0 {
		g := min(len(keys), ring.Batch)
		for m, k := range keys[:g] {
			hs[m] = r.position(k)
		}
		t.LocateBatch(hs[:g], owners[:g])
		for m, o := range owners[:g] {
			dst[m] = int(o)
		}
		keys, dst = keys[g:], dst[g:]
	}
}

// Position returns key's position on the ring, the 64-bit value that Locate looks up and
// that Arcs are ranges of: RingOptions.Hash(key) for NewRing, the Jedis 32-bit hash in the
// top 32 bits for NewJedisRing, MurmurToken(key) with its sign bit flipped (so that
// unsigned order is Cassandra's signed order) for NewMurmurRing. A store that keeps each
// row's Position can move a ring's changed arcs by range. It never allocates (unless
// RingOptions.Hash does) and is safe for concurrent use. It returns 0 for the zero Ring.
func (r *Ring) Position(key string) uint64 {
	if r.hash == nil { // the zero Ring
		return 0
	}
	return r.position(key)
}

// Arc is a range of ring positions [First, Last], both ends included, whose keys all belong
// to Shard.
type Arc struct {
	First, Last uint64
	Shard       int
}

// Arcs yields the ring's arcs in increasing order of positions, from the one that holds 0 to
// the one that holds math.MaxUint64, every position in exactly one: a key belongs to the
// shard of the arc that holds Position(key). Two consecutive arcs never have the same shard
// (the first and the last may: the arc of the smallest point is cut at the wrap), so a ring
// of n shards with v points each has at most n*v+1 arcs. Arcs reads the ring as it was
// when called, allocates nothing per arc, and is safe for concurrent use, also with Resize.
// The zero Ring has no arcs.
func (r *Ring) Arcs() iter.Seq[Arc] {
	t := r.table.Load()
	return func(yield func(Arc) bool) {
		if t == nil { // the zero Ring
			return
		}
		var cur Arc
		started := false
		for a := range t.Arcs() {
			if started && int(a.Owner) == cur.Shard {
				cur.Last = a.Last
				continue
			}
			if started && !yield(cur) {
				return
			}
			cur, started = Arc{First: a.First, Last: a.Last, Shard: int(a.Owner)}, true
		}
		yield(cur)
	}
}

// Resize sets the number of shards to n, in [1, 4194304/vnodes]: growing adds the points of
// the new shards, shrinking removes those of the removed ones. On error the ring is unchanged.
// The ring keeps the sorted points of the most shards it ever had, so growing back after a
// shrink hashes nothing again.
func (r *Ring) Resize(n int) error {
	if r.maxShards == 0 {
		return fmt.Errorf("shard: zero Ring: make rings with NewRing, NewJedisRing or NewMurmurRing: %w", ErrShardCount)
	}
	if err := checkCount(r.strategy, n, r.maxShards); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.table.Load(); t != nil && t.shards == n {
		return nil
	}
	all, built := r.all, r.built
	if n > built {
		added := make([]ring.Point, 0, (n-built)*r.vnodes)
		for i := built; i < n; i++ {
			for j := range r.vnodes {
				added = append(added, ringPoint(r.hash(r.name(i, j)), i))
			}
		}
		ring.Sort(added)
		all, built = mergeRingPoints(all, added), n
	}
	points := make([]ring.Point, 0, n*r.vnodes)
	for _, p := range all {
		if int(p.Owner) < n {
			points = append(points, p)
		}
	}
	t, err := ring.New(points) // sorted already: New sorts it in linear time
	if err != nil {
		return fmt.Errorf("shard: %s: %w", r.strategy, err) // unreachable: n*vnodes is checked
	}
	r.table.Store(&ringTable{shards: n, Table: t})
	r.all, r.built = all, built
	return nil
}

// Shards returns the current number of shards.
func (r *Ring) Shards() int {
	if t := r.table.Load(); t != nil {
		return t.shards
	}
	return 0
}

// Points returns the number of distinct point positions on the ring, in [1, Shards()*vnodes]:
// fewer than Shards()*vnodes only when points collide. It is cheap (no locking, no counting),
// for reports of memory and balance. It returns 0 for the zero Ring.
func (r *Ring) Points() int {
	if t := r.table.Load(); t != nil {
		return t.Distinct()
	}
	return 0
}

// ringPoint returns the point of shard at pos. Its rank makes the higher shard win a tie, as
// a later TreeMap.put replaces an equal key.
func ringPoint(pos uint64, shard int) ring.Point {
	return ring.Point{Pos: pos, Owner: int32(shard), Rank: math.MaxUint32 - uint32(shard)}
}

// mergeRingPoints merges two sorted point lists into a new one.
func mergeRingPoints(a, b []ring.Point) []ring.Point {
	out := make([]ring.Point, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if ring.Compare(a[0], b[0]) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// ringTable is the immutable lookup table of one shard count.
type ringTable struct {
	shards int
	*ring.Table
}
