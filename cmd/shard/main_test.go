package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard/catalog"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests build the command once and run the binary as an operator would, comparing
// what it prints with golden files in testdata/golden: run
//
//	go test ./cmd/shard -update
//
// to rewrite them after a deliberate change, and read the diff before committing it.

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// binary is the command built by TestMain.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "shard-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "shard")
	if runtime.GOOS == "windows" {
		binary += ".exe"
	}
	if _, err := exec.LookPath("go"); err != nil {
		fmt.Fprintf(os.Stderr, "cmd/shard tests: the go tool is not on PATH (%v): cannot build the command\n", err)
		os.RemoveAll(dir)
		os.Exit(0) // nothing to test without a binary; say so rather than fail every case
	}
	build := exec.Command("go", "build", "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the command: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one run printed.
type result struct {
	code           int
	stdout, stderr string
}

// runShard runs the command in dir with args and stdin.
func runShard(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %v: %v", args, err)
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("shard %s panicked:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r
}

// golden compares r with testdata/golden/name.golden, or writes it there with -update.
func golden(t *testing.T, name string, args []string, r result) {
	t.Helper()
	var shown []string
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'{}") {
			a = strconv.Quote(a)
		}
		shown = append(shown, a)
	}
	got := fmt.Sprintf("$ shard %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(shown, " "), r.code, r.stdout, r.stderr)
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cmd/shard -run %s -update to create it", t.Name())
	assert.Equal(t, string(want), got, "output changed: if on purpose, rerun with -update and read the diff")
}

// fixtures are the files every case's working directory starts with.
var fixtures = map[string]string{
	"keys.txt":      "user:1\nuser:2\n{user1000}.following\n{user1000}.followers\n\nlast\r\n",
	"empty.txt":     "",
	"parts.txt":     "hash=xxh64 partitions=16 shards=4\n0-3 0\n4-7 1\n8-11 2\n12-15 3\n",
	"parts-bad.txt": "hash=xxh64 partitions=16 shards=4\n0-3 0\n4-7 1\n9-11 2\n12-15 3\n",
	"trie.txt":      "00 0\n01 2\n1 1\n",
	"trie-bad.txt":  "00 0\n01 2\n1 one\n",
	"slots.txt":     "hash=redis partitions=16384 shards=3\n0-5460 0\n5461-10922 1\n10923-16383 2\n",
	"pool.txt":      "memento v1\nbuckets 4\nnode \"a\" weight 1 buckets 0\nnode \"b\" weight 2 buckets 1-2\nnode \"c\" weight 1 buckets 3\nremoved\n",
	"pool-bad.txt":  "memento v1\nbuckets 4\nnode \"a\" weight 1 buckets 0\nnode \"b\" weight 2 buckets 1-2\nremoved\n",
	"nginx.conf": "upstream cache {\n    hash $key consistent;\n    server 10.0.0.1:11211;\n    server 10.0.0.2:11211 weight=2;\n    server 10.0.0.3:11211;\n}\n" +
		"upstream api {\n    hash $key;\n    server 10.0.1.1:80;\n    server 10.0.1.2:80;\n}\n",
	"nginx-grown.conf":     "upstream cache {\n    hash $key consistent;\n    server 10.0.0.1:11211;\n    server 10.0.0.2:11211 weight=2;\n    server 10.0.0.3:11211;\n    server 10.0.0.4:11211;\n}\n",
	"nginx-bad.conf":       "upstream cache {\n    hash $key consistent;\n    server 10.0.0.1:99999;\n}\n",
	"goredis.json":         `{"a": "10.0.0.1:6379", "b": "10.0.0.2:6379", "c": "10.0.0.3:6379"}`,
	"kafka.properties":     "bootstrap.servers=127.0.0.1:9092\n# librdkafka's topic property\npartitioner=fnv1a_random\n",
	"kafka-bad.properties": "acks=all\npartitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner\n",
	"nutcracker.yml":       "cache:\n  listen: 127.0.0.1:22121\n  distribution: ketama\n  servers:\n   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:1\n   - 10.0.0.3:11211:1\n",
}

func workdir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range fixtures {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return dir
}

// cases are runs whose whole output is golden. code is the exit status wanted: 0, 1 for
// failed work, 2 for bad usage; want is a phrase stderr must hold, so that the message names
// the problem.
var cases = []struct {
	name  string
	args  []string
	stdin string
	code  int
	want  string
}{
	// The command and its help.
	{"no-verb", nil, "", 2, "no verb given"},
	{"unknown-verb", []string{"frobnicate"}, "", 2, `unknown verb "frobnicate"`},
	{"help", []string{"help"}, "", 0, ""},
	{"help-locate", []string{"help", "locate"}, "", 0, ""},
	{"help-plan", []string{"help", "plan"}, "", 0, ""},
	{"help-table", []string{"help", "table"}, "", 0, ""},
	{"help-compare", []string{"help", "compare"}, "", 0, ""},
	{"help-unknown", []string{"help", "nothing"}, "", 2, `unknown verb "nothing"`},
	{"locate-dash-h", []string{"locate", "-h"}, "", 0, ""},

	// locate
	{"locate-jump", []string{"locate", "-strategy", "jump", "-n", "10", "user:1", "user:2"}, "", 0, ""},
	{"locate-redis-tags", []string{"locate", "-strategy", "redis-cluster", "-n", "3", "{user1000}.following", "{user1000}.followers", "user1000"}, "", 0, ""},
	{"locate-stdin", []string{"locate", "-strategy", "rendezvous", "-n", "5", "first", "-"}, "a\nb\tc\n\n\xff\n", 0, ""},
	{"locate-json", []string{"locate", "-json", "-strategy", "murmur-ring", "-n", "4", "-vnodes", "16", "user:1", ""}, "", 0, ""},
	{"locate-table", []string{"locate", "-table", "slots.txt", "user:1", "{user1000}.following"}, "", 0, ""},
	{"locate-trie-table", []string{"locate", "-table", "trie.txt", "-json", "user:1"}, "", 0, ""},
	{"locate-unknown-strategy", []string{"locate", "-strategy", "consistent", "-n", "3", "k"}, "", 2, `unknown strategy "consistent"`},
	{"locate-n-0", []string{"locate", "-strategy", "jump", "-n", "0", "k"}, "", 2, "-n 0: want the number of shards"},
	{"locate-n-too-big", []string{"locate", "-strategy", "first-byte-sha1", "-n", "11", "k"}, "", 2, "allowed range is [1, 10]"},
	{"locate-no-keys", []string{"locate", "-strategy", "jump", "-n", "3"}, "", 2, "no keys"},
	{"locate-no-placement", []string{"locate", "k"}, "", 2, "say how to place keys"},
	{"locate-two-placements", []string{"locate", "-strategy", "jump", "-n", "3", "-table", "parts.txt", "k"}, "", 2, "give one of"},
	{"locate-stdin-twice", []string{"locate", "-strategy", "jump", "-n", "3", "-", "-"}, "", 2, "stdin can be read once"},
	{"locate-bad-flag", []string{"locate", "-shards", "3", "k"}, "", 2, "flag provided but not defined: -shards"},
	{"locate-malformed-table", []string{"locate", "-table", "parts-bad.txt", "k"}, "", 1, "table line 4"},
	{"locate-missing-table", []string{"locate", "-table", "nowhere.txt", "k"}, "", 1, "nowhere.txt: no such file"},
	{"locate-replicas-dense", []string{"locate", "-strategy", "jump", "-n", "3", "-replicas", "2", "k"}, "", 2, "only a pool"},
	{"locate-bad-nodes", []string{"locate", "-strategy", "ring", "-nodes", "a,b:x", "k"}, "", 2, `-nodes: "b:x"`},
	{"locate-pool", []string{"locate", "-strategy", "ring", "-nodes", "a,b:2,c", "user:1", "user:2", "user:3"}, "", 0, ""},
	{"locate-pool-replicas", []string{"locate", "-strategy", "rendezvous", "-nodes", "10.0.0.1:6379:1,10.0.0.2:6379:1,10.0.0.3:6379:2", "-replicas", "2", "user:1", "user:2"}, "", 0, ""},
	{"locate-pool-json", []string{"locate", "-json", "-strategy", "rendezvous", "-nodes", "a,b", "-replicas", "3", "user:1"}, "", 0, ""},
	{"locate-pool-with-n", []string{"locate", "-strategy", "ring", "-n", "3", "k"}, "", 2, "-strategy ring is a pool: name its nodes with -nodes"},
	{"locate-dense-with-nodes", []string{"locate", "-strategy", "jump", "-nodes", "a,b", "k"}, "", 2, "-strategy jump numbers its shards"},
	{"locate-duplicate-node", []string{"locate", "-strategy", "ring", "-nodes", "a,b,a", "k"}, "", 2, `-nodes: pool: ring: add "a": already a member`},
	{"locate-node-weight-range", []string{"locate", "-strategy", "ring", "-nodes", "a:70000", "k"}, "", 2, "weight 70000"},
	{"locate-nodes-no-strategy", []string{"locate", "-nodes", "a,b", "k"}, "", 2, "-nodes needs -strategy"},
	{"locate-unknown-preset", []string{"locate", "-preset", "squid", "-config", "x.conf", "k"}, "", 2, `unknown preset "squid"`},
	{"locate-preset-nginx", []string{"locate", "-preset", "nginx", "-config", "nginx.conf", "-pool", "cache", "-replicas", "2", "user:1", "user:2", "{tag}x"}, "", 0, ""},
	{"locate-preset-goredis", []string{"locate", "-json", "-preset", "goredis", "-config", "goredis.json", "user:1", "{user1}.a", "{user1}.b"}, "", 0, ""},
	{"locate-preset-no-config", []string{"locate", "-preset", "nginx", "k"}, "", 2, "-preset nginx needs -config FILE"},
	{"locate-preset-bad-config", []string{"locate", "-preset", "nginx", "-config", "nginx-bad.conf", "-pool", "cache", "k"}, "", 1, "nginx-bad.conf: compat: nginx: line 3"},
	{"locate-preset-missing-config", []string{"locate", "-preset", "nginx", "-config", "nowhere.conf", "k"}, "", 1, "nowhere.conf: no such file"},
	{"locate-preset-unknown-pool", []string{"locate", "-preset", "nginx", "-config", "nginx.conf", "-pool", "nope", "k"}, "", 1, "nope"},
	{"locate-preset-kafka", []string{"locate", "-preset", "kafka", "-partitions", "12", "user:1000", "order-42", ""}, "", 0, ""},
	{"locate-preset-kafka-config", []string{"locate", "-json", "-preset", "kafka", "-partitions", "12", "-config", "kafka.properties", "user:1000", "order-42"}, "", 0, ""},
	{"locate-preset-kafka-no-partitions", []string{"locate", "-preset", "kafka", "k"}, "", 2, "-preset kafka needs -partitions N"},
	{"locate-preset-kafka-bad-config", []string{"locate", "-preset", "kafka", "-partitions", "3", "-config", "kafka-bad.properties", "k"}, "", 1, "kafka-bad.properties: compat: kafka: line 2: partitioner.class"},
	{"locate-preset-kafka-with-n", []string{"locate", "-preset", "kafka", "-n", "3", "k"}, "", 2, "drop -strategy and -n"},

	// plan
	{"plan-jump-grow", []string{"plan", "-strategy", "jump", "-n", "10", "-to", "11", "-keys", "20000"}, "", 0, ""},
	{"plan-modulo-grow", []string{"plan", "-strategy", "modulo", "-n", "4", "-to", "5", "-keys", "20000"}, "", 0, ""},
	{"plan-partitions", []string{"plan", "-strategy", "partitions", "-n", "4", "-partitions", "16", "-to", "5", "-keys", "20000"}, "", 0, ""},
	{"plan-trie-shrink", []string{"plan", "-strategy", "trie", "-n", "5", "-to", "4", "-keys", "20000"}, "", 0, ""},
	{"plan-switch-strategy", []string{"plan", "-strategy", "modulo", "-n", "8", "-to-strategy", "jump", "-keys", "20000"}, "", 0, ""},
	{"plan-switch-and-resize", []string{"plan", "-strategy", "jump", "-n", "8", "-to-strategy", "rendezvous", "-to-n", "9", "-keys", "20000"}, "", 0, ""},
	{"plan-tables", []string{"plan", "-table", "slots.txt", "-to-table", "parts.txt", "-keys", "1000"}, "", 0, ""},
	{"plan-trie-table", []string{"plan", "-table", "trie.txt", "-to", "4", "-keyfile", "keys.txt"}, "", 0, ""},
	{"plan-keys-stdin", []string{"plan", "-strategy", "jump", "-n", "2", "-to", "3", "-keyfile", "-"}, "a\nb\nc\nd\ne\nf\n", 0, ""},
	{"plan-json", []string{"plan", "-json", "-strategy", "partitions", "-n", "2", "-partitions", "8", "-to", "3", "-keys", "1000"}, "", 0, ""},
	{"plan-pool-remove", []string{"plan", "-strategy", "ring", "-nodes", "a,b,c,d", "-remove", "b", "-keys", "20000"}, "", 0, ""},
	{"plan-pool-add", []string{"plan", "-strategy", "rendezvous", "-nodes", "a,b,c", "-add", "d:2", "-keys", "20000"}, "", 0, ""},
	{"plan-pool-weight", []string{"plan", "-strategy", "rendezvous", "-nodes", "a,b,c", "-weight", "b:3", "-keys", "20000"}, "", 0, ""},
	{"plan-pool-to-nodes", []string{"plan", "-strategy", "ring", "-nodes", "a,b,c", "-to-nodes", "a,c,d", "-keys", "20000"}, "", 0, ""},
	{"plan-pool-to-strategy", []string{"plan", "-json", "-strategy", "ring", "-nodes", "a,b", "-to-strategy", "rendezvous", "-keys", "2000"}, "", 0, ""},
	{"plan-pool-to-dense", []string{"plan", "-strategy", "ring", "-nodes", "a,b", "-to-strategy", "jump", "-to-n", "2"}, "", 2, "shard numbers and node names cannot be compared"},
	{"plan-pool-resize", []string{"plan", "-strategy", "ring", "-nodes", "a,b", "-to", "3"}, "", 2, "a pool's size is its nodes"},
	{"plan-pool-remove-all", []string{"plan", "-strategy", "ring", "-nodes", "a,b", "-remove", "a,b"}, "", 2, "pool would be empty"},
	{"plan-pool-remove-unknown", []string{"plan", "-strategy", "ring", "-nodes", "a,b", "-remove", "x"}, "", 2, `remove "x": not a member`},
	{"plan-pool-bad-weight", []string{"plan", "-strategy", "ring", "-nodes", "a,b", "-weight", "b"}, "", 2, "want one name:weight"},
	{"plan-preset-grown", []string{"plan", "-preset", "nginx", "-config", "nginx.conf", "-pool", "cache", "-to-config", "nginx-grown.conf", "-keys", "20000"}, "", 0, ""},
	{"plan-preset-kafka", []string{"plan", "-preset", "kafka", "-partitions", "12", "-to", "13", "-keys", "20000"}, "", 0, ""},
	{"plan-preset-remove", []string{"plan", "-preset", "goredis", "-config", "goredis.json", "-remove", "b", "-keys", "20000"}, "", 0, ""},
	{"plan-preset-to-pool", []string{"plan", "-preset", "goredis", "-config", "goredis.json", "-to-strategy", "memento", "-to-nodes", "a,b,c", "-keys", "20000"}, "", 0, ""},
	{"help-presets", []string{"help", "presets"}, "", 0, ""},
	{"plan-nothing-changes", []string{"plan", "-strategy", "jump", "-n", "10"}, "", 2, "nothing changes"},
	{"plan-two-changes", []string{"plan", "-strategy", "jump", "-n", "10", "-to", "11", "-add", "x"}, "", 2, "give one change"},
	{"plan-n-0", []string{"plan", "-strategy", "jump", "-n", "0", "-to", "3"}, "", 2, "-n 0"},
	{"plan-to-0", []string{"plan", "-strategy", "jump", "-n", "3", "-to", "0"}, "", 2, "-to 0: want the number of shards"},
	{"plan-to-n-negative", []string{"plan", "-strategy", "jump", "-n", "3", "-to-strategy", "modulo", "-to-n", "-2"}, "", 2, "-to-n -2: want the number of shards"},
	{"plan-to-too-big", []string{"plan", "-strategy", "first-byte-sha1", "-n", "10", "-to", "11"}, "", 2, "allowed range is [1, 10]"},
	{"plan-unknown-to-strategy", []string{"plan", "-strategy", "jump", "-n", "10", "-to-strategy", "nope"}, "", 2, `unknown strategy "nope"`},
	{"plan-add-to-dense", []string{"plan", "-strategy", "jump", "-n", "10", "-add", "x"}, "", 2, "-add, -remove and -weight change a pool"},
	{"plan-keys-0", []string{"plan", "-strategy", "jump", "-n", "10", "-to", "11", "-keys", "0"}, "", 2, "-keys 0"},
	{"plan-unreadable-keyfile", []string{"plan", "-strategy", "jump", "-n", "10", "-to", "11", "-keyfile", "nowhere.txt"}, "", 1, "key file: open nowhere.txt"},
	{"plan-empty-keyfile", []string{"plan", "-strategy", "jump", "-n", "10", "-to", "11", "-keyfile", "empty.txt"}, "", 1, "no keys"},
	{"plan-malformed-table", []string{"plan", "-table", "trie-bad.txt", "-to", "2"}, "", 1, `line 3 "1 one"`},
	{"plan-many-flows", []string{"plan", "-strategy", "modulo", "-n", "6", "-to", "7", "-keys", "5000", "-flows", "5"}, "", 0, ""},
	{"plan-argument", []string{"plan", "-strategy", "jump", "-n", "10", "-to", "11", "extra"}, "", 2, `unexpected argument "extra"`},
	{"plan-murmur-ring-grow", []string{"plan", "-strategy", "murmur-ring", "-n", "4", "-vnodes", "16", "-to", "5", "-keys", "20000"}, "", 0, ""},
	{"plan-jedis-ring-grow", []string{"plan", "-strategy", "jedis-ring", "-n", "3", "-to", "4", "-keys", "20000"}, "", 0, ""},
	{"plan-ring-json", []string{"plan", "-json", "-strategy", "murmur-ring", "-n", "2", "-vnodes", "4", "-to", "3", "-keys", "1000"}, "", 0, ""},
	{"plan-pool-ring-add", []string{"plan", "-strategy", "ring", "-nodes", "a,b,c", "-vnodes", "8", "-add", "d", "-keys", "20000"}, "", 0, ""},
	{"plan-pool-ring-weight", []string{"plan", "-strategy", "ring", "-nodes", "a,b,c", "-vnodes", "8", "-weight", "b:2", "-ranges", "5", "-keys", "20000"}, "", 0, ""},
	{"plan-preset-ketama", []string{"plan", "-preset", "twemproxy", "-config", "nutcracker.yml", "-add", "10.0.0.4:1", "-ranges", "10", "-keys", "20000"}, "", 0, ""},
	{"plan-ring-other-hash", []string{"plan", "-strategy", "murmur-ring", "-n", "4", "-to-strategy", "jedis-ring", "-keys", "2000"}, "", 0, ""},
	{"plan-ranges-negative", []string{"plan", "-strategy", "jump", "-n", "2", "-to", "3", "-ranges", "-1"}, "", 2, "-ranges -1: want 0 or more"},

	// table
	{"table-show-parts", []string{"table", "show", "parts.txt", "slots.txt"}, "", 0, ""},
	{"table-show-trie-json", []string{"table", "show", "-json", "trie.txt"}, "", 0, ""},
	{"table-check", []string{"table", "check", "parts.txt", "trie.txt"}, "", 0, ""},
	{"table-check-bad", []string{"table", "check", "parts.txt", "parts-bad.txt", "trie-bad.txt"}, "", 1, "table line 4: gap: partitions 8-8 have no owner"},
	{"table-check-bad-json", []string{"table", "check", "-json", "parts-bad.txt"}, "", 1, "1 of 1 files"},
	{"table-check-missing", []string{"table", "check", "nowhere.txt"}, "", 1, "nowhere.txt: no such file"},
	{"table-check-not-a-table", []string{"table", "check", "keys.txt"}, "", 1, "keys.txt: its first line \"user:1\" is none of"},
	{"table-new-partitions", []string{"table", "new", "-strategy", "partitions", "-partitions", "12", "-n", "5"}, "", 0, ""},
	{"table-new-trie", []string{"table", "new", "-strategy", "trie", "-n", "6"}, "", 0, ""},
	{"table-new-exists", []string{"table", "new", "-strategy", "trie", "-n", "6", "-o", "trie.txt"}, "", 1, "trie.txt exists"},
	{"table-new-n-0", []string{"table", "new", "-strategy", "trie", "-n", "0"}, "", 2, "-n 0"},
	{"table-new-unknown", []string{"table", "new", "-strategy", "jump", "-n", "3"}, "", 2, `-strategy "jump": want partitions, redis-cluster, trie or memento`},
	{"table-edit-resize", []string{"table", "edit", "-resize", "5", "parts.txt"}, "", 0, ""},
	{"table-edit-move", []string{"table", "edit", "-move", "0-99:2", "-move", "200:1", "slots.txt"}, "", 0, ""},
	{"table-edit-split-json", []string{"table", "edit", "-json", "-split", "1", "trie.txt"}, "", 0, ""},
	{"table-edit-merge-subtree", []string{"table", "edit", "-merge", "1", "trie.txt"}, "", 1, "sibling is a subtree"},
	{"table-edit-split-parts", []string{"table", "edit", "-split", "1", "parts.txt"}, "", 2, "-split, -merge: parts.txt is a partition table"},
	{"table-edit-move-bad-shard", []string{"table", "edit", "-move", "3:9", "parts.txt"}, "", 2, "shard 9: allowed range is [0, 4)"},
	{"table-edit-move-syntax", []string{"table", "edit", "-move", "3", "parts.txt"}, "", 2, "want PARTITION:SHARD"},
	{"table-edit-two-edits", []string{"table", "edit", "-resize", "3", "-move", "1:1", "parts.txt"}, "", 2, "give one of"},
	{"table-edit-malformed", []string{"table", "edit", "-resize", "3", "parts-bad.txt"}, "", 1, "table line 4"},
	{"table-edit-no-file", []string{"table", "edit", "-resize", "3"}, "", 2, "want one FILE"},
	{"table-flag-after-file", []string{"table", "edit", "parts.txt", "-resize", "3"}, "", 2, "flags go before FILE"},
	{"table-no-action", []string{"table"}, "", 2, "no action"},
	{"table-dash-h", []string{"table", "-h"}, "", 0, ""},
	{"table-show-pool", []string{"table", "show", "pool.txt"}, "", 0, ""},
	{"table-check-pool-bad", []string{"table", "check", "pool-bad.txt"}, "", 1, "pool-bad.txt: pool: memento"},
	{"table-new-memento", []string{"table", "new", "-strategy", "memento", "-nodes", "x,y:3"}, "", 0, ""},
	{"table-new-memento-n", []string{"table", "new", "-strategy", "memento", "-n", "3"}, "", 2, "takes -nodes, not -n"},
	{"table-edit-pool-remove", []string{"table", "edit", "-remove", "b", "pool.txt"}, "", 0, ""},
	{"table-edit-pool-resize", []string{"table", "edit", "-resize", "2", "pool.txt"}, "", 2, "pool.txt is a pool state"},
	{"table-edit-parts-add", []string{"table", "edit", "-add", "d", "parts.txt"}, "", 2, "they edit a pool state"},
	{"locate-pool-state", []string{"locate", "-table", "pool.txt", "-replicas", "2", "user:1", "user:2"}, "", 0, ""},
	{"plan-pool-state", []string{"plan", "-table", "pool.txt", "-remove", "a", "-keys", "20000"}, "", 0, ""},
	{"table-unknown-action", []string{"table", "fix", "parts.txt"}, "", 2, `unknown action "fix"`},
	{"table-flag-wrong-action", []string{"table", "show", "-resize", "3", "parts.txt"}, "", 2, "-resize does not apply to show"},

	// compare: the timing and memory columns vary, so the golden cases run without timing
	// and TestCompare checks the rest.
	{"compare-n-0", []string{"compare", "-shards", "0"}, "", 2, "-shards 0"},
	{"compare-plot-pdf", []string{"compare", "-plot", "chart.pdf"}, "", 2, "want a file name ending in .svg or .png"},
	{"compare-unreadable-keyfile", []string{"compare", "-keyfile", "nowhere.txt", "-rounds", "0", "-seeds", "0"}, "", 1, "key file: open nowhere.txt"},
	{"compare-empty-keyfile", []string{"compare", "-keyfile", "empty.txt", "-rounds", "0", "-seeds", "0"}, "", 1, "empty.txt: no keys"},
}

func TestGolden(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runShard(t, workdir(t), c.stdin, c.args...)
			assert.Equal(t, c.code, r.code, "exit status of shard %s; stderr:\n%s", strings.Join(c.args, " "), r.stderr)
			if c.code != 0 {
				assert.Contains(t, r.stderr, c.want, "the message must name the problem")
			}
			golden(t, c.name, c.args, r)
		})
	}
}

