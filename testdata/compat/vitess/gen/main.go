// Command gen writes the Vitess vindex compatibility vectors with Vitess's own code: each value
// is mapped to a keyspace id by the vindex that vindexes.CreateVindex makes (its Map, as vtgate
// calls it), and the keyspace id is resolved to a shard by key.DestinationKeyspaceID.Resolve
// over the keyspace's shards as vtgate sees them: every name checked by topo.ValidateShardName
// and the partition by topo.OrderAndCheckPartitions (which sorts it and refuses gaps and
// overlaps).
//
//	go run . -keys ../../keys.txt -out ..
//
// It also writes the primary collation weights of every ASCII character under Vitess's
// unicode_loose_* collation (ascii-weights.txt), after checking that the weights of every
// ASCII string of up to 3 characters, and of random longer ones, are those of its
// characters one after another.
package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"vitess.io/vitess/go/mysql/collations/vindex/collate"
	"vitess.io/vitess/go/sqltypes"
	"vitess.io/vitess/go/vt/key"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	"vitess.io/vitess/go/vt/topo"
	"vitess.io/vitess/go/vt/vtgate/vindexes"
)

// stringVindexes hash a value's bytes; intVindexes its integer value.
var (
	stringVindexes = []string{"xxhash", "binary_md5", "unicode_loose_md5", "unicode_loose_xxhash", "binary"}
	intVindexes    = []string{"hash", "numeric", "reverse_bits"}
)

// shardLists are keyspaces' shards as vtgate serves them, by file name; refusals those
// Vitess refuses, with the step that refuses them.
var shardLists = []struct {
	file   string
	shards []string
	all    bool // with every vindex, not only hash and xxhash
}{
	{"unsharded-0", []string{"0"}, false},
	{"one-range", []string{"-"}, false},
	{"2", []string{"-80", "80-"}, true},
	{"4", []string{"-40", "40-80", "80-c0", "c0-"}, true},
	{"16", evenShards(16), false},
	{"uneven-5", []string{"-10", "10-80", "80-8080", "8080-f0", "f0-"}, true},
	{"4-unordered", []string{"c0-", "-40", "80-c0", "40-80"}, false},
	{"2-trailing-zeros", []string{"-8000", "8000-"}, false},
	{"3-empty-middle", []string{"-80", "80-8000", "8000-"}, false},
	{"2-upper-case", []string{"-8A", "8A-"}, false},
	{"32-width-4", evenShardsWidth(32, 4), false},
	{"3-long-bounds", []string{"-55555555555555555555", "55555555555555555555-aaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaa-"}, false},
}

var refusedLists = []struct {
	file   string
	shards []string
}{
	{"refused-overlap", []string{"-80", "40-"}},
	{"refused-gap", []string{"-40", "80-"}},
	{"refused-no-min", []string{"40-80", "80-"}},
	{"refused-no-max", []string{"-80", "80-c0"}},
	{"refused-twice", []string{"-80", "-80", "80-"}},
	{"refused-bad-hex", []string{"-8g", "8g-"}},
	{"refused-odd-hex", []string{"-8", "8-"}},
	{"refused-two-dashes", []string{"-40-80", "80-"}},
	{"refused-out-of-order", []string{"-80", "80-40", "40-"}},
	{"refused-equal-bounds", []string{"-80", "80-80", "80-"}},
	{"refused-empty-name", []string{"", "-"}},
	{"refused-bad-char", []string{"-80", "80-.", "."}},
	{"refused-too-long", []string{"-" + strings.Repeat("8", 64), strings.Repeat("8", 64) + "-"}},
	{"refused-mixed-custom", []string{"0", "80-"}},
	{"refused-no-shards", nil},
	{"refused-end-00", []string{"-00"}},
	{"refused-end-00-and-00-", []string{"-00", "00-"}},
}

func evenShards(n int) []string { return evenShardsWidth(n, 2) }

func evenShardsWidth(n, width int) []string {
	s, err := key.GenerateShardRanges(n, width)
	if err != nil {
		log.Fatal(err)
	}
	return s
}

