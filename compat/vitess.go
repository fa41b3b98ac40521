package compat

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// Vitess: a vindex maps a column value to a keyspace id, and the keyspace's shards, named by
// their key ranges, own the keyspace ids: the rule of testdata/compat/vitess/README.md, from
// vitess v0.24.4's go/vt/vtgate/vindexes, go/vt/key/key.go and destination.go,
// go/vt/topo/shard.go (ValidateShardName) and srv_keyspace.go (OrderAndCheckPartitions).

var vitessPreset = Preset{
	System: "vitess",
	Doc: `Vitess: a vindex type and the keyspace's shards as JSON, {"vindex": "hash", "shards": ["-80", "80-"]}; ` +
		`a key is the column value as text`,
	New: func(config []byte, name string) (pool.Pool, error) {
		if err := singleConfig("vitess", name); err != nil {
			return nil, err
		}
		cfg, err := ParseVitess(config)
		if err != nil {
			return nil, err
		}
		k, err := newVitess(cfg)
		if err != nil {
			return nil, err
		}
		return k, nil
	},
	Checked: 59382,
}

// VitessVindexes are the vindex types NewVitess reproduces.
var VitessVindexes = []string{"hash", "xxhash", "numeric", "binary_md5", "unicode_loose_md5", "unicode_loose_xxhash", "binary", "reverse_bits"}

var (
	// ErrNoKeyspaceID reports a value that Vitess's vindex maps to no keyspace id, so that no
	// shard holds it: text that is no unsigned integer for numeric and reverse_bits (hash takes
	// negative integers too), invalid UTF-8 for the unicode_loose vindexes.
	ErrNoKeyspaceID = errors.New("compat: vitess: the vindex maps the value to no keyspace id")
	// ErrNotReproduced reports a value whose keyspace id this package does not compute: a
	// unicode_loose vindex's value with a character at or above U+0530, or a combining mark
	// (or a character that decomposes to one), whose weights under the Unicode collation
	// algorithm depend on tables and normalization this package does not carry.
	ErrNotReproduced = errors.New("compat: vitess: the value is outside what this package reproduces")
)

// Vitess is a keyspace's placement: its primary vindex's type (as the VSchema's
// vindexes.<name>.type says) and its serving shards' names.
type Vitess struct {
	Vindex string
	Shards []string
	// lines are the text lines of the vindex and of each shard, when read from text.
	vindexLine int
	shardLines []int
}

// vindexKind is a vindex type.
type vindexKind uint8

const (
	vindexHash vindexKind = iota
	vindexXXHash
	vindexNumeric
	vindexBinaryMD5
	vindexUnicodeLooseMD5
	vindexUnicodeLooseXXHash
	vindexBinary
	vindexReverseBits
)

// VitessKeyspace places values on a keyspace's shards as vtgate does. Its lookups take no lock
// and allocate nothing (but for unicode_loose values of over 682 characters); it is safe for
// concurrent use. As a pool.Pool it refuses Add, Remove and SetWeight: a keyspace's shards
// change by resharding, from one complete shard list to another; build a new VitessKeyspace
// for the new list.
type VitessKeyspace struct {
	kind  vindexKind
	names []string // the shards as listed
	// The shards that own keyspace ids, in key range order: the normalized start of each
	// (trailing zero bytes removed; the first is "") and its index in names.
	starts []string
	owners []int32
	// order is every shard's index in names in AppendN's order after the owner: the owning
	// shards in key range order, then those with an empty key range, as listed.
	order []int32
}