// TestEditWrite checks that -w replaces the file with the edited table, and that a failed
// edit leaves the file and its directory as they were.
func TestEditWrite(t *testing.T) {
	dir := workdir(t)
	r := runShard(t, dir, "", "table", "edit", "-resize", "5", "-w", "parts.txt")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "parts.txt: resize to 5 shards: 3 of 16 partitions move (18.75%)")
	got, err := os.ReadFile(filepath.Join(dir, "parts.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hash=xxh64 partitions=16 shards=5\n0-3 0\n4-6 1\n7 4\n8-10 2\n11 4\n12-14 3\n15 4\n", string(got))

	r = runShard(t, dir, "", "table", "edit", "-resize", "17", "-w", "parts.txt")
	require.Equal(t, 2, r.code, r.stderr)
	again, err := os.ReadFile(filepath.Join(dir, "parts.txt"))
	require.NoError(t, err)
	assert.Equal(t, got, again, "a failed edit changes nothing")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".tmp-", "no temporary file is left behind")
	}

	r = runShard(t, dir, "", "table", "new", "-strategy", "redis-cluster", "-n", "2", "-o", "new.txt")
	require.Equal(t, 0, r.code, r.stderr)
	r = runShard(t, dir, "", "table", "check", "new.txt")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "new.txt: ok: partition table (hash=redis, 16384 partitions, 2 shards)\n", r.stdout)
}

