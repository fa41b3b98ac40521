package compat

import (
	"regexp"
	"strconv"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// python-memcached (memcache.py) Client: the rule of testdata/compat/python-memcache/README.md,
// from /usr/lib/python3/dist-packages/memcache.py of Debian's python3-memcache 1.59.

var pythonMemcachePreset = Preset{
	System: "python-memcache",
	Doc:    `python-memcached Client: its servers as JSON, a list of "host:port" strings or ["host:port", weight] pairs`,
	New: func(config []byte, name string) (pool.Pool, error) {
		if err := singleConfig("python-memcache", name); err != nil {
			return nil, err
		}
		servers, line, err := parsePythonMemcache(config)
		if err != nil {
			return nil, err
		}
		return newPythonMemcache(servers, line)
	},
	Checked: 21723,
}

// PythonMemcacheServer is one entry of python-memcached's server list: the server string as
// written ("host:port", "inet:host:port", "inet6:[host]:port", "unix:path"), which Locate
// returns, and its weight.
type PythonMemcacheServer struct {
	Name string
	// Weight is the server's number of buckets: python-memcached's default is 1
	// (ParsePythonMemcache writes it); 0 or less gives it none.
	Weight int
}

// NewPythonMemcache returns a pool that places keys as python-memcached's Client does with
// every server up: a list of buckets, each server repeated weight times in list order, and
// the key in bucket PythonMemcacheHash(key) % len(buckets). Only the order and the weights
// place keys, never the names. (A server that is down sends its keys on: Client rehashes
// str(hash) + str(attempt), up to 10 times; a pool has every server up.)
//
// A server listed twice is one node of the pool and takes the buckets of both entries. Add
// appends a server with that weight to the list, Remove removes every entry of a name, and
// SetWeight changes the weight of every entry of a name; each rebuilds the buckets, which
// moves most keys, as set_servers with the changed list does.
func NewPythonMemcache(servers []PythonMemcacheServer) (pool.Pool, error) {
	return newPythonMemcache(servers, 0)
}

// pythonMemcacheHost is _Host's reading of a server string: unix:path, inet6:[host]:port,
// inet:host:port or host:port, the port optional and made of digits, a host without ':'.
// Python's $ also matches before a final line feed.
var pythonMemcacheHost = regexp.MustCompile(`^(?:unix:.*|inet6:\[[^\[\]]+\](?::[0-9]+)?|(?:inet:)?[^:]+(?::[0-9]+)?)\n?$`)

// pythonMemcacheMax bounds the buckets.
const pythonMemcacheMax = 1 << 22

// pythonMemcacheServer returns the list entry of a server.
func pythonMemcacheServer(s PythonMemcacheServer) (server, error) {
	if !pythonMemcacheHost.MatchString(s.Name) {
		return server{}, errorf("ValueError: Unable to parse connection string: %q", excerpt(s.Name))
	}
	if s.Weight > pythonMemcacheMax {
		return server{}, errorf("server %q: weight %d: at most %d buckets here", excerpt(s.Name), s.Weight, pythonMemcacheMax)
	}
	return server{name: s.Name, weight: float64(max(s.Weight, 0))}, nil
}

func newPythonMemcache(servers []PythonMemcacheServer, line int) (pool.Pool, error) {
	list := &serverList{}
	for i, s := range servers {
		e, err := pythonMemcacheServer(s)
		if err != nil {
			return nil, configErr("python-memcache", line, "server %d: %v", i, err)
		}
		list.servers = append(list.servers, e)
	}
	if err := pythonMemcacheCheck(list); err != nil {
		return nil, configErr("python-memcache", line, "%v", err)
	}
	r := &rules{system: "python-memcache", line: line, check: pythonMemcacheCheck,
		fromNode: func(_ *serverList, n pool.Node) (server, error) {
			e, err := pythonMemcacheServer(PythonMemcacheServer{Name: n.Name, Weight: n.Weight})
			if err != nil {
				return server{}, configErr("python-memcache", 0, "%v", err)
			}
			return e, nil
		},
		slots: func(dst []int32, l *serverList) []int32 {
			for e, s := range l.servers {
				for range int(s.weight) {
					dst = append(dst, int32(e))
				}
			}
			return dst
		}}
	return newPool(r, list, pool.RingOptions{}, func(k string) uint64 { return uint64(PythonMemcacheHash(k)) })
}

// pythonMemcacheCheck refuses a list without buckets, and one of more than a pool holds.
func pythonMemcacheCheck(l *serverList) error {
	total := 0.0
	for _, s := range l.servers {
		total += s.weight
	}
	switch {
	case total == 0:
		return errorf("no server has a bucket: _get_server returns None and every command fails")
	case total > pythonMemcacheMax:
		return errorf("%v buckets: at most %d here", total, pythonMemcacheMax)
	}
	return nil
}

// PythonMemcacheHash is python-memcached's serverHashFunction, cmemcache_hash: bits 16..30
// of the CRC-32 (IEEE) of the key, or 1 where they are all 0. The key is what the client
// hashes: a str's UTF-8 bytes. It never allocates.
func PythonMemcacheHash(key string) uint32 {
	return max(keyhash.CRC32.Sum32(key), 1) // Sum32 is (crc32 >> 16) & 0x7fff
}

// ParsePythonMemcache reads python-memcached's server list written as JSON: a list whose
// entries are server strings (weight 1) or ["host:port", weight] pairs, weight an integer.
func ParsePythonMemcache(text []byte) ([]PythonMemcacheServer, error) {
	out, _, err := parsePythonMemcache(text)
	return out, err
}

// parsePythonMemcache is ParsePythonMemcache, also returning the line of the list.
func parsePythonMemcache(text []byte) ([]PythonMemcacheServer, int, error) {
	v, err := parseJSON("python-memcache", text)
	if err != nil {
		return nil, 0, err
	}
	if v.kind != 'a' {
		return nil, 0, configErr("python-memcache", v.line, "want a list of servers, not %s", v.kindName())
	}
	var out []PythonMemcacheServer
	for i, s := range v.arr {
		e := PythonMemcacheServer{Weight: 1}
		switch {
		case s.kind == 's':
			e.Name = s.str
		case s.kind == 'a' && len(s.arr) == 2 && s.arr[0].kind == 's':
			w, err := strconv.Atoi(string(s.arr[1].num))
			if s.arr[1].kind != 'n' || err != nil {
				return nil, 0, configErr("python-memcache", s.line, "server %d: the weight must be an integer (range() refuses anything else)", i)
			}
			e.Name, e.Weight = s.arr[0].str, w
		default:
			return nil, 0, configErr("python-memcache", s.line, "server %d: a server is a string or a [\"host:port\", weight] pair", i)
		}
		if _, err := pythonMemcacheServer(e); err != nil {
			return nil, 0, configErr("python-memcache", s.line, "server %d: %v", i, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, 0, configErr("python-memcache", v.line, "no servers: every command fails")
	}
	return out, v.line, nil
}