// NewVitess returns the keyspace of cfg: Locate(value) names the shard vtgate routes a row
// to when its primary vindex column holds value, written as text: an integer for hash,
// numeric and reverse_bits (the value is an INT64 when strconv.ParseInt reads the text, else
// a UINT64 when strconv.ParseUint does, else a VARCHAR of the text, which MySQL's cast reads
// as Vitess does), the column's bytes for the others. A value the vindex maps to no keyspace
// id has no shard: Locate returns "" and Shard says why (ErrNoKeyspaceID); so does a
// unicode_loose value with a character this package does not weigh (ErrNotReproduced): one
// at or above U+0530, past Latin, Greek and Cyrillic, or a combining mark.
//
// The vindex types are those of VitessVindexes. The shards are checked as Vitess checks them
// (topo.ValidateShardName, then topo.OrderAndCheckPartitions): each name at most 64
// characters of [A-Za-z0-9_-], either a key range "start-end" of hex bounds (an empty bound
// is the end of the keyspace) or a name without '-' for a keyspace of one shard; together
// the ranges must cover the keyspace without a gap or an overlap. Their order does not matter.
func NewVitess(cfg Vitess) (*VitessKeyspace, error) {
	cfg.vindexLine, cfg.shardLines = 0, nil
	return newVitess(cfg)
}

func newVitess(cfg Vitess) (*VitessKeyspace, error) {
	i := slices.Index(VitessVindexes, cfg.Vindex)
	if i < 0 {
		return nil, configErr("vitess", cfg.vindexLine, "vindex type %q: not reproduced here (%s)", cfg.Vindex, strings.Join(VitessVindexes, ", "))
	}
	k := &VitessKeyspace{kind: vindexKind(i), names: slices.Clone(cfg.Shards)}
	if err := k.partition(&cfg); err != nil {
		return nil, err
	}
	return k, nil
}

// vitessShard is a shard's key range: raw bounds as their hex decodes, and whether it has one.
type vitessShard struct {
	index      int
	start, end string
	ranged     bool
}

// partition checks the shards as Vitess does and builds the lookup table.
func (k *VitessKeyspace) partition(cfg *Vitess) error {
	line := func(i int) int {
		if i < len(cfg.shardLines) {
			return cfg.shardLines[i]
		}
		return 0
	}
	last := 0
	if n := len(cfg.shardLines); n > 0 {
		last = cfg.shardLines[n-1]
	}
	if len(k.names) == 0 {
		return configErr("vitess", last, "no shards")
	}
	shards := make([]vitessShard, len(k.names))
	seen := make(map[string]int, len(k.names))
	for i, name := range k.names {
		s, err := vitessShardOf(name)
		if err != nil {
			return configErr("vitess", line(i), "shard %q: %v", name, err)
		}
		if j, dup := seen[name]; dup {
			return configErr("vitess", line(i), "shard %q is listed twice (also shard %d)", name, j)
		}
		seen[name] = i
		s.index = i
		shards[i] = s
	}
	// OrderAndCheckPartitions, srv_keyspace.go:688: sorted by key range (start, an empty one
	// first; then end, an empty one last), the first must start at the minimum and the last
	// end at the maximum, as written (raw bounds), and each must end where the next starts
	// (normalized bounds); shards without a key range may not sit next to one with it.
	slices.SortStableFunc(shards, func(a, b vitessShard) int {
		if c := vitessStartCompare(a, b); c != 0 {
			return c
		}
		return vitessEndCompare(a, b)
	})
	first, lastShard := shards[0], shards[len(shards)-1]
	if first.ranged && first.start != "" {
		return configErr("vitess", line(first.index), "the keyspace does not start with the min key: shard %q starts the sorted list", k.names[first.index])
	}
	if lastShard.ranged && lastShard.end != "" {
		return configErr("vitess", line(lastShard.index), "the keyspace does not end with the max key: shard %q ends the sorted list", k.names[lastShard.index])
	}
	for i := 0; i+1 < len(shards); i++ {
		a, b := shards[i], shards[i+1]
		switch {
		case a.ranged != b.ranged:
			return configErr("vitess", line(b.index), "shards %q and %q: one has a key range and the other none", k.names[a.index], k.names[b.index])
		case !a.ranged:
			// Custom sharding: OrderAndCheckPartitions accepts it, and vtgate then sends every
			// keyspace id to whichever of them sorts first, among equals.
			return configErr("vitess", line(b.index), "shards %q and %q have no key range: a keyspace of several shards needs key ranges", k.names[a.index], k.names[b.index])
		case vitessComplete(a) || vitessComplete(b) || vitessNorm(a.end) != vitessNorm(b.start):
			return configErr("vitess", line(b.index), "a gap or an overlap: shard %q ends at %q, shard %q starts at %q",
				k.names[a.index], hex.EncodeToString([]byte(a.end)), k.names[b.index], hex.EncodeToString([]byte(b.start)))
		}
	}
	// The shards that own keyspace ids: every range that is not empty once normalized
	// (80-8000 holds nothing: KeyRangeContains compares normalized bounds).
	var empty []int32
	for _, s := range shards {
		if !s.ranged || vitessComplete(s) || s.end == "" || vitessNorm(s.start) < vitessNorm(s.end) {
			k.starts = append(k.starts, vitessNorm(s.start))
			k.owners = append(k.owners, int32(s.index))
		} else {
			empty = append(empty, int32(s.index))
		}
	}
	slices.Sort(empty) // as listed
	k.order = append(slices.Clone(k.owners), empty...)
	return nil
}