func main() {
	keysPath := flag.String("keys", "../../keys.txt", "the shared key set")
	outDir := flag.String("out", "..", "where the configs and vectors go")
	flag.Parse()

	keys, err := readKeys(*keysPath)
	if err != nil {
		log.Fatal(err)
	}
	ints := intValues()
	if err := writeValues(filepath.Join(*outDir, "ints.txt"), ints); err != nil {
		log.Fatal(err)
	}
	version := "vitess " + vitessVersion() + " (" + goVersion() + ")"

	// Keyspace ids: one file per vindex.
	ksids := map[string][][]byte{}
	for _, v := range append(append([]string{}, stringVindexes...), intVindexes...) {
		values, set := keys, "keys.txt"
		if isInt(v) {
			values, set = ints, "ints.txt"
		}
		ids, err := keyspaceIDs(v, values)
		if err != nil {
			log.Fatalf("gen: %s: %v", v, err)
		}
		ksids[v] = ids
		var b strings.Builder
		fmt.Fprintf(&b, "# system: %s, vindexes.CreateVindex(%q).Map, one value at a time\n", version, v)
		fmt.Fprintf(&b, "# values: %s (%s)\n", set, valueTypes(v))
		b.WriteString("# <value index> <keyspace id in hex, or - when the vindex maps the value to no keyspace id>\n")
		none := 0
		for i, id := range ids {
			if id == nil {
				none++
				fmt.Fprintf(&b, "%d -\n", i)
			} else {
				fmt.Fprintf(&b, "%d %s\n", i, hex.EncodeToString(id))
			}
		}
		if err := os.WriteFile(filepath.Join(*outDir, "ksid-"+v+".txt"), []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("ksid-%s: %d values, %d mapped to no keyspace id\n", v, len(ids), none)
	}

	// Shards: each shard list with hash and xxhash, the main lists with every vindex.
	for _, l := range shardLists {
		refs, err := partition(l.shards)
		if err != nil {
			log.Fatalf("gen: %s: Vitess refuses %v: %v", l.file, l.shards, err)
		}
		for _, v := range append(append([]string{}, stringVindexes...), intVindexes...) {
			if !l.all && v != "hash" && v != "xxhash" {
				continue
			}
			name := v + "-" + l.file
			if err := writeConfig(filepath.Join(*outDir, name+".json"), v, l.shards); err != nil {
				log.Fatal(err)
			}
			where, counts, err := resolve(refs, l.shards, ksids[v])
			if err != nil {
				log.Fatalf("gen: %s: %v", name, err)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "# system: %s, vindex %s, shards resolved by key.DestinationKeyspaceID.Resolve over topo.OrderAndCheckPartitions' partition\n", version, v)
			fmt.Fprintf(&b, "# values: %s; keyspace ids: ksid-%s.txt\n", map[bool]string{true: "ints.txt", false: "keys.txt"}[isInt(v)], v)
			b.WriteString("# servers:")
			for i, s := range l.shards {
				fmt.Fprintf(&b, " %d=%s", i, s)
			}
			b.WriteString("\n# <value index> <shard index, or - for a value mapped to no shard>\n")
			for i, w := range where {
				if w < 0 {
					fmt.Fprintf(&b, "%d -\n", i)
				} else {
					fmt.Fprintf(&b, "%d %d\n", i, w)
				}
			}
			if err := os.WriteFile(filepath.Join(*outDir, name+".txt"), []byte(b.String()), 0o644); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s: per shard %v\n", name, counts)
		}
	}
	for _, l := range refusedLists {
		if err := writeConfig(filepath.Join(*outDir, l.file+".json"), "hash", l.shards); err != nil {
			log.Fatal(err)
		}
		_, err := partition(l.shards)
		if err == nil {
			log.Fatalf("gen: %s: Vitess accepts %q", l.file, l.shards)
		}
		fmt.Printf("%s: %v\n", l.file, err)
	}

	if err := writeWeights(filepath.Join(*outDir, "ascii-weights.txt"), version); err != nil {
		log.Fatal(err)
	}
}

func isInt(v string) bool {
	for _, w := range intVindexes {
		if v == w {
			return true
		}
	}
	return false
}

func valueTypes(v string) string {
	if isInt(v) {
		return "each value an INT64 when strconv.ParseInt reads it, else a UINT64 when strconv.ParseUint does, else a VARCHAR"
	}
	return "each key a VARCHAR"
}

// sqlValue is the value vtgate would have for text: an integer literal's type when the text is
// one, else a string.
func sqlValue(text string, asInt bool) sqltypes.Value {
	if asInt {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return sqltypes.NewInt64(n)
		}
		if n, err := strconv.ParseUint(text, 10, 64); err == nil {
			return sqltypes.NewUint64(n)
		}
	}
	return sqltypes.NewVarChar(text)
}

