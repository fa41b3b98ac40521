// Command byhand checks the Go packages that claim to place keys as ketama, libmemcached,
// twemproxy, spymemcached or nginx do, but that the Go module proxy does not serve, against
// the golden vectors of testdata/compat (made by running the real systems), and times their
// lookups next to our presets in one interleaved run.
//
// The peers are brought by hand and built in a throwaway module with the build tag byhand:
// run.sh does both, README.md says how and lists the commits measured. Without the tag the
// command checks only our presets, which is how CI builds and tests it:
//
//	go -C benchmarks/peers/byhand run . [-testdata ../../../testdata/compat] [-rounds 31]
//
// A peer is exact on a file when it puts every key of the file on the recorded server.
// Timing is the lower quartile of many short interleaved rounds (see measure.Race) on a
// shared machine: read ratios, not absolutes.
package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/measure"
)

func main() {
	dir := flag.String("testdata", "../../../testdata/compat", "the directory of the compatibility vectors")
	rounds := flag.Int("rounds", 31, "interleaved timing rounds; the lower quartile is reported")
	detail := flag.Bool("files", false, "also print the agreement on every vector file")
	flag.Parse()
	if err := run(os.Stdout, *dir, *rounds, *detail); err != nil {
		fmt.Fprintln(os.Stderr, "byhand:", err)
		os.Exit(1)
	}
}

// A Peer is one package set up one way: the way its README or doc says gives the
// compatibility it claims.
type Peer struct {
	Name   string // the repository, "dgryski/go-ketama"
	Config string // how it is set up, in a few words
	Claim  string // the system it claims to match and the mode the claim covers
	// Takes reports whether a vector file is of the system and mode the claim covers.
	Takes func(c *Case) bool
	// Build sets the peer up for c's configuration. An error wrapping errInexpressible says
	// what its API cannot express (weights, names); other errors are the peer's own refusal.
	Build func(c *Case) (Lookup, error)
}

// A Lookup is a peer set up for one configuration.
type Lookup struct {
	// Answer names the server that key goes to, in the words of Vocab.
	Answer func(key string) string
	// Vocab holds, for each server in configuration order, the answer that means it.
	Vocab []string
	// Time is the bare lookup for timing: it calls the peer and turns its answer into an int
	// without allocating. Nil means Answer.
	Time func(key string) int
	// Close releases what Build started, if anything.
	Close func()
}

// errInexpressible marks a configuration the peer's API cannot say.
var errInexpressible = errors.New("cannot express")

// peers are the packages measured; the files built with the tag byhand add them.
var peers []Peer

// A Case is one vector file and the configuration it was made from, as a peer needs it.
type Case struct {
	File       string // relative to the vector directory: "twemproxy/ketama-md5-10.txt"
	System     string // the preset's system, which is the directory
	ConfigPath string
	Config     []byte

	// Per server, in configuration order:
	Names   []string // what our preset returns (the file's servers: line)
	Hashed  []string // the text the system names the server's points after (ketama family)
	Addrs   []string // the address as the configuration writes it
	Weights []int    // the weight as the configuration writes it, 1 where it has none

	// The configuration as our parser reads it; the one of System is set.
	Twemproxy    compat.Twemproxy
	Libmemcached compat.Libmemcached
	Spymemcached compat.Spymemcached
	Nginx        compat.NginxUpstream

	Keys   []int // key indexes, in file order
	Owners []int // the server each key went to
}

// systems are the vector directories read, with the extension of their configurations.
var systems = []struct{ dir, ext string }{
	{"twemproxy", ".yml"}, {"libmemcached", ".conf"}, {"spymemcached", ".conf"}, {"nginx", ".conf"},
}

// timed are the configurations lookups are timed on: ten servers of weight 1 each, one per
// mode a peer claims.
var timed = []string{
	"libmemcached/weighted-md5-10.txt", "libmemcached/consistent-default-10.txt",
	"libmemcached/consistent-md5-10-11211-unsorted.txt",
	"twemproxy/ketama-fnv1a_64-10.txt", "twemproxy/modula-fnv1a_64-10.txt",
	"spymemcached/ketama-ketama-spy-10.txt", "spymemcached/ketama-native-spy-10-11211-unordered.txt",
	"nginx/chash-10.txt",
}