// TestLocateMatchesLibrary checks the command against the library on many keys from
// stdin: the golden cases pin a few, this pins the plumbing (quoting, order, no key lost).
func TestLocateMatchesLibrary(t *testing.T) {
	var in strings.Builder
	var keys []string
	for i := range 2000 {
		k := fmt.Sprintf("key-%d", i)
		keys = append(keys, k)
		in.WriteString(k + "\n")
	}
	r := runShard(t, t.TempDir(), in.String(), "locate", "-json", "-strategy", "jedis-ring", "-n", "7", "-")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, len(keys))
	p, err := (&spec{strategy: "jedis-ring", n: 7}).build()
	require.NoError(t, err)
	for i, line := range lines {
		var got struct {
			Key   string
			Shard int
		}
		require.NoError(t, json.Unmarshal([]byte(line), &got))
		require.Equal(t, keys[i], got.Key)
		require.Equal(t, p.dense.Locate(keys[i]), got.Shard, keys[i])
	}
}

// TestCompare runs the main job small and checks its table: every strategy, the ideal row,
// and the figures that do not depend on the machine.
func TestCompare(t *testing.T) {
	args := []string{"compare", "-keys", "3000", "-vnodes", "100", "-rounds", "1", "-seeds", "1"}
	r := runShard(t, t.TempDir(), "", args...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr, "no progress when stderr is not a terminal")
	for _, want := range []string{"| modulo ", "| jump ", "| redis-cluster ", "| ideal ", "moved % 10->11", "moved % 10->20",
		"state bytes", "9.09", "50.00", "The consistent-hash homework [002]", "| 5000   |",
		"Named pools (package pool)", "| maglev pool ", "10 nodes: node5 leaves", "node100 joins"} {
		assert.Contains(t, r.stdout, want)
	}
	// Without timing the output depends only on the keys, except the machine and the heap
	// bytes: pin it with those masked.
	args = []string{"compare", "-keys", "3000", "-vnodes", "100", "-rounds", "0", "-seeds", "1"}
	r = runShard(t, t.TempDir(), "", args...)
	require.Equal(t, 0, r.code, r.stderr)
	r.stdout = maskCompare(r.stdout)
	golden(t, "compare-small", args, r)

	r = runShard(t, t.TempDir(), "", "compare", "-json", "-keys", "2000", "-shards", "12", "-rounds", "1", "-seeds", "0")
	require.Equal(t, 0, r.code, r.stderr)
	var rep compareReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, 12, rep.Shards)
	assert.Equal(t, 2000, rep.Keys)
	assert.Nil(t, rep.Curve)
	require.Len(t, rep.Rows, len(catalog.All())+len(catalog.Pools()))
	for _, row := range rep.Rows {
		if row.Strategy == "first-byte-sha1" {
			assert.False(t, row.Fits, "first-byte SHA-1 has at most 10 shards")
			continue
		}
		assert.True(t, row.Fits, row.Strategy)
		assert.Positive(t, row.NsPerOp, row.Strategy)
		require.NotNil(t, row.GrowPct, row.Strategy)
	}
	checkPoolsSection(t, rep.Pools)
}

