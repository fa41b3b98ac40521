package compat

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// redis-shard 0.3.7 RedisShardAPI: the rule of testdata/compat/redis-shard/README.md, from
// redis_shard/hashring.py and shard.py of github.com/zhihu/redis-shard (113fbeb).

var redisShardPreset = Preset{
	System:  "redis-shard",
	Doc:     `redis-shard RedisShardAPI: its arguments as JSON, {"servers": ["redis://host:port/db?name=NAME", ...], "hash_method": "crc32"|"md5"|"sha1", "keys": "str"|"bytes"}`,
	New:     oneClient("redis-shard", ParseRedisShard, newRedisShard),
	Checked: 15864,
}

// RedisShard is a RedisShardAPI's placement: what NewRedisShard takes.
type RedisShard struct {
	// Servers are the server names (each URL's name parameter), in order.
	Servers []string
	// HashMethod is "crc32", "md5" or "sha1"; "" means crc32.
	HashMethod string
	// BytesKeys says the application passes keys as bytes: redis-shard then hashes them as
	// they are, without hash tags. Otherwise keys are str: the hash tag is taken, and the
	// text hashed as Latin-1.
	BytesKeys bool
	line      int // the line of the servers when read from text
}

// redisShardReplicas is HashRing's replicas, which RedisShardAPI leaves at its default.
const redisShardReplicas = 128

// NewRedisShard returns a pool that places keys as redis-shard's RedisShardAPI does: each
// server name n has 128 points, hash(n + ":" + i) for i in [0, 128), and a key goes to the
// first point strictly above its hash, or to the largest point when none is (HashRing's
// bisect, clamped, never wrapping: pool.RingAfterClamped). Of equal points the later server
// wins. With str keys (the default) the key is first cut to its hash tag
// (RedisShardHashTag), then hashed as Latin-1 text: a key whose text (or tag) has a
// character above U+00FF makes redis-shard raise UnicodeEncodeError, and such a key, or one
// that is not valid UTF-8, is placed here as the bytes key would be.
//
// Positions are 64 bits: the CRC-32 moved to the top bits, or the first 8 bytes of the MD5
// or SHA-1 digest (redis-shard compares the whole 128- or 160-bit digests; two that agree in
// their first 64 bits, odds 2^-64 for a pair, compare equal here). Lookups allocate nothing,
// except for a str key whose hash tag (or whole text) is over 1024 bytes and has a
// character in U+0080..U+00FF: its Latin-1 copy is made on the heap.
//
// The nodes are the names, weight 1 (redis-shard has no weights: a weight given to
// SetWeight changes nothing). Add appends a server, as HashRing.add_node does; Remove
// removes one.
func NewRedisShard(cfg RedisShard) (pool.Pool, error) {
	cfg.line = 0
	return newRedisShard(cfg)
}

// redisShardHash is one of HashRing's hash methods, whose value as a 64-bit position it
// gives of a string (str) and of bytes (bytes). Methods, not function values: a buffer on
// the stack passed through a function value would escape to the heap.
type redisShardHash uint8

const (
	redisShardCRC32 redisShardHash = iota
	redisShardMD5
	redisShardSHA1
)

var redisShardHashes = map[string]redisShardHash{"crc32": redisShardCRC32, "md5": redisShardMD5, "sha1": redisShardSHA1}

func (h redisShardHash) str(s string) uint64 {
	var buf [sha1.Size]byte
	switch h {
	case redisShardMD5:
		return binary.BigEndian.Uint64(keyhash.DigestMD5.Append(buf[:0], s))
	case redisShardSHA1:
		return binary.BigEndian.Uint64(keyhash.DigestSHA1.Append(buf[:0], s))
	}
	return top32(keyhash.CRC32a.Sum32(s))
}

func (h redisShardHash) bytes(b []byte) uint64 {
	switch h {
	case redisShardMD5:
		d := md5.Sum(b)
		return binary.BigEndian.Uint64(d[:8])
	case redisShardSHA1:
		d := sha1.Sum(b)
		return binary.BigEndian.Uint64(d[:8])
	}
	return top32(keyhash.CRC32a.Sum32Bytes(b))
}

