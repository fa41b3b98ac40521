package compat

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// pymemcache 3.x HashClient: the rule of testdata/compat/pymemcache/README.md, from
// pymemcache/client/hash.py, rendezvous.py and murmur3.py of Debian's python3-pymemcache
// 3.5.2.

var pymemcachePreset = Preset{
	System:  "pymemcache",
	Doc:     `pymemcache HashClient: its servers as JSON, a list of "host:port" strings or [host, port] pairs, or {"servers": [...], other HashClient arguments}`,
	New:     oneClient("pymemcache", ParsePymemcache, NewPymemcache),
	Checked: 19889,
}

// NewPymemcache returns a pool that places keys as pymemcache's HashClient does with its
// default hasher, RendezvousHash: every node (a server's "host:port", as HashClient names
// it) scores PymemcacheScore(key, node), the highest score wins, and of equal scores the
// larger name. The key is the one given to the client, before any key_prefix (the hasher
// never sees the prefix).
//
// The nodes are the distinct names, in order, weight 1 (pymemcache has no weights: a weight
// given to SetWeight has no counterpart there). It is a pool.Rendezvous, so Add and Remove
// move only the keys to or from that node, as HashClient's add_server and remove_server do.
func NewPymemcache(servers []string) (pool.Pool, error) {
	var nodes []pool.Node
	for i, s := range servers {
		if s == "" {
			return nil, configErr("pymemcache", 0, "server %d: an empty name", i)
		}
		if !slices.ContainsFunc(nodes, func(n pool.Node) bool { return n.Name == s }) { // a second listing is the same node
			nodes = append(nodes, pool.Node{Name: s, Weight: 1})
		}
	}
	if len(nodes) == 0 {
		return nil, configErr("pymemcache", 0, "no servers: HashClient fails every key with 'All servers seem to be down right now'")
	}
	p, err := pool.NewRendezvous(nodes, pool.RendezvousOptions{KeyScore: PymemcacheScore, LargerNameWins: true})
	if err != nil {
		return nil, poolErr("pymemcache", 0, err)
	}
	return p, nil
}

// PymemcacheScore is the score pymemcache's RendezvousHash gives node for key: MurmurHash3
// (x86, 32 bits, seed 0) of the text node + "-" + key as pymemcache's own murmur3_32 reads a
// Python str: one byte per character, the low 8 bits of its code point, and the number of
// characters as the length. So an ASCII key hashes as its bytes, and "é" (U+00E9) as the
// byte 0xE9. Text that is not valid UTF-8 is read with each invalid byte as a character of
// that value (what Python's surrogateescape decoding gives, whose low 8 bits are the byte).
// It never allocates.
func PymemcacheScore(key, node string) uint64 {
	var m keyhash.Murmur3Stream
	murmur3Chars(&m, node)
	m.Add('-')
	murmur3Chars(&m, key)
	return uint64(m.Sum32())
}

// murmur3Chars feeds text to m one character per byte: the low 8 bits of each code point,
// an invalid UTF-8 byte standing for itself.
func murmur3Chars(m *keyhash.Murmur3Stream, s string) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			r = rune(s[i])
		}
		m.Add(byte(r))
		i += size
	}
}

// pymemcacheArgs are HashClient's constructor arguments besides servers, which place no key
// (hasher, the one that would, cannot be written in JSON).
var pymemcacheArgs = []string{"serde", "serializer", "deserializer", "connect_timeout", "timeout", "no_delay",
	"socket_module", "socket_keepalive", "key_prefix", "max_pool_size", "pool_idle_timeout", "lock_generator",
	"retry_attempts", "retry_timeout", "dead_timeout", "use_pooling", "ignore_exc", "allow_unicode_keys",
	"default_noreply", "encoding", "tls_context"}