// vitessShardOf reads a shard name as topo.ValidateShardName does (shard.go:87): a name
// (validateObjectName: 1 to 64 characters of [A-Za-z0-9_-]) with a '-' is a key range of two
// hex bounds; the end, when not empty, must be above the start compared as written.
func vitessShardOf(name string) (vitessShard, error) {
	if name == "" {
		return vitessShard{}, errorf("empty name")
	}
	if len(name) > 64 {
		return vitessShard{}, errorf("name %q is too long (over 64 bytes)", name)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return vitessShard{}, errorf("invalid character %q in the name", string(c))
		}
	}
	startHex, endHex, ranged := strings.Cut(name, "-")
	if !ranged {
		return vitessShard{}, nil
	}
	if strings.Contains(endHex, "-") {
		return vitessShard{}, errorf("a shard name can only contain one '-'")
	}
	start, err := hex.DecodeString(startHex)
	if err != nil {
		return vitessShard{}, errorf("start %q: %v", startHex, err)
	}
	end, err := hex.DecodeString(endHex)
	if err != nil {
		return vitessShard{}, errorf("end %q: %v", endHex, err)
	}
	if len(end) > 0 && string(start) >= string(end) {
		return vitessShard{}, errorf("out of order keys: %x is not strictly smaller than %x", start, end)
	}
	return vitessShard{start: string(start), end: string(end), ranged: true}, nil
}

// vitessNorm removes trailing zero bytes (key.Normalize): -80, 00-80 and 0000-8000 are one
// range to Vitess.
func vitessNorm(s string) string { return strings.TrimRight(s, "\x00") }

func vitessComplete(s vitessShard) bool {
	return !s.ranged || vitessNorm(s.start) == "" && vitessNorm(s.end) == ""
}

// vitessStartCompare and vitessEndCompare are key.KeyRangeStartCompare and EndCompare: no key
// range or an empty start is the minimum, no key range or an empty end the maximum.
func vitessStartCompare(a, b vitessShard) int {
	am, bm := !a.ranged || vitessNorm(a.start) == "", !b.ranged || vitessNorm(b.start) == ""
	switch {
	case am && bm:
		return 0
	case am:
		return -1
	case bm:
		return 1
	}
	return strings.Compare(vitessNorm(a.start), vitessNorm(b.start))
}

func vitessEndCompare(a, b vitessShard) int {
	am, bm := !a.ranged || vitessNorm(a.end) == "", !b.ranged || vitessNorm(b.end) == ""
	switch {
	case am && bm:
		return 0
	case am:
		return 1
	case bm:
		return -1
	}
	return strings.Compare(vitessNorm(a.end), vitessNorm(b.end))
}