// keyspaceIDs maps every value with the vindex's own Map; nil for DestinationNone or an error.
func keyspaceIDs(vindexType string, values []string) ([][]byte, error) {
	vdx, err := vindexes.CreateVindex(vindexType, vindexType, nil)
	if err != nil {
		return nil, err
	}
	single, ok := vdx.(vindexes.SingleColumn)
	if !ok {
		return nil, fmt.Errorf("%s is not a single-column vindex", vindexType)
	}
	out := make([][]byte, len(values))
	for i, text := range values {
		dests, err := single.Map(context.Background(), nil, []sqltypes.Value{sqlValue(text, isInt(vindexType))})
		if err != nil {
			continue // the whole Map fails: no keyspace id
		}
		switch d := dests[0].(type) {
		case key.DestinationKeyspaceID:
			out[i] = append([]byte{}, d...)
		case key.DestinationNone:
		default:
			return nil, fmt.Errorf("value %d: destination %T", i, d)
		}
	}
	return out, nil
}

// partition is the keyspace's serving partition as vtgate reads it from the topology: each
// name through topo.ValidateShardName (as CreateShard does), then the partition through
// topo.OrderAndCheckPartitions, which sorts it by key range.
func partition(shards []string) ([]*topodatapb.ShardReference, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("no shards")
	}
	var refs []*topodatapb.ShardReference
	for _, s := range shards {
		_, kr, err := topo.ValidateShardName(s)
		if err != nil {
			return nil, fmt.Errorf("shard %q: %w", s, err)
		}
		refs = append(refs, &topodatapb.ShardReference{Name: s, KeyRange: kr})
	}
	sk := &topodatapb.SrvKeyspace{Partitions: []*topodatapb.SrvKeyspace_KeyspacePartition{
		{ServedType: topodatapb.TabletType_PRIMARY, ShardReferences: refs},
	}}
	if err := topo.OrderAndCheckPartitions("cell", sk); err != nil {
		return nil, err
	}
	if len(refs) > 1 && refs[0].KeyRange == nil {
		// Several shards without key ranges pass OrderAndCheckPartitions (custom sharding),
		// but DestinationKeyspaceID then always picks the first in sorted order: not a
		// range-sharded keyspace. The committed lists have none.
		return nil, fmt.Errorf("several shards without key ranges")
	}
	return sk.Partitions[0].ShardReferences, nil
}

// resolve returns, per keyspace id, the index in shards (as listed) of the shard that
// DestinationKeyspaceID.Resolve names, -1 for none.
func resolve(refs []*topodatapb.ShardReference, shards []string, ids [][]byte) ([]int, []int, error) {
	index := map[string]int{}
	for i, s := range shards {
		index[s] = i
	}
	where := make([]int, len(ids))
	counts := make([]int, len(shards))
	for i, id := range ids {
		where[i] = -1
		if id == nil {
			continue
		}
		var got []string
		err := key.DestinationKeyspaceID(id).Resolve(refs, func(s string) error { got = append(got, s); return nil })
		if err != nil || len(got) != 1 {
			return nil, nil, fmt.Errorf("keyspace id %x: %v %v", id, got, err)
		}
		where[i] = index[got[0]]
		counts[where[i]]++
	}
	return where, counts, nil
}