func run(w io.Writer, dir string, rounds int, detail bool) error {
	keys, err := readKeys(filepath.Join(dir, "keys.txt"))
	if err != nil {
		return err
	}
	cases, err := readCases(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Machine: %s\n\n", measure.Machine())
	if err := agreement(w, cases, keys, detail); err != nil {
		return err
	}
	return timing(w, cases, rounds)
}

// An outcome is one peer on one vector file.
type outcome struct {
	agree, keys int
	note        string // why it did not run, if it did not
}

// agreement runs every peer, and our presets, on every vector file it takes, and prints a
// summary per peer (and the agreement per file when detail is set).
func agreement(w io.Writer, cases []*Case, keys []string, detail bool) error {
	var summary, files measure.Table
	summary.Header = []string{"package", "set up as", "claims", "files", "exact", "keys placed as recorded", "not run"}
	files.Header = []string{"package", "set up as", "vector file", "keys placed as recorded", "exact"}
	claimed := map[string]bool{}
	for _, p := range peers {
		var taken, exact, agree, total int
		var notRun []string
		for _, c := range cases {
			if !p.Takes(c) {
				continue
			}
			taken++
			claimed[c.File] = true
			o := try(p, c, keys)
			if o.note != "" {
				notRun = append(notRun, o.note)
				files.Add(p.Name, p.Config, c.File, o.note, "not run")
				continue
			}
			agree += o.agree
			total += o.keys
			files.Add(p.Name, p.Config, c.File, fraction(o.agree, o.keys), yesNo(o.agree == o.keys))
			if o.agree == o.keys {
				exact++
			}
		}
		summary.Add(p.Name, p.Config, p.Claim, strconv.Itoa(taken), strconv.Itoa(exact), fraction(agree, total), summarize(notRun))
	}
	// Our presets on every file some peer took (all of them when no peer is built in).
	var taken, exact, agree, total int
	for _, c := range cases {
		if len(peers) > 0 && !claimed[c.File] {
			continue
		}
		a, err := presetAgreement(c, keys)
		if err != nil {
			return err
		}
		taken++
		agree += a
		total += len(c.Keys)
		if a == len(c.Keys) {
			exact++
		}
	}
	summary.Add("shardkit/shard compat", "Preset.New(the configuration file)", "every system here", strconv.Itoa(taken), strconv.Itoa(exact), fraction(agree, total), "")
	fmt.Fprintln(w, "Agreement with the vectors (keys a peer places on the server the real system chose / keys in the files it claims):")
	fmt.Fprintln(w)
	if _, err := summary.WriteTo(w); err != nil {
		return err
	}
	if detail {
		fmt.Fprintln(w, "\nEvery file:")
		fmt.Fprintln(w)
		if _, err := files.WriteTo(w); err != nil {
			return err
		}
	}
	return nil
}

// try runs p on c: how many keys it places as recorded, or why it could not run.
func try(p Peer, c *Case, keys []string) (o outcome) {
	var l Lookup
	if err := catch(func() (err error) { l, err = p.Build(c); return err }); err != nil {
		return outcome{note: err.Error()}
	}
	if l.Close != nil {
		defer l.Close()
	}
	o.keys = len(c.Keys)
	for i, k := range c.Keys {
		var got string
		if catch(func() error { got = l.Answer(keys[k]); return nil }) == nil && got == l.Vocab[c.Owners[i]] {
			o.agree++
		}
	}
	return o
}

// catch runs f and turns a panic into an error.
func catch(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panics: %v", r)
		}
	}()
	return f()
}

// presetAgreement returns how many of c's keys our preset places as recorded.
func presetAgreement(c *Case, keys []string) (int, error) {
	p, err := preset(c)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, k := range c.Keys {
		if p.Locate(keys[k]) == c.Names[c.Owners[i]] {
			n++
		}
	}
	return n, nil
}

type namer interface{ Locate(key string) string }

func preset(c *Case) (namer, error) {
	for _, p := range compat.Presets() {
		if p.System == c.System {
			pl, err := p.New(c.Config, "")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.ConfigPath, err)
			}
			return pl, nil
		}
	}
	return nil, fmt.Errorf("no preset for %s", c.System)
}

