package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/pool"
)

// spec says how to place keys: the flags that locate and plan share. Exactly one of four
// forms is given: a dense strategy (-strategy with -n), a pool (-strategy with -nodes), a
// preset (-preset with -config) or a saved table (-table).
type spec struct {
	strategy   string
	n          int
	vnodes     int
	partitions int
	nodes      string
	preset     string
	config     string
	group      string
	table      string
}

func (s *spec) define(fs *flag.FlagSet) {
	fs.StringVar(&s.strategy, "strategy", "", "placement strategy by name: a dense one with -n, a pool with -nodes (names below)")
	intFlag(fs, &s.n, "n", 0, maxShardCount, "`number` of shards of a dense strategy, numbered 0..n-1; each strategy's own limit is listed below")
	intFlag(fs, &s.vnodes, "vnodes", 0, maxVnodes, fmt.Sprintf("`points` per shard of murmur-ring (0: %d), or per unit of weight of a pool ring (0: its default)", catalog.DefaultVnodes))
	intFlag(fs, &s.partitions, "partitions", 0, maxPartitionsFlag, fmt.Sprintf("`number` of partitions of the partitions strategy (0: %d), or of the topic of -preset kafka", catalog.DefaultPartitions))
	fs.StringVar(&s.nodes, "nodes", "", "pool members in join order, a `LIST` of name[:weight],...; as in nutcracker.yml the\nweight follows the last ':', so a host:port name carries it: 10.0.0.7:6379:1")
	fs.StringVar(&s.preset, "preset", "", "place keys as another system does, configured by its own file (-config)")
	fs.StringVar(&s.config, "config", "", fmt.Sprintf("the preset's configuration `file` (at most %d bytes, %d a line)", maxFileBytes, maxFileLine))
	fs.StringVar(&s.group, "pool", "", "the pool, upstream or backend of -config to use, when it has several")
	fs.StringVar(&s.table, "table", "", fmt.Sprintf("a saved partition table, trie shape or pool state `file` to place keys with (at most\n%d bytes, %d a line)", maxFileBytes, maxFileLine))
}

// placement is a built spec: a dense sharder or a pool of named nodes.
type placement struct {
	name   string        // the strategy, pool or preset: "jump", "ring pool"
	dense  shard.Sharder // dense strategies, partition tables and trie shapes
	pool   pool.Pool     // pools and presets
	table  *savedTable   // where dense came from, if from a file
	change string        // the change made since it was built, if any: "-to 4"
}

// what describes p for people, as it is now: "jump, 10 shards".
func (p *placement) what() string {
	var s string
	switch {
	case p.table != nil:
		s = p.table.describe() + " from " + p.table.name
	case p.pool != nil:
		s = p.name + ", " + describeNodes(p.pool.Nodes())
	default:
		s = fmt.Sprintf("%s, %d shards", p.name, p.dense.Shards())
	}
	if p.change != "" {
		s += ", changed by " + p.change
	}
	return s
}

// build checks which form s has and builds it. Problems with the flags are usage errors;
// problems with the files they name are not.
func (s *spec) build() (*placement, error) {
	forms := 0
	for _, given := range []bool{s.strategy != "" && s.nodes == "", s.nodes != "", s.preset != "", s.table != ""} {
		if given {
			forms++
		}
	}
	switch {
	case forms == 0:
		return nil, badUsage("say how to place keys: -strategy NAME -n N, -strategy NAME -nodes LIST, -preset NAME -config FILE, or -table FILE")
	case forms > 1:
		return nil, badUsage("give one of -strategy with -n, -strategy with -nodes, -preset, -table")
	case s.table != "":
		return s.buildTable()
	case s.preset != "":
		return s.buildPreset()
	case s.nodes != "":
		return s.buildPool()
	}
	return s.buildDense()
}

func (s *spec) options() catalog.Options {
	return catalog.Options{Vnodes: s.vnodes, Partitions: s.partitions}
}

func (s *spec) buildDense() (*placement, error) {
	st, ok := catalog.Find(s.strategy)
	if !ok {
		if _, isPool := catalog.FindPool(s.strategy); isPool {
			return nil, badUsage("-strategy %s is a pool: name its nodes with -nodes", s.strategy)
		}
		return nil, badUsage("unknown strategy %.80q; dense strategies: %s", s.strategy, strategyNames())
	}
	if s.n < 1 {
		return nil, badUsage("-n %d: want the number of shards, at least 1", s.n)
	}
	if s.vnodes < 0 || s.partitions < 0 {
		return nil, badUsage("-vnodes %d, -partitions %d: want 0 (the default) or more", s.vnodes, s.partitions)
	}
	sh, err := st.New(s.n, s.options())
	if err != nil {
		return nil, usageError{err}
	}
	return &placement{name: st.Name, dense: sh}, nil
}

func (s *spec) buildPool() (*placement, error) {
	nodes, err := parseNodes(s.nodes)
	if err != nil {
		return nil, err
	}
	if s.strategy == "" {
		return nil, badUsage("-nodes needs -strategy: pools: %s", poolNames())
	}
	ps, ok := catalog.FindPool(s.strategy)
	if !ok {
		if _, dense := catalog.Find(s.strategy); dense {
			return nil, badUsage("-strategy %s numbers its shards: give -n, not -nodes; pools: %s", s.strategy, poolNames())
		}
		return nil, badUsage("unknown pool strategy %.80q; pools: %s", s.strategy, poolNames())
	}
	if s.n != 0 {
		return nil, badUsage("-n %d and -nodes: a pool's size is its nodes", s.n)
	}
	p, err := ps.New(nodes, s.options())
	if err != nil {
		return nil, usageError{fmt.Errorf("-nodes: %w", err)}
	}
	return &placement{name: ps.Name + " pool", pool: p}, nil
}

