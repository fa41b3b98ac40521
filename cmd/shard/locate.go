package main

import (
	"bufio"
	"flag"
	"fmt"
	"iter"
	"slices"

	"github.com/shardkit/shard/pool"
)

var locateVerb = &verb{
	name:    "locate",
	args:    "[flags] KEY... (a KEY of - reads keys from stdin, one per line)",
	summary: "print the shard or node that holds each key",
	about: fmt.Sprintf(`
Locate prints one line per key: the key, a tab, and its shard number or node name (a key
that holds a tab, a control character or bytes that are not UTF-8 is printed quoted as in
Go). With -replicas R, a pool prints the first R distinct nodes of each key, the owner
first, tab-separated. With -json it prints one JSON object per key, one per line. Flags may
come before or after the keys; a key that begins with '-' goes after "--".

Limits: stdin gives at most %d keys and 2^27 bytes, each key at most %d bytes;
a -config or -table file is at most 16 MiB, each line at most 1 MiB; a node's weight is 1
to %d (0 is refused: to drain a node, leave it out).

  shard locate -strategy jump -n 10 user:1 user:2
  shard locate -strategy redis-cluster -n 3 '{user1000}.following'
  shard locate -table partitions.txt - < keys.txt`, maxStreamKeys, maxKeyLine, pool.MaxWeight),
	names: true,
	flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var s spec
		s.define(fs)
		var replicas int
		intFlag(fs, &replicas, "replicas", 1, maxReplicas, "with a pool: how many distinct nodes (`R`) to print per key, the owner first")
		asJSON := fs.Bool("json", false, "print one JSON object per key, one per line")
		return func(e *env, args []string) error {
			keys, err := parseInterleaved(fs, args)
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				return badUsage("no keys: give them as arguments, or - to read them from stdin")
			}
			if n := len(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k != "-" })); n > 1 {
				return badUsage("- given %d times: stdin can be read once", n)
			}
			if replicas < 1 {
				return badUsage("-replicas %d: want at least 1", replicas)
			}
			p, err := s.build()
			if err != nil {
				return err
			}
			if replicas > 1 && p.pool == nil {
				return badUsage("-replicas %d: only a pool (-nodes, -preset or a pool state) has replicas", replicas)
			}
			return locate(e, p, argKeys(e, keys), replicas, *asJSON)
		}
	},
}

// argKeys yields the keys given as arguments, and those of stdin in place of "-".
func argKeys(e *env, args []string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for _, a := range args {
			if a != "-" {
				if !yield(a, nil) {
					return
				}
				continue
			}
			for k, err := range scanKeys(e.stdin, "stdin", streamKeyLimits, e.warn) {
				if !yield(k, err) {
					return
				}
			}
		}
	}
}

// locateLine is one key's answer in JSON.
type locateLine struct {
	Key   string   `json:"key"`
	Shard *int     `json:"shard,omitempty"`
	Node  string   `json:"node,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
}

func locate(e *env, p *placement, keys iter.Seq2[string, error], replicas int, asJSON bool) (err error) {
	w := bufio.NewWriter(e.stdout)
	defer func() { // a full disk or a closed pipe is an error, reported, not a silent exit 0
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
	}()
	var nodes []string
	for k, err := range keys {
		if err != nil {
			return err
		}
		var line locateLine
		switch {
		case p.pool == nil:
			shard := p.dense.Locate(k)
			line = locateLine{Key: k, Shard: &shard}
		case replicas > 1:
			nodes = p.pool.AppendN(nodes[:0], k, replicas)
			line = locateLine{Key: k, Nodes: nodes}
		default:
			line = locateLine{Key: k, Node: p.pool.Locate(k)}
		}
		if asJSON {
			if err := jsonLine(w, line); err != nil {
				return err
			}
			continue
		}
		fmt.Fprint(w, showKey(k))
		switch {
		case line.Shard != nil:
			fmt.Fprintf(w, "\t%d", *line.Shard)
		case line.Nodes != nil:
			for _, n := range line.Nodes {
				fmt.Fprintf(w, "\t%s", showKey(n))
			}
		default:
			fmt.Fprintf(w, "\t%s", showKey(line.Node))
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
	}
	return nil
}
