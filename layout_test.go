package shard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// This file checks the layout the README's "Layout" section draws: which package may import
// which, and that every exported constructor has a runnable example.

const module = "github.com/shardkit/shard"

// layers ranks the module's packages by their directory's first element. A package may
// import the packages of lower layers, and packages of its own directory tree (an internal
// package another internal package uses); anything else points up or sideways and fails
// TestLayers. Keep the table and the README's drawing of it in step.
var layers = map[string]int{
	"internal":   0, // hashes and engines that no user needs
	"":           1, // package shard, the dense strategies
	"pool":       1, // named, weighted pools; shard and pool do not import each other
	"compat":     2, // presets that place keys as other systems do, built on pools
	"rebalance":  3, // plans and online moves, over shard.Sharder
	"catalog":    4, // every strategy and preset by name
	"measure":    4, // keys, balance, movement, timing
	"cmd":        5, // the shard command
	"examples":   5, // runnable programs
	"benchmarks": 5, // nested modules that compare with other libraries
	"coord":      5, // nested module: the placement record in etcd
}

// listedPackage is the part of `go list -json` this file reads.
type listedPackage struct {
	ImportPath   string
	Dir          string
	Name         string
	Standard     bool
	Imports      []string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Module       *struct{ Path string }
}

// group returns the first element of a module package's path inside the module ("" for the
// root package).
func group(importPath string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
	first, _, _ := strings.Cut(rel, "/")
	return first
}

var (
	listOnce sync.Once
	listed   []listedPackage
	listErr  error
)

// modulePackages returns the packages of this module that `go test ./...` covers (the
// nested modules are not among them), from `go list -deps -json ./...`. It skips the test
// when the go tool is not installed.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the go tool is not on PATH (%v): cannot list the packages to check the layout", err)
	}
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-deps", "-json", "./...")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listErr = errors.New("go list -deps -json ./...: " + err.Error() + ": " + stderr.String())
			return
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p listedPackage
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				listErr = err
				return
			}
			if p.Module != nil && p.Module.Path == module {
				listed = append(listed, p)
			}
		}
	})
	if listErr != nil {
		t.Fatal(listErr)
	}
	if len(listed) == 0 {
		t.Fatal("go list found no package of " + module)
	}
	return listed
}

func TestLayers(t *testing.T) {
	for _, p := range modulePackages(t) {
		from := group(p.ImportPath)
		lf, ok := layers[from]
		if !ok {
			t.Errorf("%s: directory %q is in no layer: add it to the layer table in layout_test.go and the README", p.ImportPath, from)
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := group(imp)
			lt, ok := layers[to]
			switch {
			case !ok:
				t.Errorf("%s imports %s, whose directory %q is in no layer", p.ImportPath, imp, to)
			case to == from:
				// within one directory tree
			case lt >= lf:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point to a lower layer", p.ImportPath, lf, imp, lt)
			}
		}
	}
}

// TestLayersCatchUpwardImports proves TestLayers' rule on made-up imports, so that a table
// that allowed everything could not pass unnoticed.
func TestLayersCatchUpwardImports(t *testing.T) {
	allowed := func(from, to string) bool {
		f, t := group(module+"/"+from), group(module+"/"+to)
		return f == t || layers[t] < layers[f]
	}
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"cmd/shard", "catalog", true},
		{"catalog", "compat", true},
		{"rebalance", "", true},
		{"pool", "internal/keyhash", true},
		{"internal/ring", "internal/keyhash", true},
		{"", "catalog", false},
		{"", "pool", false},
		{"pool", "", false},
		{"internal/keyhash", "", false},
		{"measure", "catalog", false},
		{"rebalance", "cmd/shard", false},
	} {
		if got := allowed(c.from, c.to); got != c.ok {
			t.Errorf("%q importing %q: allowed %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

// TestConstructorExamples fails on any exported constructor without an Example of its own
// (ExampleNewJump, ExampleNewJump_suffix): every function that go doc lists under a type it
// returns, and every other exported function whose name starts with New. Commands, examples
// and internal packages are left out: go doc shows users none of them.
func TestConstructorExamples(t *testing.T) {
	for _, p := range modulePackages(t) {
		if p.Name == "main" || group(p.ImportPath) == "internal" {
			continue
		}
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		d, err := doc.NewFromFiles(fset, files, p.ImportPath)
		if err != nil {
			t.Fatal(err)
		}
		var constructors []*doc.Func
		for _, typ := range d.Types {
			constructors = append(constructors, typ.Funcs...)
		}
		for _, f := range d.Funcs {
			if strings.HasPrefix(f.Name, "New") {
				constructors = append(constructors, f)
			}
		}
		for _, f := range constructors {
			if len(f.Examples) == 0 {
				t.Errorf("%s.%s has no Example%s in an example_*_test.go file", p.ImportPath, f.Name, f.Name)
			}
		}
	}
}
