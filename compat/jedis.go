package compat

import (
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

var jedisPreset = Preset{
	System: "jedis",
	Doc:    `a Jedis ShardedJedis as JSON: {"hashing": "MURMUR_HASH"|"MD5", "keyTagPattern": null|"...", "jedis": "3.10.0", "shards": [{"host", "port", "name", "weight"}, ...]}`,
	New: func(config []byte, name string) (pool.Pool, error) {
		if name != "" {
			return nil, configErr("jedis", 0, "a shard list holds one pool: no name to pick (got %q)", name)
		}
		c, err := ParseJedis(config)
		if err != nil {
			return nil, err
		}
		return NewJedis(c)
	},
	Checked: 84000,
}

// JedisConfig is what a ShardedJedis (or ShardedJedisPool) is built from: the JedisShardInfo
// list, the Hashing and the key-tag pattern.
type JedisConfig struct {
	// Shards in list order: an unnamed shard's points are named by its position in it.
	Shards []JedisShard
	// Hashing is "MURMUR_HASH" (Jedis's default, also for "") or "MD5".
	Hashing string
	// KeyTagPattern is the key-tag pattern passed to the constructor, "" for none (Jedis's
	// default: the whole key is hashed). Jedis offers JedisDefaultKeyTag but applies it only
	// when given. Patterns of the documented subset are accepted (see ParseJedis).
	KeyTagPattern string
	// OldNaming names a named shard's points name*<weight><n>, as Jedis 2.0 to 2.9.3 did;
	// false is name*<n>, Jedis 2.10 and later (3.x included).
	OldNaming bool
}

// JedisShard is one JedisShardInfo.
type JedisShard struct {
	Host string
	Port int
	// Name is the shard's name; "" is a shard without one, whose points are named by its
	// position and whose node is named "host:port".
	Name string
	// Weight is Jedis's weight: 160*Weight points, computed in Java int arithmetic, so
	// weights of 0 or less, and those whose product wraps to 0 or less, give no points (the
	// parser sets Jedis's default of 1 when none is given).
	Weight int
	// Line is where the shard is, for errors; 0 when built in code.
	Line int
}

// NewJedis returns a pool that places keys as Jedis's ShardedJedis (Sharded.getShardInfo of
// a String key) does with config c. It is a pool.Ring whose points are Jedis's: 160 per unit
// of weight, named "SHARD-<i>-NODE-<n>" for an unnamed shard at position i, "<name>*<n>" (or
// "<name>*<weight><n>" with OldNaming) for a named one, each at the hash of its UTF-8 bytes:
// MurmurHash64A with seed 0x1234ABCD ordered as a signed long, or the first four bytes of MD5
// read little-endian; on equal points the one put last wins (TreeMap.put); a key goes to the
// first point at or after the hash of its tag (or of itself), else to the smallest point.
//
// The nodes are the shards that own points, named by their names, or "host:port" when
// unnamed; shards that share a name are one node (Jedis accepts them; at every shared point
// the later one wins). A key is hashed as its Go string's bytes, which is what Jedis hashes for
// every key that is valid UTF-8 (Jedis cannot carry other keys as Strings faithfully; its
// binary API hashes raw bytes and ignores the key tag).
//
// Changes keep the list's order. Remove takes a shard's points away but keeps its place, so
// unnamed shards after it keep their names and only its keys move (Jedis has no removal: a
// new ShardedJedis without the shard would rename every unnamed shard after it); Add of a
// shard the list has brings it back in place, of another appends a named shard; SetWeight
// changes the weight of every shard of that name (under OldNaming that renames its points, so
// all its keys may move, as Jedis does).
func NewJedis(c JedisConfig) (pool.Pool, error) {
	var point func(string) uint64
	switch c.Hashing {
	case "", "MURMUR_HASH":
		point = jedisMurmur
	case "MD5":
		point = jedisMD5
	default:
		return nil, configErr("jedis", 0, "hashing %q: Jedis has MURMUR_HASH and MD5", c.Hashing)
	}
	hash := point
	if c.KeyTagPattern != "" {
		tag, err := parseKeyTag(c.KeyTagPattern)
		if err != nil {
			return nil, configErr("jedis", 0, "key tag pattern %q is outside the subset this package runs without regexp: %v", c.KeyTagPattern, err)
		}
		hash = func(key string) uint64 { return point(tag.apply(key)) }
	}
	lines, nodes, initial, err := jedisLines(c)
	if err != nil {
		return nil, err
	}
	p, err := pool.NewRing(nodes, pool.RingOptions{
		Hash: hash,
		Points: func(dst []pool.RingPoint, nodes []pool.Node) []pool.RingPoint {
			return jedisPoints(dst, lines, initial, c.OldNaming, point, nodes)
		},
		Ties: pool.TieLastPoint,
	})
	if err != nil {
		return nil, poolErr("jedis", 0, err)
	}
	return p, nil
}

// jedisLines validates the shards of c and returns them as lines, the nodes (the shards
// with points, one per name) and each node's weight.
func jedisLines(c JedisConfig) ([]jedisLine, []pool.Node, map[string]int, error) {
	if len(c.Shards) == 0 {
		return nil, nil, nil, configErr("jedis", 0, "no shards: Jedis fails every key (NoSuchElementException)")
	}
	lines := make([]jedisLine, len(c.Shards))
	isUnnamed := map[string]bool{} // node name -> whether its shards are unnamed
	initial := map[string]int{}    // node name -> its weight as a node
	var nodes []pool.Node
	total := 0
	for i, s := range c.Shards {
		if int64(s.Weight) != int64(int32(s.Weight)) {
			return nil, nil, nil, configErr("jedis", s.Line, "shard %d: weight %d is not a Java int", i, s.Weight)
		}
		l := jedisLine{name: s.Name, node: s.Name, weight: s.Weight, points: int(160 * int32(s.Weight))}
		if s.Name == "" {
			if s.Host == "" {
				return nil, nil, nil, configErr("jedis", s.Line, "shard %d has neither a name nor a host", i)
			}
			l.node, l.unnamed = s.Host+":"+strconv.Itoa(s.Port), true
		}
		if u, ok := isUnnamed[l.node]; ok && u != l.unnamed {
			return nil, nil, nil, configErr("jedis", s.Line, "shard %d: %q is both a shard's name and an unnamed shard's address: name the unnamed one", i, l.node)
		}
		isUnnamed[l.node] = l.unnamed
		if l.points > 0 && s.Weight > pool.MaxWeight {
			return nil, nil, nil, configErr("jedis", s.Line, "shard %d: weight %d: Jedis's 160*weight overflows to %d points, which this preset does not reproduce (weights up to %d)", i, s.Weight, l.points, pool.MaxWeight)
		}
		if l.points > 0 {
			if total += l.points; total > maxPoints {
				return nil, nil, nil, limitErr("jedis", s.Line, "points", total)
			}
			if _, ok := initial[l.node]; !ok {
				nodes = append(nodes, pool.Node{Name: l.node})
			}
			initial[l.node] = s.Weight
		}
		lines[i] = l
	}
	if len(nodes) == 0 {
		return nil, nil, nil, configErr("jedis", 0, "no shard has points (every weight is 0 or less, or overflows): Jedis fails every key (NoSuchElementException)")
	}
	for i := range nodes {
		nodes[i].Weight = initial[nodes[i].Name]
	}
	return lines, nodes, initial, nil
}

// jedisLine is a shard as the point generator reads it.
type jedisLine struct {
	name    string // Jedis's name, "" when unnamed
	node    string // the node's name
	unnamed bool
	weight  int // Jedis's weight
	points  int // int32(160*weight)
}

// jedisMurmur orders MurmurHash64A as a signed long: the sign bit flipped keeps the order of
// the signed values as unsigned ones.
func jedisMurmur(s string) uint64 {
	return keyhash.MurmurHash64A(s, keyhash.JedisMurmurSeed) ^ 1<<63
}

// jedisMD5 moves the 32-bit position to the top bits, where the ring index looks.
func jedisMD5(s string) uint64 { return uint64(keyhash.JedisMD5(s)) << 32 }

// jedisPoints makes Sharded.initialize's points for the membership: the list's shards in
// order (those whose node is not a member keep their place but put no point), then members
// the list does not have as named shards. A member keeps each of its shards' own weights until
// SetWeight gives it another.
func jedisPoints(dst []pool.RingPoint, lines []jedisLine, initial map[string]int, old bool, point func(string) uint64, nodes []pool.Node) []pool.RingPoint {
	at := make(map[string]int, len(nodes))
	for i, n := range nodes {
		at[n.Name] = i
	}
	listed := make(map[string]bool, len(lines))
	total := 0 // checked as it grows: the whole sum can pass a 32-bit int
	for _, l := range lines {
		listed[l.node] = true
		if j, ok := at[l.node]; ok {
			if w := nodes[j].Weight; w != initial[l.node] {
				l.points = 160 * w
			}
			if total += max(l.points, 0); total > maxPoints {
				return tooManyPoints()
			}
		}
	}
	for _, n := range nodes {
		if !listed[n.Name] {
			if total += 160 * n.Weight; total > maxPoints {
				return tooManyPoints()
			}
		}
	}
	var buf []byte
	put := func(i int, l jedisLine, node int) {
		for n := range l.points {
			buf = buf[:0]
			switch {
			case l.unnamed:
				buf = append(buf, "SHARD-"...)
				buf = strconv.AppendInt(buf, int64(i), 10)
				buf = append(buf, "-NODE-"...)
			case old:
				buf = append(buf, l.name...)
				buf = append(buf, '*')
				buf = strconv.AppendInt(buf, int64(l.weight), 10)
			default:
				buf = append(buf, l.name...)
				buf = append(buf, '*')
			}
			buf = strconv.AppendInt(buf, int64(n), 10)
			dst = append(dst, pool.RingPoint{Node: node, Pos: point(string(buf))})
		}
	}
	for i, l := range lines {
		j, ok := at[l.node]
		if !ok {
			continue
		}
		if w := nodes[j].Weight; w != initial[l.node] {
			l.weight, l.points = w, 160*w
		}
		put(i, l, j)
	}
	i := len(lines)
	for j, n := range nodes {
		if !listed[n.Name] {
			put(i, jedisLine{name: n.Name, node: n.Name, weight: n.Weight, points: 160 * n.Weight}, j)
			i++
		}
	}
	return dst
}

// ParseJedis reads a ShardedJedis configuration as JSON (the form of testdata/compat/jedis):
//
//	{
//	  "jedis": "3.10.0",                  optional: the release, which picks the naming
//	  "naming": "name*n",                 optional: "name*n" (2.10+) or "name*weight+n" (older)
//	  "hashing": "MURMUR_HASH",           optional: MURMUR_HASH (default) or MD5
//	  "keyTagPattern": null,              optional: null (default) or a pattern
//	  "shards": [{"host": "10.0.0.1", "port": 6379, "name": "a", "weight": 1}, ...]
//	}
//
// A shard's name may be null or absent (unnamed); port defaults to 6379, weight to 1. The key
// tag pattern must be of the subset [^]prefix(body)suffix, where prefix and suffix are
// literal ASCII and body is '.' or a negated class [^...] with + or * and an optional ?; it
// covers Jedis's DEFAULT_KEY_TAG_PATTERN `\{(.+?)\}` and patterns such as `^([^:]+):`. Unknown
// fields are refused, so that a misspelt one is not ignored.
func ParseJedis(config []byte) (JedisConfig, error) {
	var c JedisConfig
	fail := func(line int, format string, args ...any) (JedisConfig, error) {
		return JedisConfig{}, configErr("jedis", line, format, args...)
	}
	v, err := parseJSON("jedis", config)
	if err != nil {
		return c, err
	}
	if v.kind != 'o' {
		return fail(v.line, "want a JSON object, not %s", v.kindName())
	}
	version, naming := "", ""
	var versionLine, patternLine int
	var shards *jsonValue
	seen := map[string]bool{}
	for _, m := range v.obj {
		if seen[m.key] {
			return fail(m.line, "%q given twice", m.key)
		}
		seen[m.key] = true
		str := func() (string, bool) { return m.val.str, m.val.kind == 's' }
		switch m.key {
		case "jedis":
			s, ok := str()
			if !ok {
				return fail(m.line, `"jedis" is %s, not a release such as "3.10.0"`, m.val.kindName())
			}
			version, versionLine = s, m.line
		case "naming":
			s, ok := str()
			if !ok {
				return fail(m.line, `"naming" is %s, not "name*n" or "name*weight+n"`, m.val.kindName())
			}
			switch {
			case strings.HasPrefix(s, "name*n"):
				naming = "new"
			case strings.HasPrefix(s, "name*weight+n"):
				naming = "old"
			default:
				return fail(m.line, `naming %q: want "name*n" (Jedis 2.10 and later) or "name*weight+n" (before)`, s)
			}
		case "hashing":
			s, ok := str()
			if !ok || s != "MURMUR_HASH" && s != "MD5" {
				return fail(m.line, `hashing: want "MURMUR_HASH" or "MD5"`)
			}
			c.Hashing = s
		case "keyTagPattern":
			if m.val.kind == 'z' {
				break
			}
			s, ok := str()
			if !ok || s == "" {
				return fail(m.line, "keyTagPattern: want null or a pattern")
			}
			c.KeyTagPattern, patternLine = s, m.line
		case "shards":
			if m.val.kind != 'a' {
				return fail(m.line, `"shards" is %s, not an array`, m.val.kindName())
			}
			shards = m.val
		default:
			return fail(m.line, "unknown field %q", m.key)
		}
	}
	if version != "" {
		old, err := jedisOldNaming(version)
		if err != nil {
			return fail(versionLine, "%v", err)
		}
		if naming != "" && (naming == "old") != old {
			return fail(versionLine, "Jedis %s does not use the naming given", version)
		}
		c.OldNaming = old
	}
	if naming != "" {
		c.OldNaming = naming == "old"
	}
	if c.KeyTagPattern != "" {
		if _, err := parseKeyTag(c.KeyTagPattern); err != nil {
			return fail(patternLine, "key tag pattern %q is outside the subset this package runs without regexp: %v", c.KeyTagPattern, err)
		}
	}
	if shards == nil || len(shards.arr) == 0 {
		return fail(v.line, "no shards: Jedis fails every key (NoSuchElementException)")
	}
	for i, e := range shards.arr {
		s, err := jedisShard(i, e)
		if err != nil {
			return JedisConfig{}, err
		}
		c.Shards = append(c.Shards, s)
	}
	if _, _, _, err := jedisLines(c); err != nil { // the checks of the whole list
		if ce, ok := err.(*ConfigError); ok && ce.Line == 0 {
			ce.Line = shards.line // what no one shard is to blame for: the list
		}
		return JedisConfig{}, err
	}
	return c, nil
}

// jedisShard reads one JedisShardInfo object.
func jedisShard(i int, e *jsonValue) (JedisShard, error) {
	s := JedisShard{Port: 6379, Weight: 1, Line: e.line}
	if e.kind != 'o' {
		return s, configErr("jedis", e.line, "shard %d is %s, not an object", i, e.kindName())
	}
	seen := map[string]bool{}
	for _, m := range e.obj {
		if seen[m.key] {
			return s, configErr("jedis", m.line, "shard %d: %q given twice", i, m.key)
		}
		seen[m.key] = true
		integer := func() (int, error) {
			if m.val.kind != 'n' {
				return 0, configErr("jedis", m.line, "shard %d: %s is %s, not an integer", i, m.key, m.val.kindName())
			}
			n, err := strconv.ParseInt(string(m.val.num), 10, 32)
			if err != nil {
				return 0, configErr("jedis", m.line, "shard %d: %s %s is not a Java int", i, m.key, m.val.num)
			}
			return int(n), nil
		}
		var err error
		switch m.key {
		case "host":
			if m.val.kind != 's' || m.val.str == "" {
				return s, configErr("jedis", m.line, "shard %d: host: want a host name", i)
			}
			s.Host = m.val.str
		case "port":
			s.Port, err = integer()
		case "weight":
			s.Weight, err = integer()
		case "name":
			switch {
			case m.val.kind == 'z':
			case m.val.kind == 's' && m.val.str != "":
				s.Name = m.val.str
			case m.val.kind == 's':
				return s, configErr("jedis", m.line, `shard %d: the name "" is a name to Jedis (points "*0", "*1", ...), but a pool node needs a non-empty one`, i)
			default:
				return s, configErr("jedis", m.line, "shard %d: name is %s, not a string or null", i, m.val.kindName())
			}
		default:
			return s, configErr("jedis", m.line, "shard %d: unknown field %q", i, m.key)
		}
		if err != nil {
			return s, err
		}
	}
	if s.Name == "" && s.Host == "" {
		return s, configErr("jedis", e.line, "shard %d has neither a name nor a host", i)
	}
	return s, nil
}

// jedisOldNaming reports whether a Jedis release names its points name*weight+n: 2.0 to 2.9.x
// (2.9.1 to 2.9.3 came out after 2.10.0 and kept it); 2.10 and later, 3.x included, use
// name*n. Releases before 2.0 named points differently and are refused, as are 4.x and later,
// which have no named or weighted shards.
func jedisOldNaming(v string) (bool, error) {
	parts := strings.SplitN(v, ".", 3)
	major, err1 := strconv.Atoi(parts[0])
	minor := 0
	var err2 error
	if len(parts) > 1 {
		minor, err2 = strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	}
	switch {
	case err1 != nil || err2 != nil:
		return false, errString("jedis " + strconv.Quote(v) + ": want a release such as \"3.10.0\"")
	case major < 2:
		return false, errString("Jedis " + v + " named points by address (shardInfo.toString()): not reproduced")
	case major >= 4:
		return false, errString("Jedis " + v + " has JedisSharding over host:port pairs, without names or weights: use an unnamed shard list of weight 1 with \"jedis\": \"3.10.0\"")
	}
	return major == 2 && minor < 10, nil
}