// timing races, in one interleaved run, a lookup through our preset on each configuration
// of timed and through every peer on the first of them it takes.
func timing(w io.Writer, cases []*Case, rounds int) error {
	type contestant struct {
		name, file string
		l          measure.Locator
		ours       int // the index of our preset on the same file
	}
	var cs []contestant
	var closers []func()
	timedPeer := make([]bool, len(peers))
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	for _, file := range timed {
		i := slices.IndexFunc(cases, func(c *Case) bool { return c.File == file })
		if i < 0 {
			return fmt.Errorf("no vector file %s", file)
		}
		c := cases[i]
		p, err := preset(c)
		if err != nil {
			return err
		}
		ours := len(cs)
		cs = append(cs, contestant{"compat " + c.System + " preset", file, byName(p.Locate), ours})
		for j, peer := range peers {
			if timedPeer[j] || !peer.Takes(c) {
				continue
			}
			timedPeer[j] = true
			var l Lookup
			if catch(func() (err error) { l, err = peer.Build(c); return err }) != nil {
				continue
			}
			if l.Close != nil {
				closers = append(closers, l.Close)
			}
			t := l.Time
			if t == nil {
				t = byName(l.Answer)
			}
			cs = append(cs, contestant{peer.Name + ", " + peer.Config, file, locatorFunc(t), ours})
		}
	}
	keys := measure.Keys(1, 1<<14, 16)
	ls := make([]measure.Locator, len(cs))
	for i, c := range cs {
		ls[i] = c.l
	}
	ns := measure.Race(ls, keys, rounds, 2*time.Millisecond)
	fmt.Fprintf(w, "\nLookups, 16-byte keys, lower quartile of %d interleaved rounds (ratio: to our preset on the same configuration):\n\n", rounds)
	var t measure.Table
	t.Header = []string{"implementation", "configuration", "ns/op", "allocs/op", "ratio"}
	for i, c := range cs {
		t.Add(c.name, c.file, fmt.Sprintf("%.1f", ns[i]), fmt.Sprintf("%.0f", measure.AllocsPerLocate(c.l, keys)), fmt.Sprintf("%.2fx", ns[i]/ns[c.ours]))
	}
	_, err := t.WriteTo(w)
	return err
}

// byName adapts a lookup by name to an int: the name's length stands for the server, which
// costs nothing and keeps the lookup from being optimised away.
func byName(locate func(string) string) locatorFunc {
	return func(key string) int { return len(locate(key)) }
}

type locatorFunc func(key string) int

func (f locatorFunc) Locate(key string) int { return f(key) }

func fraction(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%d / %d (%.1f%%)", n, of, 100*float64(n)/float64(of))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// summarize counts the reasons files were not run: "2 (cannot express weights)".
func summarize(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	count := map[string]int{}
	var order []string
	for _, n := range notes {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	parts := make([]string, len(order))
	for i, n := range order {
		parts[i] = fmt.Sprintf("%d: %s", count[n], n)
	}
	return strings.Join(parts, "; ")
}

// readCases reads every placed vector file of the systems and the configuration it was
// made from.
func readCases(dir string) ([]*Case, error) {
	var cases []*Case
	for _, s := range systems {
		vectors, err := filepath.Glob(filepath.Join(dir, s.dir, "*.txt"))
		if err != nil {
			return nil, err
		}
		for _, v := range vectors {
			base := strings.TrimSuffix(filepath.Base(v), ".txt")
			if strings.HasPrefix(base, "refused-") || strings.HasPrefix(base, "accepted-") || !isVectorFile(v) {
				continue
			}
			c := &Case{File: s.dir + "/" + base + ".txt", System: s.dir, ConfigPath: filepath.Join(dir, s.dir, base+s.ext)}
			if c.Config, err = os.ReadFile(c.ConfigPath); err != nil {
				return nil, err
			}
			if err := c.readVectors(v); err != nil {
				return nil, err
			}
			if err := c.readConfig(); err != nil {
				return nil, fmt.Errorf("%s: %w", c.ConfigPath, err)
			}
			cases = append(cases, c)
		}
	}
	return cases, nil
}

// isVectorFile reports whether path starts as a vector file does (libmemcached's directory
// also holds a record of its server-list parser).
func isVectorFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len("# system:"))
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == "# system:"
}