// checkPoolsSection checks the figures of compare's pools section that follow from the
// algorithms, whatever the keys: the ideal fair shares, a removal undone by adding the node
// back for every strategy whose placement depends only on the membership, and Memento, whose
// Add takes back the bucket the last Remove freed.
func checkPoolsSection(t *testing.T, p *poolsReport) {
	t.Helper()
	require.NotNil(t, p)
	require.Len(t, p.Rows, len(catalog.Pools())+1, "every pool strategy and the ring at -vnodes")
	require.Equal(t, []int{10, 100}, p.Sizes)
	// Weights 1, 2, 3, 4, 1, ...: 23 over 10 nodes, node5 weighs 2, node10 joins with 3;
	// 250 over 100 nodes, node50 weighs 3, node100 joins with 1.
	assert.InDelta(t, 100*2.0/23, p.Ideal[0].LeavePct, 1e-9)
	assert.InDelta(t, 100*3.0/26, p.Ideal[0].JoinPct, 1e-9)
	assert.InDelta(t, 100*3.0/250, p.Ideal[1].LeavePct, 1e-9)
	assert.InDelta(t, 100*1.0/251, p.Ideal[1].JoinPct, 1e-9)
	for _, r := range p.Rows {
		require.Len(t, r.At, 2, r.Strategy)
		for _, at := range r.At {
			assert.Positive(t, at.LeavePct, r.Strategy)
			assert.GreaterOrEqual(t, at.MaxIdeal, 1.0, "%s: some node holds at least its fair share", r.Strategy)
			if r.Strategy == "modula pool" {
				continue // a node that rejoins comes back at the end of the slot table
			}
			assert.Zerof(t, at.NotHomePct, "%s, %d nodes: keys not home after %s left and came back", r.Strategy, at.Nodes, at.Middle)
			assert.InDeltaf(t, at.LeavePct, at.RejoinPct, 1e-9, "%s, %d nodes: a rejoin moves back what the leave moved", r.Strategy, at.Nodes)
		}
		if strings.HasPrefix(r.Strategy, "ring pool") {
			require.NotNil(t, r.At[0].ExactWorstDevPct, r.Strategy)
		} else {
			assert.Nil(t, r.At[0].ExactWorstDevPct, r.Strategy)
		}
	}
}

