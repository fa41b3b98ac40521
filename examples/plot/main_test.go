package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `{"title":"3 shards, 300 keys","shards":3,"keys":300,
"loads":[{"strategy":"modulo","counts":[101,99,100]},{"strategy":"trie","counts":[150,75,75]}],
"vnodes":{"shards":10,"keys":300,"seeds":1,"points":[{"vnodes":100,"stddev":9,"stddev_pct":9},{"vnodes":1000,"stddev":3,"stddev_pct":3}]}}`

// scalingOnly is what benchmarks/peers writes: no loads, one scaling panel.
const scalingOnly = `{"scaling":{"title":"ns per lookup","series":[
{"name":"ours/jump","points":[{"shards":10,"ns":20},{"shards":1000,"ns":40},{"shards":1000000,"ns":60}]},
{"name":"ours/modulo","points":[{"shards":10,"ns":5},{"shards":1000000,"ns":5}]}]}}`

// withPools is shard compare's data with its pools section.
const withPools = `{"title":"3 shards, 300 keys","shards":3,"keys":300,
"loads":[{"strategy":"modulo","counts":[101,99,100]}],
"pools":{"title":"weights 1..4, 300 keys","strategies":["ring pool","maglev pool"],
"balance":[{"name":"10 nodes","values":[9.5,0.4],"ideal":0.5},{"name":"100 nodes","values":[25,3.9],"ideal":1.6}],
"moved":[{"name":"10 nodes: node5 leaves","values":[1,1.03],"ideal":1},{"name":"100 nodes: node100 joins","values":[1.2,2.05],"ideal":1}]}}`

func TestRunWritesBothFormats(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"c.png", "c.svg"} {
		out := filepath.Join(dir, name)
		if err := run(strings.NewReader(sample), out); err != nil {
			t.Fatalf("run(%s): %v", name, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if name == "c.png" && !bytes.HasPrefix(b, []byte("\x89PNG")) || name == "c.svg" && !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s does not look like its format", name)
		}
	}
}

func TestRunScalingOnly(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.svg")
	if err := run(strings.NewReader(scalingOnly), out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ours/jump", "ours/modulo", "shards"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the chart lacks %q", want)
		}
	}
}

func TestRunPools(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.svg")
	if err := run(strings.NewReader(withPools), out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"maglev pool", "node100 joins", "worst node", "keys moved"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the chart lacks %q", want)
		}
	}
}

func TestRunRejects(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ in, out string }{
		{sample, filepath.Join(dir, "c.pdf")},
		{"not json", filepath.Join(dir, "c.png")},
		{`{"loads":[]}`, filepath.Join(dir, "c.png")},
		{`{"scaling":{"series":[]}}`, filepath.Join(dir, "c.png")},
		{`{"pools":{"strategies":["a"],"balance":[{"name":"x","values":[0],"ideal":0}]}}`, filepath.Join(dir, "c.png")},
	} {
		if err := run(strings.NewReader(c.in), c.out); err == nil {
			t.Errorf("run(%.20q, %s) = nil, want an error", c.in, c.out)
		}
	}
}