// KeyspaceID appends the keyspace id that the vindex maps value to, and returns the extended
// slice, or an error wrapping ErrNoKeyspaceID or ErrNotReproduced. It allocates nothing when
// dst has room for 16 bytes (binary: the value's length).
func (k *VitessKeyspace) KeyspaceID(dst []byte, value string) ([]byte, error) {
	var buf [16]byte
	id, isValue, err := k.keyspaceID(&buf, value)
	switch {
	case err != nil:
		return dst, vitessValueErr(k, value, err)
	case isValue:
		return append(dst, value...), nil
	}
	return append(dst, id...), nil
}

// keyspaceID returns the keyspace id of value in buf; for binary, whose keyspace id is the
// value itself, it returns nil and binary true.
func (k *VitessKeyspace) keyspaceID(buf *[16]byte, value string) (id []byte, isValue bool, err error) {
	switch k.kind {
	case vindexHash, vindexNumeric, vindexReverseBits:
		n, ok := vitessInteger(value, k.kind == vindexHash)
		if !ok {
			return nil, false, ErrNoKeyspaceID
		}
		switch k.kind {
		case vindexHash:
			n = desZeroKey(n) // hash.go vhash
		case vindexReverseBits:
			n = bits.Reverse64(n) // reverse_bits.go reverse
		}
		binary.BigEndian.PutUint64(buf[:8], n)
		return buf[:8], false, nil
	case vindexXXHash:
		// xxhash.go vXXHash: XXH64 of the bytes, little-endian.
		binary.LittleEndian.PutUint64(buf[:8], keyhash.XXH64(value))
		return buf[:8], false, nil
	case vindexBinaryMD5:
		return keyhash.DigestMD5.Append(buf[:0], value), false, nil
	case vindexBinary:
		return nil, true, nil
	}
	id, err = vitessUnicodeLoose(buf, value, k.kind == vindexUnicodeLooseMD5)
	return id, false, err
}

// owner returns the index in starts of value's shard, or an error.
func (k *VitessKeyspace) owner(value string) (int, error) {
	var buf [16]byte
	id, isValue, err := k.keyspaceID(&buf, value)
	switch {
	case err != nil:
		return 0, err
	case isValue:
		return vitessOwner(k.starts, value), nil
	}
	return vitessOwner(k.starts, id), nil
}

func vitessValueErr(k *VitessKeyspace, value string, err error) error {
	if errors.Is(err, ErrNotReproduced) {
		return errorf("%w: %s: %q has a character at or above U+0530, or a combining mark", err, VitessVindexes[k.kind], value)
	}
	return errorf("%w: %s: %q", err, VitessVindexes[k.kind], value)
}

// vitessInteger reads value as the integer vindexes do: an INT64 when strconv.ParseInt reads
// the text (hash takes it as its two's complement, hash.go:118; numeric and reverse_bits cast
// its decimal text, refusing a minus sign), a UINT64 when strconv.ParseUint does, else a
// VARCHAR that MySQL's cast reads (fastparse.ParseUint64: spaces and tabs around decimal
// digits, nothing else, no overflow).
func vitessInteger(value string, signed bool) (uint64, bool) {
	// strconv.ParseInt and ParseUint with base 10, without the error they allocate.
	neg, digits := false, value
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		neg, digits = digits[0] == '-', digits[1:]
	}
	if n, ok := vitessDecimal(digits); ok {
		switch {
		case !neg && (n <= 1<<63-1 || value[0] != '+'):
			return n, true // an INT64, or a UINT64 (ParseUint takes no sign)
		case neg && n == 0:
			return 0, true // -0 is the INT64 0
		case neg && n <= 1<<63:
			return -n, signed // an INT64 below 0: hash takes its two's complement
		}
	}
	// A VARCHAR: fastparse.ParseUint64 without the minus sign.
	i := 0
	for i < len(value) && (value[i] == ' ' || value[i] == '\t') {
		i++
	}
	j := i
	for j < len(value) && '0' <= value[j] && value[j] <= '9' {
		j++
	}
	n, ok := vitessDecimal(value[i:j])
	for j < len(value) && (value[j] == ' ' || value[j] == '\t') {
		j++
	}
	return n, ok && j == len(value)
}