var (
	machineLine = regexp.MustCompile(`(?m)^Machine: .*$`)
	// stateBytes matches the state bytes column: the fourth cell of a table row.
	stateBytes = regexp.MustCompile(`(?m)^(\|[^|]*\|[^|]*\|[^|]*\|)( *)(\d+) \|`)
)

// maskCompare hides what depends on the machine and the heap in compare's output.
func maskCompare(s string) string {
	s = machineLine.ReplaceAllString(s, "Machine: (masked)")
	return stateBytes.ReplaceAllStringFunc(s, func(m string) string {
		g := stateBytes.FindStringSubmatch(m)
		return g[1] + strings.Repeat(" ", len(g[2])+len(g[3])-1) + "N |"
	})
}

// TestProgress runs verbs in this process with stderr taken for a terminal: the status line
// shows, overwrites itself and is cleared before the result, and stdout holds only the
// result.
func TestProgress(t *testing.T) {
	for _, args := range [][]string{
		{"compare", "-keys", "2000", "-rounds", "1", "-seeds", "1"},
		{"plan", "-strategy", "jump", "-n", "3", "-to", "4", "-keys", "200000"},
	} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, stderrTerminal: true}
		require.Equal(t, 0, run(e, args), stderr.String())
		got := stderr.String()
		assert.Contains(t, got, "\r[", args[0])
		assert.True(t, strings.HasSuffix(got, "\r"), "%s: the last write clears the line: %q", args[0], got[max(0, len(got)-40):])
		assert.NotContains(t, stdout.String(), "\r", args[0])
	}
	var stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr}
	require.Equal(t, 0, run(e, []string{"plan", "-strategy", "jump", "-n", "3", "-to", "4", "-keys", "1000"}))
	assert.Empty(t, stderr.String(), "no progress when stderr is not a terminal")
}

