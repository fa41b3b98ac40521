package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

var tableVerb = &verb{
	name:    "table",
	args:    "show|check FILE... | new [flags] | edit [flags] FILE",
	summary: "show, check, make or edit a saved partition table, trie shape or pool state",
	about: `
A saved table is the text form that MarshalText writes and UnmarshalText reads: a
partition table (shard.Partitions, shard.NewRedisCluster), a trie shape (shard.Trie) or
the state of a Memento pool (pool.Memento). The kind is read from the file.

  show FILE...   check each file and print its owners: partitions, leaves or weights per
                 shard or node, and how even they are
  check FILE...  check each file; the error names the line at fault; exit status 1 if any
                 file is bad
  new            write a new table: -strategy partitions|redis-cluster|trie -n N, or
                 -strategy memento -nodes LIST
  edit FILE      change a table with one of -resize, -move, -split, -merge (tables and
                 shapes) or -add, -remove, -weight (pool states), and print the new table,
                 or write it with -w (the file is replaced only once the new text has been
                 written, read back and checked) or -o; what the change moves is printed on
                 stderr: exactly for tables and shapes, on 100000 random keys for pools

Flags go before FILE. A FILE is at most 16 MiB, each line at most 1 MiB, and show and check
take at most 64 files a run; a file that is none of the three kinds is reported as such.

  shard table new -strategy redis-cluster -n 3 -o slots.txt
  shard table edit -move 0-99:2 -w slots.txt
  shard table edit -resize 4 slots.txt > grown.txt
  shard table new -strategy memento -nodes a,b,c -o pool.txt
  shard table edit -remove b -w pool.txt`,
	flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var t tableFlags
		fs.StringVar(&t.strategy, "strategy", "", "new: partitions, redis-cluster, trie or memento")
		intFlag(fs, &t.n, "n", 0, maxShardCount, "new: the `number` of shards")
		fs.StringVar(&t.nodes, "nodes", "", "new, memento: the pool's members `LIST`, name[:weight],...")
		intFlag(fs, &t.partitions, "partitions", 0, maxPartitionsFlag, fmt.Sprintf("new, partitions: the `number` of partitions (0: %d)", catalog.DefaultPartitions))
		intFlag(fs, &t.resize, "resize", 0, maxShardCount, "edit: resize to `N` shards (partition table or trie shape)")
		fs.Func("move", "edit: give partitions `P[-Q]:SHARD` to a shard (repeatable; partition table)", t.addMove)
		intFlag(fs, &t.split, "split", 0, maxShardCount, "edit: split the leaf of `SHARD` in two (trie shape)")
		intFlag(fs, &t.merge, "merge", 0, maxShardCount, "edit: merge the leaf of `SHARD` into its sibling (trie shape)")
		fs.StringVar(&t.add, "add", "", "edit: add members `LIST`, name[:weight],... (pool state)")
		fs.StringVar(&t.remove, "remove", "", "edit: remove the members `NAMES`, name,... (pool state)")
		fs.StringVar(&t.weight, "weight", "", "edit: set a member's weight, `NAME:WEIGHT` (pool state)")
		fs.BoolVar(&t.write, "w", false, "edit: write the result back to FILE instead of stdout")
		fs.StringVar(&t.out, "o", "", "new, edit: write the table to `file` instead of stdout")
		fs.BoolVar(&t.json, "json", false, "print a JSON object instead of text")
		return func(e *env, args []string) error {
			if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" {
				return badUsage("no action: want show, check, new or edit")
			}
			action := args[0]
			if action != "-h" && action != "-help" { // else parse prints the usage
				args = args[1:]
			}
			files, err := parse(fs, args)
			if err != nil {
				return err
			}
			for _, f := range files {
				if strings.HasPrefix(f, "-") && f != "-" {
					return badUsage("flag %s after a file name: flags go before FILE", f)
				}
			}
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			t.set = set
			switch action {
			case "show", "check":
				if len(files) == 0 {
					return badUsage("%s: no file", action)
				}
				if len(files) > maxTableFiles {
					return badUsage("%s: %d files: want at most %d a run", action, len(files), maxTableFiles)
				}
				if err := t.only(action); err != nil {
					return err
				}
				return t.show(e, files, action == "check")
			case "new":
				if len(files) > 0 {
					return badUsage("new takes no file: it writes to stdout, or to -o FILE")
				}
				if err := t.only(action, "strategy", "n", "partitions", "nodes", "o"); err != nil {
					return err
				}
				return t.create(e)
			case "edit":
				if len(files) != 1 {
					return badUsage("edit: want one FILE, got %d", len(files))
				}
				if err := t.only(action, "resize", "move", "split", "merge", "add", "remove", "weight", "w", "o"); err != nil {
					return err
				}
				return t.edit(e, files[0])
			}
			return badUsage("unknown action %.80q: want show, check, new or edit", action)
		}
	},
}