// ParsePymemcache reads HashClient's servers written as JSON: a list whose entries are
// "host:port" strings (normalize_server_spec: no ':' or a trailing ']' means port 11211,
// "[v6]:port" loses its brackets, "unix:path" and "/path" are socket paths) or [host, port]
// pairs; or an object {"servers": [...]} with HashClient's other keyword arguments, which it
// checks by name and ignores (none of them places a key). It returns the node names
// HashClient gives the servers ("host:port", or the path), in order.
func ParsePymemcache(text []byte) ([]string, error) {
	v, err := parseJSON("pymemcache", text)
	if err != nil {
		return nil, err
	}
	list := v
	if v.kind == 'o' {
		list = nil
		for _, m := range v.obj {
			switch {
			case m.key == "servers":
				list = m.val
			case m.key == "hasher":
				return nil, configErr("pymemcache", m.line, "hasher: only the default RendezvousHash is reproduced (a class cannot be written in JSON)")
			case !slices.Contains(pymemcacheArgs, m.key):
				return nil, configErr("pymemcache", m.line, "%q is no argument of HashClient", m.key)
			}
		}
		if list == nil {
			return nil, configErr("pymemcache", v.line, "no servers")
		}
	}
	if list.kind != 'a' {
		return nil, configErr("pymemcache", list.line, "the servers must be a list, not %s", list.kindName())
	}
	var names []string
	for i, s := range list.arr {
		name, err := pymemcacheServer(s)
		if err != nil {
			return nil, configErr("pymemcache", s.line, "server %d: %v", i, err)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, configErr("pymemcache", list.line, "no servers: HashClient fails every key with 'All servers seem to be down right now'")
	}
	return names, nil
}

// pymemcacheServer returns the node name HashClient gives a server.
func pymemcacheServer(s *jsonValue) (string, error) {
	switch s.kind {
	case 'a':
		if len(s.arr) != 2 {
			return "", errorf("a server pair is [host, port], not %d values", len(s.arr))
		}
		host, port := s.arr[0], s.arr[1]
		if host.kind != 's' {
			return "", errorf("the host of a pair must be a string")
		}
		switch port.kind {
		case 'n':
			p, err := strconv.ParseInt(string(port.num), 10, 64)
			if err != nil {
				return "", errorf("the port %s is not an integer", excerpt(string(port.num)))
			}
			return host.str + ":" + strconv.FormatInt(p, 10), nil
		case 's':
			return host.str + ":" + port.str, nil // '%s:%s' % server
		}
		return "", errorf("the port of a pair must be a number or a string")
	case 's':
		return pymemcacheSpec(s.str)
	}
	return "", errorf("a server is a string or a [host, port] pair, not %s", s.kindName())
}

// pymemcacheSpec is normalize_server_spec of a string, then the node name of the result.
func pymemcacheSpec(s string) (string, error) {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		return path, nil
	}
	if strings.HasPrefix(s, "/") {
		return s, nil
	}
	host, port := s, int64(11211)
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.HasSuffix(s, "]") {
		var err error
		host = s[:i]
		if port, err = pythonInt(s[i+1:]); err != nil {
			return "", err
		}
	}
	if strings.HasPrefix(host, "[") {
		host = strings.Trim(host, "[]")
	}
	return host + ":" + strconv.FormatInt(port, 10), nil
}

// pythonInt reads a port as Python's int() does for plain text: ASCII digits with an
// optional sign, surrounding whitespace and single underscores between digits. It refuses
// the other digits int() takes (other scripts' digits), which this package does not read.
func pythonInt(s string) (int64, error) {
	t := strings.Trim(s, " \t\n\r\v\f")
	digits := strings.TrimLeft(t, "+-")
	if len(t)-len(digits) > 1 || digits == "" || digits[0] == '_' || digits[len(digits)-1] == '_' || strings.Contains(digits, "__") {
		return 0, errorf("ValueError: invalid literal for int() with base 10: %q", excerpt(s))
	}
	n, err := strconv.ParseInt(t[:len(t)-len(digits)]+strings.ReplaceAll(digits, "_", ""), 10, 64)
	if err != nil {
		return 0, errorf("ValueError: invalid literal for int() with base 10: %q", excerpt(s))
	}
	return n, nil
}