// TestPresetsMatchVectors runs shard locate -preset over one configuration of every preset's
// system and compares each key's node with the golden vectors of testdata/compat, made by
// running the real system. Keys holding a line break cannot travel one per line on stdin
// and are left out.
func TestPresetsMatchVectors(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "compat")
	keys := compatKeys(t, filepath.Join(root, "keys.txt"))
	for _, c := range []struct{ preset, config, pool string }{
		{"nginx", "nginx/chash-3.conf", "chash-3"},
		{"haproxy", "haproxy/consistent-crc32-10.cfg", "consistent-crc32-10"},
		{"goredis", "goredis/ring-10-mixed-names.json", ""},
		{"jedis", "jedis/mixed-4-named-and-unnamed.json", ""},
		{"grpc", "grpc/weights-1-2-3-4.json", ""},
		{"vitess", "vitess/xxhash-uneven-5.json", ""},
	} {
		t.Run(c.preset, func(t *testing.T) {
			config, err := filepath.Abs(filepath.Join(root, c.config))
			require.NoError(t, err)
			servers, want := compatVectors(t, filepath.Join(root, strings.TrimSuffix(c.config, filepath.Ext(c.config))+".txt"))
			var in strings.Builder
			var sent []int
			for i, k := range keys {
				if _, ok := want[i]; ok && !strings.ContainsAny(k, "\n\r") {
					in.WriteString(k + "\n")
					sent = append(sent, i)
				}
			}
			args := []string{"locate", "-json", "-preset", c.preset, "-config", config, "-pool", c.pool, "-"}
			r := runShard(t, t.TempDir(), in.String(), args...)
			require.Equal(t, 0, r.code, r.stderr)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			require.Len(t, lines, len(sent))
			for j, line := range lines {
				var got struct{ Key, Node string }
				require.NoError(t, json.Unmarshal([]byte(line), &got))
				i := sent[j]
				require.Equal(t, keys[i], got.Key)
				require.Equal(t, servers[want[i]], got.Node, "key %d %q", i, keys[i])
			}
			assert.Greater(t, len(sent), len(want)*9/10, "most of the keys of the vectors are checked")
		})
	}
}