func writeConfig(path, vindex string, shards []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n  \"vindex\": %q,\n  \"shards\": [", vindex)
	for i, s := range shards {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(s))
	}
	b.WriteString("]\n}\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// intValues are the integer vindexes' values: edges, odd texts, powers, random numbers.
func intValues() []string {
	vals := []string{"0", "1", "2", "3", "-1", "-2", "42", "255", "256", "65535", "65536",
		strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(math.MinInt64, 10),
		strconv.FormatUint(math.MaxUint64, 10), strconv.FormatUint(math.MaxUint64-1, 10),
		strconv.FormatUint(1<<63, 10), strconv.FormatInt(math.MaxInt64-1, 10), strconv.FormatInt(math.MinInt64+1, 10),
		// Texts that are no integer literal: VARCHAR values.
		"", " ", " 42", "42 ", "\t7", " 7\t", "+5", "-0", "007", "-007", "1.5", "1e3", "abc", "0x10", "12a",
		"18446744073709551616", "-9223372036854775809", "99999999999999999999999", "- 5", "5-", " -5",
	}
	for i := range 64 {
		vals = append(vals, strconv.FormatUint(1<<i, 10), strconv.FormatUint(1<<i-1, 10))
	}
	for i := range 20 {
		vals = append(vals, strconv.FormatUint(uint64(math.Pow10(i)), 10))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		vals = append(vals, strconv.FormatUint(r.Uint64(), 10))
	}
	for range 200 {
		vals = append(vals, strconv.FormatInt(-int64(r.Uint64()>>1)-1, 10))
	}
	for i := range 300 {
		vals = append(vals, strconv.Itoa(1000+i))
	}
	seen := map[string]bool{}
	var out []string
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// writeValues writes one Go-quoted value per line.
func writeValues(path string, vals []string) error {
	var b strings.Builder
	b.WriteString("# The values of the integer vindexes' vectors, one per line as a Go-quoted string; index = line, comments not counted.\n")
	b.WriteString("# Made by gen/ (intValues): edges, texts that are no integer literal, powers of 2 and 10, random numbers (PCG 1, 2).\n")
	for _, v := range vals {
		b.WriteString(strconv.Quote(v) + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// recorder is a hash.Hash that keeps what is written to it: the collation weights.
type recorder struct{ b []byte }

func (r *recorder) Write(p []byte) (int, error) { r.b = append(r.b, p...); return len(p), nil }
func (r *recorder) Sum(b []byte) []byte         { return append(b, r.b...) }
func (r *recorder) Reset()                      { r.b = r.b[:0] }
func (r *recorder) Size() int                   { return len(r.b) }
func (r *recorder) BlockSize() int              { return 1 }

// writeWeights records the weights Vitess's collation hasher writes for each ASCII character
// and checks that a string's weights are its characters' one after another.
func writeWeights(path, version string) error {
	h := collate.New(&recorder{})
	weights := make([]string, 128)
	for c := range 128 {
		weights[c] = string(h.Hash([]byte{byte(c)}))
	}
	check := func(s []byte) error {
		var want []byte
		for _, c := range s {
			want = append(want, weights[c]...)
		}
		if got := h.Hash(s); string(got) != string(want) {
			return fmt.Errorf("%q: weights %x, its characters' %x", s, got, want)
		}
		return nil
	}
	n := 0
	for a := range 128 {
		for b := range 128 {
			if err := check([]byte{byte(a), byte(b)}); err != nil {
				return err
			}
			for c := range 128 {
				if err := check([]byte{byte(a), byte(b), byte(c)}); err != nil {
					return err
				}
				n++
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		s := make([]byte, 1+r.IntN(300))
		for i := range s {
			s[i] = byte(r.IntN(128))
		}
		if err := check(s); err != nil {
			return err
		}
		n++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# system: %s, go/mysql/collations/vindex/collate Hasher (the unicode_loose_* vindexes' collation)\n", version)
	fmt.Fprintf(&b, "# The primary weights it writes for each ASCII byte, in hex (- for none). Checked: every ASCII string of 2 and 3 bytes and %d random ones of 1 to 300 bytes weigh their bytes' weights one after another.\n", 200000)
	for c, w := range weights {
		x := hex.EncodeToString([]byte(w))
		if x == "" {
			x = "-"
		}
		fmt.Fprintf(&b, "%02x %s\n", c, x)
	}
	fmt.Printf("ascii-weights: %d strings checked\n", n+128*128)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func readKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "-":
			keys = append(keys, "")
		default:
			k, err := hex.DecodeString(line)
			if err != nil {
				return nil, err
			}
			keys = append(keys, string(k))
		}
	}
	return keys, nil
}

func vitessVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "vitess.io/vitess" {
				return d.Version
			}
		}
	}
	return "?"
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "?"
}