func newRedisShard(cfg RedisShard) (pool.Pool, error) {
	method := cfg.HashMethod
	if method == "" {
		method = "crc32"
	}
	h, ok := redisShardHashes[method]
	if !ok {
		return nil, configErr("redis-shard", cfg.line, "hash_method %q: KeyError (crc32, md5 or sha1)", excerpt(method))
	}
	if len(cfg.Servers) == 0 {
		return nil, configErr("redis-shard", cfg.line, "no servers: IndexError in format_servers")
	}
	list := &serverList{}
	for _, name := range cfg.Servers {
		if err := redisShardName(name); err != nil {
			return nil, configErr("redis-shard", cfg.line, "%v", err)
		}
		if list.has(name) {
			return nil, configErr("redis-shard", cfg.line, "server %q: ValueError: server's name config must be unique", excerpt(name))
		}
		list.servers = append(list.servers, server{name: name, weight: 1})
	}
	points := func(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
		var buf []byte
		for e, s := range l.servers {
			for i := range redisShardReplicas {
				buf = strconv.AppendInt(append(appendLatin1(buf[:0], s.name), ':'), int64(i), 10)
				dst = append(dst, pool.RingPoint{Node: e, Pos: h.bytes(buf)})
			}
		}
		return dst
	}
	r := &rules{system: "redis-shard", points: points, line: cfg.line,
		check: func(l *serverList) error {
			if len(l.servers)*redisShardReplicas > 1<<22 {
				return errorf("%d servers: at most %d here", len(l.servers), 1<<22/redisShardReplicas)
			}
			return nil
		},
		fromNode: func(l *serverList, n pool.Node) (server, error) {
			if err := redisShardName(n.Name); err != nil {
				return server{}, configErr("redis-shard", 0, "%v", err)
			}
			return server{name: n.Name, weight: 1}, nil
		}}
	key := func(k string) uint64 { return redisShardKey(h, k, cfg.BytesKeys) }
	return newPool(r, list, pool.RingOptions{Hash: key, Lookup: pool.RingAfterClamped, Ties: pool.TieLastPoint}, nil)
}

// redisShardName refuses a name HashRing cannot encode as Latin-1.
func redisShardName(name string) error {
	if !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r > 0xff }) {
		return errorf("server name %q: UnicodeEncodeError: HashRing encodes names as Latin-1", excerpt(name))
	}
	return nil
}

// appendLatin1 appends the Latin-1 bytes of s, whose characters are all below U+0100.
func appendLatin1(dst []byte, s string) []byte {
	for _, r := range s {
		dst = append(dst, byte(r))
	}
	return dst
}

// RedisShardHashTag returns what redis-shard's RedisShardAPI hashes of a str key
// (get_server_name's re.match(r'.*\{(.*)\}.*', key)): in the key's first line (up to the
// first line feed, which '.' does not cross), the text between the last '{' that a '}'
// follows and the last '}'; the whole key when there is no such pair. So "a{foo}b" and
// "{foo}" hash "foo", "{a}{b}" hashes "b" (the last '{'), "{a}}" hashes "a}", "{}" hashes
// the empty string, and "x\n{a}" hashes whole. It returns a substring of key and never
// allocates. Bytes keys have no tag.
func RedisShardHashTag(key string) string {
	line := key
	if i := strings.IndexByte(key, '\n'); i >= 0 {
		line = key[:i]
	}
	if j := strings.LastIndexByte(line, '}'); j >= 0 {
		if i := strings.LastIndexByte(line[:j], '{'); i >= 0 {
			return line[i+1 : j]
		}
	}
	return key
}

// redisShardLatin1Max is the longest Latin-1 copy of a key made on the stack.
const redisShardLatin1Max = 1024

// redisShardKey returns the position of a key.
func redisShardKey(h redisShardHash, key string, asBytes bool) uint64 {
	if !asBytes && utf8.ValidString(key) {
		tag := RedisShardHashTag(key)
		ascii, latin1 := true, true
		for _, r := range tag {
			ascii = ascii && r < utf8.RuneSelf
			latin1 = latin1 && r <= 0xff
		}
		switch {
		case ascii:
			key = tag // its bytes are its Latin-1
		case latin1:
			var buf [redisShardLatin1Max]byte
			if len(tag) <= len(buf) {
				return h.bytes(appendLatin1(buf[:0], tag))
			}
			return h.bytes(appendLatin1(nil, tag))
		}
		// otherwise redis-shard raises UnicodeEncodeError: placed as the bytes key
	}
	return h.str(key)
}

// redisShardQueryArgs are the URL parameters redis-py's parse_url converts for
// redis.Redis (URL_QUERY_ARGUMENT_PARSERS, python3-redis 4.3.4), besides name; none of them
// places a key.
var redisShardQueryArgs = []string{"db", "health_check_interval", "max_connections", "retry_on_error", "retry_on_timeout",
	"socket_connect_timeout", "socket_keepalive", "socket_timeout", "ssl_check_hostname"}