// compatKeys reads testdata/compat/keys.txt: one key per line in hex, "-" for the empty key.
func compatKeys(t *testing.T, path string) []string {
	t.Helper()
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	var keys []string
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		if line == "-" {
			keys = append(keys, "")
			continue
		}
		b, err := hex.DecodeString(line)
		require.NoError(t, err, line)
		keys = append(keys, string(b))
	}
	return keys
}

// compatVectors reads a vector file: the server names by index, and the server index of
// each key index carried.
func compatVectors(t *testing.T, path string) (map[int]string, map[int]int) {
	t.Helper()
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	servers, want := map[int]string{}, map[int]int{}
	index := regexp.MustCompile(`(?:^| )(\d+)=`)
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSuffix(line, "\n")
		if list, ok := strings.CutPrefix(line, "# servers: "); ok {
			marks := index.FindAllStringSubmatchIndex(list, -1)
			for m, loc := range marks {
				end := len(list)
				if m+1 < len(marks) {
					end = marks[m+1][0]
				}
				i, _ := strconv.Atoi(list[loc[2]:loc[3]])
				servers[i] = list[loc[1]:end]
			}
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		k, s, _ := strings.Cut(line, " ")
		ki, err1 := strconv.Atoi(k)
		si, err2 := strconv.Atoi(s)
		require.NoError(t, errors.Join(err1, err2), line)
		want[ki] = si
	}
	require.NotEmpty(t, servers, path)
	return servers, want
}