// pointName is one `i="name"` of a spymemcached file's point names line.
var pointName = regexp.MustCompile(`(\d+)=("(?:[^"\\]|\\.)*")`)

// readVectors reads the servers, the point names (spymemcached) and the placements.
func (c *Case) readVectors(path string) error {
	return forLines(path, func(line string) error {
		if rest, ok := strings.CutPrefix(line, "# servers: "); ok {
			for i, f := range strings.Fields(rest) {
				name, ok := strings.CutPrefix(f, strconv.Itoa(i)+"=")
				if !ok {
					return fmt.Errorf("%s: servers line %q", path, line)
				}
				c.Names = append(c.Names, name)
			}
		}
		if strings.HasPrefix(line, "# point names") {
			for _, m := range pointName.FindAllStringSubmatch(line, -1) {
				name, err := strconv.Unquote(m[2])
				if err != nil {
					return fmt.Errorf("%s: point names %q: %w", path, m[0], err)
				}
				c.Hashed = append(c.Hashed, name)
			}
		}
		if strings.HasPrefix(line, "#") {
			return nil
		}
		var k, s int
		if _, err := fmt.Sscan(line, &k, &s); err != nil {
			return fmt.Errorf("%s: %q: %w", path, line, err)
		}
		c.Keys = append(c.Keys, k)
		c.Owners = append(c.Owners, s)
		return nil
	})
}

// readConfig parses the configuration with our parser and fills in the per-server fields.
func (c *Case) readConfig() error {
	n := len(c.Names)
	c.Addrs = slices.Clone(c.Names)
	c.Weights = slices.Repeat([]int{1}, n)
	switch c.System {
	case "twemproxy":
		pools, err := compat.ParseTwemproxy(c.Config)
		if err != nil {
			return err
		}
		c.Twemproxy = pools[0]
		if len(c.Twemproxy.Servers) != n {
			return fmt.Errorf("%d servers, %d names", len(c.Twemproxy.Servers), n)
		}
		for i, s := range c.Twemproxy.Servers {
			c.Addrs[i], c.Weights[i] = s.Addr, s.Weight
		}
		c.Hashed = c.Names
	case "libmemcached":
		var err error
		if c.Libmemcached, err = compat.ParseLibmemcached(c.Config); err != nil {
			return err
		}
		weight := map[string]int{}
		for _, s := range c.Libmemcached.Servers {
			weight[s.Name()] = int(s.Weight)
		}
		c.Hashed = make([]string, n)
		for i, name := range c.Names {
			c.Weights[i] = weight[name]
			// Points are named after the host alone on the default port (hosts.cc).
			c.Hashed[i] = strings.TrimSuffix(name, ":11211")
		}
	case "spymemcached":
		var err error
		if c.Spymemcached, err = compat.ParseSpymemcached(c.Config); err != nil {
			return err
		}
		if len(c.Spymemcached.Weights) == n {
			c.Weights = c.Spymemcached.Weights
		}
		if c.Hashed == nil {
			c.Hashed = c.Names // array-mod files name no points
		}
	case "nginx":
		var err error
		if c.Nginx, err = compat.ParseNginx(c.Config, "", compat.NginxResolve); err != nil {
			return err
		}
		for i, s := range c.Nginx.Servers {
			c.Weights[i] = max(s.Weight, 1)
		}
		c.Hashed = c.Names
	}
	if len(c.Hashed) != n {
		return fmt.Errorf("%d point names, %d servers", len(c.Hashed), n)
	}
	return nil
}

// readKeys reads keys.txt: one key a line in hex, "-" for the empty key, "#" comments.
func readKeys(path string) ([]string, error) {
	var keys []string
	err := forLines(path, func(line string) error {
		if strings.HasPrefix(line, "#") {
			return nil
		}
		b, err := hex.DecodeString(strings.TrimPrefix(line, "-"))
		keys = append(keys, string(b))
		return err
	})
	return keys, err
}

// forLines calls f on every line of a file that is not empty.
func forLines(path string, f func(string) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	for line, err := range measure.ScanKeys(file) {
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if line == "" {
			continue
		}
		if err := f(line); err != nil {
			return err
		}
	}
	return nil
}