// tableFlags is table's flags.
type tableFlags struct {
	strategy      string
	n, partitions int
	nodes         string
	add, remove   string
	weight        string
	resize        int
	moves         []partRun
	split, merge  int
	write         bool
	out           string
	json          bool
	set           map[string]bool // the flags given
}

// only returns a usage error if a flag other than -json and allowed was given to action.
func (t *tableFlags) only(action string, allowed ...string) error {
	for name := range t.set {
		ok := name == "json"
		for _, a := range allowed {
			ok = ok || name == a
		}
		if !ok {
			return badUsage("-%s does not apply to %s", name, action)
		}
	}
	return nil
}

// addMove parses one -move value, P[-Q]:SHARD.
func (t *tableFlags) addMove(v string) error {
	parts, to, ok := strings.Cut(v, ":")
	first, last, isRange := strings.Cut(parts, "-")
	r := partRun{From: -1}
	var err1, err2, err3 error
	r.First, err1 = strconv.Atoi(first)
	r.Last = r.First
	if isRange {
		r.Last, err2 = strconv.Atoi(last)
	}
	r.To, err3 = strconv.Atoi(to)
	if !ok || errors.Join(err1, err2, err3) != nil || r.First < 0 || r.Last < r.First || r.To < 0 {
		return fmt.Errorf("want PARTITION:SHARD or FIRST-LAST:SHARD, e.g. 0-99:2")
	}
	t.moves = append(t.moves, r)
	return nil
}

// savedTable is a table read from a file or made by new: one of a partition table, a trie
// shape and a Memento pool's state.
type savedTable struct {
	name  string // the file, for messages
	parts *shard.Partitions
	trie  *shard.Trie
	state *pool.Memento
}

// mementoHeader is the line a Memento state begins with, after comments.
const mementoHeader = "memento v1"

// trieLine is the form of a trie shape's lines, as shard.Trie writes them: the leaf's bits,
// "-" for the root, and its shard.
var trieLine = regexp.MustCompile(`^(-|[01]+) [0-9]+$`)

// errNotTable is a file that is none of the kinds of saved table.
var errNotTable = errors.New("not a saved table")