// TestCompareZipf runs compare -zipf small: a skew row for every strategy that fits and
// every pool, the pools' bounded column within its cap, the dense strategies' n/a.
func TestCompareZipf(t *testing.T) {
	r := runShard(t, t.TempDir(), "", "compare", "-json", "-keys", "3000", "-rounds", "0", "-seeds", "0", "-zipf", "1.1")
	require.Equal(t, 0, r.code, r.stderr)
	var rep compareReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.NotNil(t, rep.Skew)
	assert.Equal(t, 1.1, rep.Skew.S)
	assert.Equal(t, 3000, rep.Skew.Requests)
	require.Len(t, rep.Skew.Rows, len(catalog.All())+len(catalog.Pools()))
	capAvg := math.Ceil(1.25*3000/10) * 10 / 3000
	for _, row := range rep.Skew.Rows {
		assert.GreaterOrEqual(t, row.MaxAvg, 1.0, row.Strategy)
		assert.GreaterOrEqual(t, row.MaxAvg, rep.Skew.StickyFloor-1e-9, "%s: a key's requests stay on one shard", row.Strategy)
		if !strings.HasSuffix(row.Strategy, " pool") {
			assert.Nil(t, row.BoundedMaxAvg, row.Strategy)
			continue
		}
		require.NotNil(t, row.BoundedMaxAvg, row.Strategy)
		assert.LessOrEqual(t, *row.BoundedMaxAvg, capAvg+1e-9, row.Strategy)
		assert.Positive(t, *row.OffOwnerPct, row.Strategy)
	}
	r = runShard(t, t.TempDir(), "", "compare", "-keys", "3000", "-rounds", "0", "-seeds", "0", "-zipf", "1.1")
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{"Skew: 3000 requests, Zipf(1.1)", "| ring pool ", "| one shard a key ", "max/avg bounded c=1.25"} {
		assert.Contains(t, r.stdout, want)
	}
	for _, bad := range []string{"1", "0.5", "-2", "NaN", "101", "+Inf"} {
		r := runShard(t, t.TempDir(), "", "compare", "-zipf", bad)
		assert.Equal(t, 2, r.code, bad)
		assert.Contains(t, r.stderr, "-zipf", bad)
	}
}
