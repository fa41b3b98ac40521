// Command ketama checks the Go packages that claim compatibility with ketama-family
// placement against the golden vectors of testdata/compat (made by running libmemcached,
// twemproxy, spymemcached and npm hashring), and times a lookup through compat presets (also
// the Python clients, redis-shard and grpc-go ring_hash)
// next to them and to pool.Ring with default options, in one run:
//
//	go -C benchmarks/peers run ./ketama [-testdata ../../testdata/compat]
//
// A peer is exact on a file when it puts every one of its 2000 keys on the recorded server.
// Timing is the lower quartile of many short interleaved rounds (see measure.Race) on a
// shared machine: read ratios, not absolutes.
package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/serialx/hashring"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

func main() {
	dir := flag.String("testdata", "../../testdata/compat", "the directory of the compatibility vectors")
	rounds := flag.Int("rounds", 31, "interleaved timing rounds; the lower quartile is reported")
	flag.Parse()
	if err := run(os.Stdout, *dir, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "ketama:", err)
		os.Exit(1)
	}
}

// A peer places keys on the servers of a vector file, named as the file names them.
type peer struct {
	name  string
	claim string
	// build returns the peer's lookup for the servers (names as the system hashes them).
	build func(servers []string) (func(key string) string, error)
}

var peers = []peer{
	{
		name:  "serialx/hashring",
		claim: `"built using the same algorithm as libketama", "a port of Python hash_ring"`,
		build: func(servers []string) (func(string) string, error) {
			r := hashring.New(servers)
			return func(k string) string { s, _ := r.GetNode(k); return s }, nil
		},
	},
}

// claimed are the vector files each claim covers: libketama's continuum (libmemcached's
// weighted ketama, twemproxy's ketama, spymemcached's KETAMA_HASH locator) and Python
// hash_ring's (npm hashring's hash_ring mode), all of servers of equal weight.
var claimed = []string{
	"libmemcached/weighted-md5-3.txt", "libmemcached/weighted-md5-5.txt", "libmemcached/weighted-md5-10.txt",
	"twemproxy/ketama-md5-3.txt", "twemproxy/ketama-md5-5.txt", "twemproxy/ketama-md5-10.txt",
	"spymemcached/ketama-ketama-spy-3.txt", "spymemcached/ketama-ketama-spy-10.txt",
	"hashring/list-3.txt", "hashring/list-3-hash_ring.txt", "hashring/list-10-hash_ring.txt",
}

// unreachable are packages that claim the same compatibility but that the module proxy of
// the machine that ran this did not serve; ../byhand measures them, brought by hand.
var unreachable = []struct{ module, claim string }{
	{"github.com/dgryski/go-ketama", "compatible with Algorithm::ConsistentHash::Ketama (libketama)"},
	{"github.com/rckclmbr/goketama", "a gomemcache ServerSelector using the ketama selection algorithm"},
	{"github.com/ngerakines/ketama", "libketama-style consistent hashing"},
	{"github.com/wrighty/ketama", "a port of libketama"},
}