// vitessDecimal reads digits, one at least, as a uint64 without overflow.
func vitessDecimal(digits string) (uint64, bool) {
	if digits == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// vitessUncovered marks a character of vitessWeights whose weights are not reproduced: a
// combining mark, or one that decomposes to one (no weight string is one byte long).
const vitessUncovered = "\xff"

// vitessWeightsOnStack is the most weight bytes hashed from a buffer on the stack: a value
// whose weights are longer (over 682 characters, or 2048 ASCII ones) streams its weights
// through a buffer on the heap.
const vitessWeightsOnStack = 4096

// vitessUnicodeLoose is unicode.go's unicodeHash for the characters of vitessWeights: valid
// UTF-8 or no keyspace id; trailing spaces removed; then the digest of the primary weights,
// each written as 2 big-endian bytes, 3 with the top bit set above 0x7FFF (collate.go
// Hasher.Hash): MD5, or XXH64 written low byte first (XXHashBigEndian.Sum appends the low byte
// first, despite its name). Among those characters a string weighs its characters' weights
// one after another, but for one contraction of CLDR's root order: L or l followed by a middle
// dot (U+00B7, or U+0387, which decomposes to it) weighs as the letter alone
// (testdata/compat/vitess/weights.txt says how that was checked). A character outside them
// is ErrNotReproduced.
func vitessUnicodeLoose(buf *[16]byte, value string, md5Sum bool) ([]byte, error) {
	if !utf8.ValidString(value) {
		return nil, ErrNoKeyspaceID
	}
	value = strings.TrimRight(value, " ")
	var stack [vitessWeightsOnStack]byte
	w, ok := vitessAppendWeights(stack[:0], value)
	if !ok {
		return nil, ErrNotReproduced
	}
	if md5Sum {
		*buf = md5.Sum(w)
		return buf[:16], nil
	}
	binary.LittleEndian.PutUint64(buf[:8], xxhash.Sum64(w))
	return buf[:8], nil
}

// vitessAppendWeights appends the weights of value to dst, false if a character has none
// recorded. It allocates only when dst runs out of room.
func vitessAppendWeights(dst []byte, value string) ([]byte, bool) {
	prev := rune(-1)
	for _, r := range value {
		if r >= rune(len(vitessWeights)) || vitessWeights[r] == vitessUncovered {
			return dst, false
		}
		if (prev == 'L' || prev == 'l') && (r == 0xB7 || r == 0x387) {
			prev = -1 // the dot is part of the letter, and starts nothing
			continue
		}
		dst = append(dst, vitessWeights[r]...)
		prev = r
	}
	return dst, true
}

// ShardOf returns the shard that owns keyspace id ksid: the one whose key range holds it
// (key.GetShardForKeyspaceID), comparing ids with trailing zero bytes removed.
func (k *VitessKeyspace) ShardOf(ksid []byte) string {
	return k.names[k.owners[vitessOwner(k.starts, ksid)]]
}

// vitessOwner returns the index of the last start at or below id, normalized.
func vitessOwner[T string | []byte](starts []string, id T) int {
	n := len(id)
	for n > 0 && id[n-1] == 0 {
		n--
	}
	id = id[:n]
	lo, hi := 0, len(starts) // starts[0] == "" is at or below every id
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if vitessLess(id, starts[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// vitessLess reports whether a sorts before b byte-wise.
func vitessLess[T string | []byte](a T, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// Shard returns the shard of the row whose vindex column holds value, or an error wrapping
// ErrNoKeyspaceID or ErrNotReproduced.
func (k *VitessKeyspace) Shard(value string) (string, error) {
	i, err := k.owner(value)
	if err != nil {
		return "", vitessValueErr(k, value, err)
	}
	return k.names[k.owners[i]], nil
}

// Locate returns the shard of value, or "" when it has none (see Shard for why).
func (k *VitessKeyspace) Locate(value string) string {
	i, err := k.owner(value)
	if err != nil {
		return ""
	}
	return k.names[k.owners[i]]
}

// AppendN appends value's shard and then the following shards in key range order (wrapping
// around; shards whose key range holds nothing last), min(n, shards) in all; nothing when the
// value has no shard. Vitess keeps one copy of a row; the order is for callers that want a
// fallback.
func (k *VitessKeyspace) AppendN(dst []string, value string, n int) []string {
	first, err := k.owner(value)
	if err != nil || n <= 0 {
		return dst
	}
	for i := range min(n, len(k.order)) {
		j := i
		if i < len(k.owners) {
			j = (first + i) % len(k.owners)
		}
		dst = append(dst, k.names[k.order[j]])
	}
	return dst
}

var errVitessChange = errors.New("a keyspace's shards change by resharding, from one complete shard list to another: build a new keyspace from the new list")

// Add refuses: see VitessKeyspace.
func (k *VitessKeyspace) Add(...pool.Node) error {
	return &ConfigError{System: "vitess", Msg: "add: " + errVitessChange.Error(), Err: pool.ErrNode}
}

// Remove refuses: see VitessKeyspace.
func (k *VitessKeyspace) Remove(...string) error {
	return &ConfigError{System: "vitess", Msg: "remove: " + errVitessChange.Error(), Err: pool.ErrNode}
}

// SetWeight refuses: a shard's share is its key range.
func (k *VitessKeyspace) SetWeight(string, int) error {
	return &ConfigError{System: "vitess", Msg: "set weight: a shard's share of the keyspace is its key range", Err: pool.ErrWeight}
}

// Nodes returns the shards as listed, weight 1.
func (k *VitessKeyspace) Nodes() []pool.Node {
	out := make([]pool.Node, len(k.names))
	for i, n := range k.names {
		out[i] = pool.Node{Name: n, Weight: 1}
	}
	return out
}

// Vindex returns the vindex type.
func (k *VitessKeyspace) Vindex() string { return VitessVindexes[k.kind] }

// ParseVitess reads a keyspace's vindex type and shards as JSON:
//
//	{"vindex": "hash", "shards": ["-80", "80-c0", "c0-"]}
//
// "vindex" is the type of the table's primary vindex (its vindexes entry's "type" in the
// VSchema); "shards" the keyspace's serving shards, in any order. A member given twice, or one
// it does not know, is refused.
func ParseVitess(config []byte) (Vitess, error) {
	var cfg Vitess
	root, err := parseJSON("vitess", config)
	if err != nil {
		return cfg, err
	}
	fail := func(line int, format string, args ...any) (Vitess, error) {
		return cfg, configErr("vitess", line, format, args...)
	}
	if root.kind != 'o' {
		return fail(root.line, `want a JSON object: {"vindex": TYPE, "shards": [NAME, ...]}`)
	}
	m, err := jsonMembers("vitess", root, "vindex", "shards")
	if err != nil {
		return cfg, err
	}
	vindex, shards := m["vindex"], m["shards"]
	if vindex == nil || vindex.kind != 's' {
		return fail(root.line, "want \"vindex\": the vindex type, a string")
	}
	cfg.Vindex, cfg.vindexLine = vindex.str, vindex.line
	if shards == nil || shards.kind != 'a' {
		return fail(root.line, "want \"shards\": a list of shard names")
	}
	for _, s := range shards.arr {
		if s.kind != 's' {
			return fail(s.line, "a shard name must be a string")
		}
		cfg.Shards = append(cfg.Shards, s.str)
		cfg.shardLines = append(cfg.shardLines, s.line)
	}
	if len(cfg.Shards) == 0 {
		return fail(shards.line, "no shards")
	}
	return cfg, nil
}