func (s *spec) buildPreset() (*placement, error) {
	pr, ok := catalog.FindPreset(s.preset)
	if !ok {
		return nil, badUsage("unknown preset %.80q; presets: %s", s.preset, presetNames())
	}
	if pr.Partitions != nil {
		return s.buildPartitionPreset(pr)
	}
	if s.config == "" {
		return nil, badUsage("-preset %s needs -config FILE: %s", pr.Name, pr.Doc)
	}
	if s.strategy != "" || s.n != 0 {
		return nil, badUsage("-preset takes its strategy and nodes from -config: drop -strategy and -n")
	}
	text, err := readFile("configuration", s.config)
	if err != nil {
		return nil, err
	}
	p, err := pr.New(text, s.group)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.config, err)
	}
	name := fmt.Sprintf("%s preset, %s", pr.Name, s.config)
	if s.group != "" {
		name += " " + s.group
	}
	return &placement{name: name, pool: p}, nil
}

// buildPartitionPreset builds a preset of numbered partitions (kafka): -partitions is the
// topic's partition count, -config (optional) the client's configuration.
func (s *spec) buildPartitionPreset(pr catalog.Preset) (*placement, error) {
	switch {
	case s.strategy != "" || s.n != 0:
		return nil, badUsage("-preset %s takes the partition count from -partitions: drop -strategy and -n", pr.Name)
	case s.group != "":
		return nil, badUsage("-preset %s has no -pool: a topic's partitions are one placement", pr.Name)
	case s.partitions < 1:
		return nil, badUsage("-preset %s needs -partitions N, the topic's partition count: %s", pr.Name, pr.Doc)
	}
	var text []byte
	name := pr.Name + " preset"
	if s.config != "" {
		var err error
		if text, err = readFile("configuration", s.config); err != nil {
			return nil, err
		}
		name += ", " + s.config
	}
	sh, err := pr.Partitions(text, s.partitions)
	switch {
	case err != nil && s.config != "":
		return nil, fmt.Errorf("%s: %w", s.config, err)
	case err != nil:
		return nil, usageError{err}
	}
	return &placement{name: name, dense: sh}, nil
}

func (s *spec) buildTable() (*placement, error) {
	if s.strategy != "" || s.n != 0 {
		return nil, badUsage("-table holds the whole placement: drop -strategy and -n")
	}
	t, err := loadTable(s.table)
	if err != nil {
		return nil, err
	}
	return t.placement(), nil
}

// parseNodes parses "name[:weight],..." into nodes; the weight follows the last ':'. A weight
// of 0, which the pools read as 1, is refused: it reads as a drained node, which it is not.
func parseNodes(list string) ([]pool.Node, error) {
	var nodes []pool.Node
	for item := range strings.SplitSeq(list, ",") {
		n := pool.Node{Name: item}
		if i := strings.LastIndexByte(item, ':'); i >= 0 {
			w, err := strconv.Atoi(item[i+1:])
			if err == nil && w == 0 {
				return nil, badUsage("-nodes: %.80q: weight 0: want a weight in [1, %d]; to drain a node, remove it", item, pool.MaxWeight)
			}
			if err != nil || w < 0 || item[i+1] == '+' {
				return nil, badUsage("-nodes: %.80q: want name[:weight] with a weight in [1, %d] after the last ':' (a host:port name needs one: %.80s:1)",
					item, pool.MaxWeight, item)
			}
			n = pool.Node{Name: item[:i], Weight: w}
		}
		if n.Name == "" {
			return nil, badUsage("-nodes: empty node name in %.80q", list)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// describeNodes says "3 nodes: a, b (weight 2), c".
func describeNodes(nodes []pool.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d nodes: ", len(nodes))
	for i, n := range nodes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n.Name)
		if n.Weight != 1 {
			fmt.Fprintf(&b, " (weight %d)", n.Weight)
		}
		if i == 7 && len(nodes) > 9 {
			fmt.Fprintf(&b, ", ... (%d more)", len(nodes)-8)
			break
		}
	}
	return b.String()
}

func strategyNames() string {
	var names []string
	for _, s := range catalog.All() {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func poolNames() string {
	var names []string
	for _, s := range catalog.Pools() {
		names = append(names, s.Name)
	}
	return listOrNone(names)
}

func presetNames() string {
	var names []string
	for _, p := range catalog.Presets() {
		names = append(names, p.Name)
	}
	return listOrNone(names)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none yet"
	}
	return strings.Join(names, ", ")
}

// namesHelp is the list of names every placing verb's usage ends with.
func namesHelp() string {
	var b strings.Builder
	b.WriteString("Dense strategies (-n): ")
	for i, s := range catalog.All() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (n <= %d)", s.Name, s.MaxShards(catalog.Options{}))
	}
	fmt.Fprintf(&b, ".\nPools (-nodes): %s.\nPresets (-preset, -config): ", poolNames())
	b.WriteString(presetNames() + "; 'shard help presets' says what each reads.")
	return wrap(b.String(), 90, "  ")
}

// wrap breaks text into lines of at most width bytes at spaces, keeping existing breaks,
// and starts every line after the first with indent.
func wrap(text string, width int, indent string) string {
	var out []string
	for para := range strings.SplitSeq(text, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			if line != "" && len(line)+1+len(w) > width {
				out = append(out, line)
				line = indent + w
				continue
			}
			if line != "" && line != indent {
				line += " "
			}
			line += w
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