func run(w io.Writer, dir string, rounds int) error {
	keys, err := readKeys(filepath.Join(dir, "keys.txt"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Machine: %s\n\n", measure.Machine())
	fmt.Fprintf(w, "Agreement with the vectors (2000 keys a file; exact = every key on the recorded server):\n\n")
	var t measure.Table
	t.Header = []string{"package", "vector file", "keys placed as recorded", "exact"}
	for _, p := range peers {
		for _, file := range claimed {
			names, owners, err := readVectors(filepath.Join(dir, file))
			if err != nil {
				return err
			}
			locate, err := p.build(names)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", p.name, file, err)
			}
			agree := 0
			for k, s := range owners {
				if locate(keys[k]) == names[s] {
					agree++
				}
			}
			exact := "no"
			if agree == len(owners) {
				exact = "yes"
			}
			t.Add(p.name, file, fmt.Sprintf("%d (%.1f%%)", agree, 100*float64(agree)/float64(len(owners))), exact)
		}
	}
	for _, u := range unreachable {
		t.Add(u.module, "not served by the module proxy: see benchmarks/peers/byhand", "", "not run")
	}
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nWhat each claims:")
	for _, p := range peers {
		fmt.Fprintf(w, "- %s: %s\n", p.name, p.claim)
	}
	for _, u := range unreachable {
		fmt.Fprintf(w, "- %s: %s\n", u.module, u.claim)
	}
	return timing(w, dir, rounds)
}

// timing races a lookup through each preset, the engine with default options and the peers,
// on ten servers each.
func timing(w io.Writer, dir string, rounds int) error {
	type contestant struct {
		name string
		l    measure.Locator
	}
	var cs []contestant
	for _, c := range []struct{ system, file string }{
		{"twemproxy", "twemproxy/ketama-md5-10.yml"}, {"twemproxy", "twemproxy/ketama-fnv1a_64-10.yml"},
		{"twemproxy", "twemproxy/modula-fnv1a_64-10.yml"}, {"libmemcached", "libmemcached/weighted-md5-10.conf"},
		{"libmemcached", "libmemcached/consistent-default-10.conf"}, {"spymemcached", "spymemcached/ketama-ketama-spy-10.conf"},
		{"spymemcached", "spymemcached/arraymod-native-10.conf"}, {"hashring", "hashring/list-10-unordered.json"},
		{"uhashring", "uhashring/md5-10.json"}, {"uhashring", "uhashring/ketama-10-weights.json"},
		{"pymemcache", "pymemcache/hash-10.json"}, {"python-memcache", "python-memcache/modula-10.json"},
		{"redis-shard", "redis-shard/md5-10.json"}, {"grpc", "grpc/default-10.json"},
	} {
		config, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			return err
		}
		for _, preset := range compat.Presets() {
			if preset.System == c.system {
				p, err := preset.New(config, "")
				if err != nil {
					return fmt.Errorf("%s: %w", c.file, err)
				}
				cs = append(cs, contestant{"compat " + c.system + " " + filepath.Base(c.file), byName{p.Locate}})
			}
		}
	}
	names := make([]string, 10)
	nodes := make([]pool.Node, 10)
	for i := range names {
		names[i] = fmt.Sprintf("127.0.0.1:%d", 24101+i)
		nodes[i] = pool.Node{Name: names[i]}
	}
	ring, err := pool.NewRing(nodes, pool.RingOptions{})
	if err != nil {
		return err
	}
	cs = append(cs, contestant{"pool.Ring, default options (XXH64, 160 points a node)", byName{ring.Locate}})
	for _, p := range peers {
		locate, err := p.build(names)
		if err != nil {
			return err
		}
		cs = append(cs, contestant{p.name, byName{locate}})
	}
	keys := measure.Keys(1, 1<<14, 16)
	ls := make([]measure.Locator, len(cs))
	for i, c := range cs {
		ls[i] = c.l
	}
	ns := measure.Race(ls, keys, rounds, 2*time.Millisecond)
	fmt.Fprintf(w, "\nLookups, 10 servers, 16-byte keys, lower quartile of %d interleaved rounds:\n\n", rounds)
	var t measure.Table
	t.Header = []string{"implementation", "ns/op", "allocs/op"}
	for i, c := range cs {
		t.Add(c.name, fmt.Sprintf("%.1f", ns[i]), fmt.Sprintf("%.0f", measure.AllocsPerLocate(c.l, keys)))
	}
	_, err = t.WriteTo(w)
	return err
}

// byName adapts a lookup by name to measure.Locator: the length of the name stands for the
// server, which costs nothing and keeps the lookup from being optimised away.
type byName struct{ locate func(string) string }

func (b byName) Locate(key string) int { return len(b.locate(key)) }

func readKeys(path string) ([]string, error) {
	var keys []string
	err := forLines(path, func(line string) error {
		if strings.HasPrefix(line, "#") {
			return nil
		}
		if line == "-" {
			keys = append(keys, "")
			return nil
		}
		b, err := hex.DecodeString(line)
		keys = append(keys, string(b))
		return err
	})
	return keys, err
}

// readVectors returns a vector file's server names and each carried key's server index.
func readVectors(path string) (names []string, owners map[int]int, err error) {
	owners = map[int]int{}
	err = forLines(path, func(line string) error {
		if rest, ok := strings.CutPrefix(line, "# servers: "); ok {
			for i, f := range strings.Fields(rest) {
				name, ok := strings.CutPrefix(f, strconv.Itoa(i)+"=")
				if !ok {
					return fmt.Errorf("%s: servers line %q", path, line)
				}
				names = append(names, name)
			}
		}
		if strings.HasPrefix(line, "#") {
			return nil
		}
		var k, s int
		if _, err := fmt.Sscan(line, &k, &s); err != nil {
			return fmt.Errorf("%s: %q: %w", path, line, err)
		}
		owners[k] = s
		return nil
	})
	return names, owners, err
}

func forLines(path string, f func(string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			if err := f(line); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