// ParseRedisShard reads RedisShardAPI's arguments written as JSON: {"servers": [...],
// "hash_method": "crc32"|"md5"|"sha1", "keys": "str"|"bytes"}; keys is ours, and says how the
// application passes keys (str by default). A server is a redis:// URL whose name parameter
// names it (parse_url: the query read with parse_qsl, '+' a space, %XX decoded, the last
// name given counting); the host, port and database place nothing. redis-shard 0.3.7 refuses
// the dict form of its own README (format_servers tests isinstance(type, dict), never true,
// and raises ValueError), and so does this parser.
func ParseRedisShard(text []byte) (RedisShard, error) {
	var cfg RedisShard
	v, err := parseJSON("redis-shard", text)
	if err != nil {
		return cfg, err
	}
	fail := func(line int, format string, args ...any) (RedisShard, error) {
		return cfg, configErr("redis-shard", line, format, args...)
	}
	if v.kind != 'o' {
		return fail(v.line, "want an object of RedisShardAPI's arguments (servers, hash_method, keys), not %s", v.kindName())
	}
	var servers *jsonValue
	for _, m := range v.obj {
		switch m.key {
		case "servers":
			servers = m.val
		case "hash_method":
			if m.val.kind != 's' {
				return fail(m.line, "hash_method must be a string (crc32, md5 or sha1)")
			}
			if _, ok := redisShardHashes[m.val.str]; !ok {
				return fail(m.line, "hash_method %q: KeyError (crc32, md5 or sha1)", excerpt(m.val.str))
			}
			cfg.HashMethod = m.val.str
		case "keys":
			if m.val.kind != 's' || m.val.str != "str" && m.val.str != "bytes" {
				return fail(m.line, `keys must be "str" or "bytes"`)
			}
			cfg.BytesKeys = m.val.str == "bytes"
		case "sentinel", "strict_redis":
			// connections only
		default:
			return fail(m.line, "%q is no argument of RedisShardAPI (servers, hash_method, sentinel, strict_redis; and keys)", m.key)
		}
	}
	if servers == nil {
		return fail(v.line, "no servers")
	}
	cfg.line = servers.line
	if servers.kind != 'a' {
		return fail(servers.line, "ValueError: server's config must be list")
	}
	if len(servers.arr) == 0 {
		return fail(servers.line, "no servers: IndexError in format_servers")
	}
	for i, s := range servers.arr {
		if s.kind != 's' {
			return fail(s.line, "server %d: ValueError: invalid server config (redis-shard 0.3.7 takes only redis:// URLs: its dict form fails)", i)
		}
		name, err := redisShardURLName(s.str)
		if err != nil {
			return fail(s.line, "server %d: %v", i, err)
		}
		if slices.Contains(cfg.Servers, name) {
			return fail(s.line, "server %q: ValueError: server's name config must be unique", excerpt(name))
		}
		if err := redisShardName(name); err != nil {
			return fail(s.line, "%v", err)
		}
		cfg.Servers = append(cfg.Servers, name)
	}
	return cfg, nil
}

// redisShardURLName returns the name of a server URL as parse_url reads it.
func redisShardURLName(u string) (string, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || scheme != "redis" {
		return "", errorf("%q: AssertionError: parse_url takes redis:// URLs", excerpt(u))
	}
	rest, _, _ = strings.Cut(rest, "#")
	netloc, query, _ := strings.Cut(rest, "?")
	netloc, _, _ = strings.Cut(netloc, "/")
	if at := strings.LastIndexByte(netloc, '@'); at >= 0 {
		netloc = netloc[at+1:]
	}
	if i := strings.LastIndexByte(netloc, ':'); i >= 0 && !strings.Contains(netloc[i:], "]") {
		if p := netloc[i+1:]; p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 || strings.ContainsAny(p, "+-") {
				return "", errorf("%q: ValueError: port %q", excerpt(u), excerpt(p))
			}
		}
	}
	name, found := "", false
	for field := range strings.SplitSeq(query, "&") {
		k, val, ok := strings.Cut(field, "=")
		if !ok || val == "" { // parse_qsl drops fields without a value
			continue
		}
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(val)
		if err1 != nil || err2 != nil {
			return "", errorf("%q: a %%-escape this package does not read as Python's unquote does", excerpt(u))
		}
		switch {
		case key == "name":
			name, found = value, true
		case !slices.Contains(redisShardQueryArgs, key):
			return "", errorf("%q: parameter %q: redis.Redis takes no such argument", excerpt(u), excerpt(key))
		}
	}
	if !found {
		return "", errorf("%q: KeyError: 'name': the URL names no server", excerpt(u))
	}
	return name, nil
}