// parseTable reads text as the kind of table it is.
func parseTable(name string, text []byte) (*savedTable, error) {
	t := &savedTable{name: name}
	var err error
	switch first := sniff(text); {
	case strings.HasPrefix(first, "hash="):
		t.parts = &shard.Partitions{}
		err = t.parts.UnmarshalText(text)
	case first == mementoHeader:
		t.state = &pool.Memento{}
		err = t.state.UnmarshalText(text)
	case trieLine.MatchString(first):
		t.trie = &shard.Trie{}
		err = t.trie.UnmarshalText(text)
	default:
		return nil, fmt.Errorf("%s: its first line %.40q is none of a partition table's header (hash=...), a trie leaf (BITS SHARD) or %q: %w",
			name, first, mementoHeader, errNotTable)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

func loadTable(path string) (*savedTable, error) {
	text, err := readFile("saved table", path)
	if err != nil {
		return nil, err
	}
	return parseTable(path, text)
}

func (t *savedTable) kind() string {
	switch {
	case t.parts != nil:
		return "partition table"
	case t.trie != nil:
		return "trie shape"
	}
	return "pool state"
}

func (t *savedTable) text() []byte {
	var text []byte
	var err error
	switch {
	case t.parts != nil:
		text, err = t.parts.MarshalText()
	case t.trie != nil:
		text, err = t.trie.MarshalText()
	default:
		text, err = t.state.MarshalText()
	}
	if err != nil {
		panic(err) // a loaded or new table always marshals
	}
	return text
}

// describe says "partition table (hash=xxh64, 16384 partitions, 10 shards)".
func (t *savedTable) describe() string {
	switch {
	case t.parts != nil:
		return fmt.Sprintf("partition table (%s, %d partitions, %d shards)", hashRule(t.parts), t.parts.NumPartitions(), t.parts.Shards())
	case t.trie != nil:
		return fmt.Sprintf("trie shape (%d shards)", t.trie.Shards())
	}
	return fmt.Sprintf("memento pool state (%s)", describeNodes(t.state.Nodes()))
}

func (t *savedTable) placement() *placement {
	switch {
	case t.parts != nil:
		return &placement{dense: t.parts, table: t}
	case t.trie != nil:
		return &placement{dense: t.trie, table: t}
	}
	return &placement{pool: t.state, table: t}
}

// tableSummary is what show prints for one table.
type tableSummary struct {
	File       string       `json:"file"`
	OK         bool         `json:"ok"`
	Error      string       `json:"error,omitempty"`
	Kind       string       `json:"kind,omitempty"`
	Hash       string       `json:"hash,omitempty"` // partition tables: xxh64 or redis
	Partitions int          `json:"partitions,omitempty"`
	Shards     int          `json:"shards,omitempty"`
	Owners     []tableOwner `json:"owners,omitempty"`
	Balance    *balance     `json:"balance,omitempty"`
}

// balance is how evenly a table spreads the partitions or key hashes over the shards.
type balance struct {
	StddevPct float64 `json:"stddev_pct"` // standard deviation in % of the mean
	MaxMean   float64 `json:"max_mean"`   // the fullest shard over the mean
}

type tableOwner struct {
	Shard      *int    `json:"shard,omitempty"`
	Node       string  `json:"node,omitempty"`       // pool states
	Weight     int     `json:"weight,omitempty"`     // pool states
	Partitions int     `json:"partitions,omitempty"` // partition tables
	Leaf       string  `json:"leaf,omitempty"`       // trie shapes: the leaf's bits, "-" for the root
	Share      float64 `json:"share"`                // of the partitions, key hashes or weight
}

func (t *savedTable) summary() tableSummary {
	s := tableSummary{File: t.name, OK: true, Kind: t.kind()}
	var loads []int // whole units per shard, for the balance
	switch {
	case t.parts != nil:
		s.Shards = t.parts.Shards()
		s.Hash = strings.TrimPrefix(hashRule(t.parts), "hash=")
		s.Partitions = t.parts.NumPartitions()
		loads = make([]int, s.Shards)
		for _, sh := range t.parts.Table() {
			loads[sh]++
		}
		for sh, c := range loads {
			s.Owners = append(s.Owners, tableOwner{Shard: &sh, Partitions: c, Share: float64(c) / float64(s.Partitions)})
		}
	case t.trie != nil:
		s.Shards = t.trie.Shards()
		loads = make([]int, s.Shards)
		for _, l := range t.trie.Leaves() {
			bits := "-"
			if l.Depth > 0 {
				bits = fmt.Sprintf("%0*b", l.Depth, l.Path)
			}
			s.Owners = append(s.Owners, tableOwner{Shard: &l.Shard, Leaf: bits, Share: 1 / float64(uint64(1)<<l.Depth)})
			loads[l.Shard] += 1 << (shard.MaxTrieDepth - l.Depth) // in the deepest leaf's share
		}
	default: // weights are meant to differ: no balance
		nodes := t.state.Nodes()
		total := 0
		for _, n := range nodes {
			total += n.Weight
		}
		for _, n := range nodes {
			s.Owners = append(s.Owners, tableOwner{Node: n.Name, Weight: n.Weight, Share: float64(n.Weight) / float64(total)})
		}
		return s
	}
	b := measure.BalanceOf(loads)
	s.Balance = &balance{StddevPct: b.StddevPct, MaxMean: b.MaxMean}
	return s
}

func (s tableSummary) write(w io.Writer) error {
	var t measure.Table
	switch s.Kind {
	case "partition table":
		fmt.Fprintf(w, "%s: partition table: hash=%s, %d partitions, %d shards\n\n", s.File, s.Hash, s.Partitions, s.Shards)
		t.Header = []string{"shard", "partitions", "% of partitions"}
		for _, o := range s.Owners {
			t.Add(strconv.Itoa(*o.Shard), strconv.Itoa(o.Partitions), pct2(o.Share))
		}
	case "trie shape":
		fmt.Fprintf(w, "%s: trie shape: %d shards\n\n", s.File, s.Shards)
		t.Header = []string{"leaf", "shard", "% of key hashes"}
		for _, o := range s.Owners {
			t.Add(o.Leaf, strconv.Itoa(*o.Shard), pct2(o.Share))
		}
	default:
		fmt.Fprintf(w, "%s: memento pool state: %d nodes\n\n", s.File, len(s.Owners))
		t.Header = []string{"node", "weight", "% of weight"}
		for _, o := range s.Owners {
			t.Add(showKey(o.Node), strconv.Itoa(o.Weight), pct2(o.Share))
		}
	}
	if _, err := t.WriteTo(w); err != nil || s.Balance == nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nbalance: stddev %.2f%% of the mean, max/mean %.3f\n", s.Balance.StddevPct, s.Balance.MaxMean)
	return err
}

// show shows or checks each file; it fails if any is bad, after going through them all.
func (t *tableFlags) show(e *env, files []string, checkOnly bool) error {
	bad := 0
	for i, f := range files {
		tab, err := loadTable(f)
		s := tableSummary{File: f, OK: err == nil}
		if err != nil {
			bad++
			s.Error = err.Error()
			if !t.json {
				fmt.Fprintf(e.stderr, "shard table: %v\n", err)
				continue
			}
		} else {
			s = tab.summary()
		}
		switch {
		case t.json:
			if checkOnly {
				s.Owners, s.Balance = nil, nil
			}
			if err := jsonLine(e.stdout, s); err != nil {
				return err
			}
		case checkOnly:
			fmt.Fprintf(e.stdout, "%s: ok: %s\n", f, tab.describe())
		default:
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			if err := s.write(e.stdout); err != nil {
				return err
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d files are not valid tables", bad, len(files))
	}
	return nil
}

// create writes a new table.
func (t *tableFlags) create(e *env) error {
	tab := &savedTable{name: "new table"}
	if t.strategy == "memento" {
		if t.n != 0 || t.nodes == "" {
			return badUsage("new: -strategy memento takes -nodes, not -n")
		}
		nodes, err := parseNodes(t.nodes)
		if err != nil {
			return err
		}
		if tab.state, err = pool.NewMemento(nodes); err != nil {
			return usageError{fmt.Errorf("-nodes: %w", err)}
		}
		return t.output(e, "", tab, "")
	}
	if t.n < 1 {
		return badUsage("new: -n %d: want the number of shards, at least 1", t.n)
	}
	if t.nodes != "" {
		return badUsage("new: -nodes is for -strategy memento")
	}
	var err error
	switch t.strategy {
	case "partitions":
		tab.parts, err = shard.NewPartitions(t.n, cmp.Or(t.partitions, catalog.DefaultPartitions))
	case "redis-cluster":
		tab.parts, err = shard.NewRedisCluster(t.n)
	case "trie":
		tab.trie, err = shard.NewTrie(t.n)
	default:
		return badUsage("new: -strategy %.80q: want partitions, redis-cluster, trie or memento", t.strategy)
	}
	if err != nil {
		return usageError{err}
	}
	return t.output(e, "", tab, "")
}

// edit changes the table in file by the one edit the flags give.
func (t *tableFlags) edit(e *env, file string) error {
	if t.write && t.out != "" {
		return badUsage("-w and -o: give one")
	}
	edits := 0
	for _, n := range []string{"resize", "move", "split", "merge", "add", "remove", "weight"} {
		if t.set[n] {
			edits++
		}
	}
	if edits != 1 {
		return badUsage("edit: give one of -resize, -move, -split, -merge, -add, -remove, -weight")
	}
	before, err := loadTable(file)
	if err != nil {
		return err
	}
	after, err := loadTable(file)
	if err != nil {
		return err
	}
	var change string
	switch {
	case t.set["add"], t.set["remove"], t.set["weight"]:
		if after.state == nil {
			return badUsage("-add, -remove, -weight: %s is a %s: they edit a pool state", file, after.kind())
		}
		c := planChange{add: t.add, remove: t.remove, weight: t.weight}
		p := after.placement()
		if err := c.apply(p); err != nil {
			return err
		}
		change = p.change
	case t.set["resize"]:
		if after.state != nil {
			return badUsage("-resize: %s is a pool state: change its members with -add or -remove", file)
		}
		change = fmt.Sprintf("resize to %d shards", t.resize)
		err = after.placement().dense.Resize(t.resize)
	case t.set["move"]:
		if after.parts == nil {
			return badUsage("-move: %s is a %s: -move edits a partition table", file, after.kind())
		}
		var moved []string
		for _, m := range t.moves {
			moved = append(moved, fmt.Sprintf("%s to shard %d", span(m.First, m.Last), m.To))
		}
		change = "move partitions " + strings.Join(moved, ", ")
		err = movePartitions(after.parts, t.moves)
	case t.set["split"], t.set["merge"]:
		if after.trie == nil {
			return badUsage("-split, -merge: %s is a %s: they edit a trie shape", file, after.kind())
		}
		if t.set["split"] {
			var n int
			n, err = after.trie.Split(t.split)
			change = fmt.Sprintf("split shard %d (new shard %d)", t.split, n)
		} else {
			change = fmt.Sprintf("merge shard %d", t.merge)
			err = after.trie.Merge(t.merge)
		}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", file, err)
		if errors.Is(err, shard.ErrShardCount) || errors.Is(err, shard.ErrShard) || errors.Is(err, shard.ErrPartition) {
			return usageError{err} // a flag's number is out of this table's range
		}
		return err
	}
	moved, err := movedSummary(e, before.placement(), after.placement())
	if err != nil {
		return err
	}
	return t.output(e, file, after, fmt.Sprintf("%s: %s: %s", file, change, moved))
}

// movedSummary says what an edit moves: exactly for tables and shapes, on a sample of keys
// for pools.
func movedSummary(e *env, before, after *placement) (string, error) {
	rep := &planReport{}
	rep.exactPlan(before, after)
	switch {
	case rep.Partitions != nil:
		return fmt.Sprintf("%d of %d partitions move (%s%%)", rep.Partitions.Moved, rep.Partitions.Partitions, pct2(rep.Partitions.Fraction)), nil
	case rep.Ranges != nil:
		return fmt.Sprintf("%s%% of the key hashes move", pct2(rep.Ranges.Fraction)), nil
	}
	keys := sample{count: 100_000, keylen: 16}
	seq, what, closeKeys, err := keys.open(e)
	if err != nil {
		return "", err
	}
	defer closeKeys()
	rep = &planReport{Keys: what, owners: newOwners(before, after)}
	prog := newProgress(e)
	defer prog.done()
	if err := rep.count(before, after, seq, prog); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d of %s move (%s%%)", rep.Moved, rep.Keys, pct2(rep.Fraction)), nil
}

// editReport is what new and edit print with -json.
type editReport struct {
	File   string `json:"file,omitempty"`   // the file edited
	Wrote  string `json:"wrote,omitempty"`  // where the table was written, if not to stdout
	Table  string `json:"table,omitempty"`  // the table, when it went to stdout
	Change string `json:"change,omitempty"` // what the edit did and moved
}

// output writes tab where the flags say, and the change on stderr (or in the JSON).
func (t *tableFlags) output(e *env, file string, tab *savedTable, change string) error {
	text := tab.text()
	dest := t.out
	if t.write {
		dest = file
	}
	if dest != "" {
		verify := func(b []byte) error { _, err := parseTable(dest, b); return err }
		if err := writeFileAtomic(dest, text, file == "" /* new: never overwrite */, verify); err != nil {
			return err
		}
	}
	if t.json {
		r := editReport{File: file, Wrote: dest, Change: change}
		if dest == "" {
			r.Table = string(text)
		}
		return writeJSON(e.stdout, r)
	}
	if change != "" {
		fmt.Fprintln(e.stderr, change)
	}
	if dest == "" {
		_, err := e.stdout.Write(text)
		return err
	}
	return nil
}

// writeFileAtomic replaces path with data: it writes a temporary file next to it, flushes
// it to disk, reads it back and checks it (equal bytes, and verify), and only then renames
// it over path, so that a crash or a full disk never leaves path half written. With
// exclusive it refuses to replace an existing file.
func writeFileAtomic(path string, data []byte, exclusive bool, verify func([]byte) error) (err error) {
	mode := fs.FileMode(0o644)
	if fi, statErr := os.Stat(path); statErr == nil {
		if exclusive {
			return fmt.Errorf("%s exists: remove it first, or edit it", path)
		}
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err == nil {
		if err = tmp.Sync(); err == nil {
			err = tmp.Chmod(mode)
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	back, err := os.ReadFile(tmp.Name())
	if err == nil && !bytes.Equal(back, data) {
		err = errors.New("the bytes read back differ from those written")
	}
	if err == nil {
		err = verify(back)
	}
	if err != nil {
		return fmt.Errorf("checking %s before replacing %s: %w", tmp.Name(), path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if dir, derr := os.Open(filepath.Dir(path)); derr == nil { // make the rename durable
		dir.Sync()
		dir.Close()
	}
	return nil
}

// sniff returns the first line of text that is neither blank nor a '#' comment.
func sniff(text []byte) string {
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return string(line)
		}
	}
	return ""
}

// movePartitions gives the partitions of each move to its shard, in order, as Move would one
// by one, with Move's errors, but in one new table: Move copies the table for each partition,
// which made -move 0-65535:1 take seconds.
func movePartitions(p *shard.Partitions, moves []partRun) error {
	owner := p.Table()
	np, shards := len(owner), p.Shards()
	for _, m := range moves {
		switch {
		case m.First >= np:
			return fmt.Errorf("shard: partitions: move partition %d: allowed range is [0, %d): %w", m.First, np, shard.ErrPartition)
		case m.To >= shards:
			return fmt.Errorf("shard: partitions: move partition %d to shard %d: allowed range is [0, %d): %w", m.First, m.To, shards, shard.ErrShard)
		case m.Last >= np:
			return fmt.Errorf("shard: partitions: move partition %d: allowed range is [0, %d): %w", np, np, shard.ErrPartition)
		}
		for i := m.First; i <= m.Last; i++ {
			owner[i] = m.To
		}
	}
	text, err := p.MarshalText()
	if err != nil {
		return err
	}
	header, _, _ := bytes.Cut(text, []byte("\n"))
	text = append(header, '\n')
	for first := 0; first < np; {
		last := first
		for last+1 < np && owner[last+1] == owner[first] {
			last++
		}
		text = fmt.Appendf(text, "%d-%d %d\n", first, last, owner[first])
		first = last + 1
	}
	return p.UnmarshalText(text)
}
