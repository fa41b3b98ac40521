package shard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
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

// layers ranks the packages of this module and of the nested modules by their directory's
// first element. A package may import the packages of lower layers, and packages of its own
// directory tree in its own module (an internal package another internal package uses);
// anything else points up or sideways and fails TestLayers. Keep the table and the README's
// drawing of it in step.
var layers = map[string]int{
	"internal":   0, // hashes and engines that no user needs
	"":           1, // package shard, the dense strategies
	"pool":       1, // named, weighted pools; shard and pool do not import each other
	"compat":     2, // presets that place keys as other systems do, built on pools
	"rebalance":  3, // plans and online moves, over shard.Sharder
	"catalog":    4, // every strategy and preset by name
	"measure":    4, // keys, balance, movement, timing
	"sqlstore":   4, // nested module: rebalance's SharedStore over database/sql
	"coord":      5, // nested module: the placement record in etcd, over catalog and pool
	"clients":    5, // nested modules: our pools inside Go cache clients (gomemcache, go-redis)
	"cmd":        6, // the shard command
	"examples":   6, // runnable programs, nested modules
	"benchmarks": 6, // nested modules that compare with other libraries
}

// rootDependencies are the only modules besides the standard library that the root module's
// packages may depend on (the README says so: importing shard pulls in nothing else).
var rootDependencies = map[string]bool{
	module:                         true,
	"github.com/cespare/xxhash/v2": true,
	"github.com/spaolacci/murmur3": true,
}

// listedPackage is the part of `go list -json` this file reads.
type listedPackage struct {
	ImportPath   string
	Dir          string
	Name         string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Module       *struct{ Path string }
	Error        *struct{ Err string }
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
	listed   []listedPackage // of this module
	rootDeps []listedPackage // every package they depend on, outside this module
	listErr  error
)

// modulePackages returns the packages of this module that `go test ./...` covers (the
// nested modules are not among them), from `go list -e -deps -json ./...` (-e: a package
// whose import no module provides is still listed, and TestLayers names the import). It
// skips the test when the go tool is not installed.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the go tool is not on PATH (%v): cannot list the packages to check the layout", err)
	}
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-e", "-deps", "-json", "./...")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listErr = errors.New("go list -e -deps -json ./...: " + err.Error() + ": " + stderr.String())
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
			} else {
				rootDeps = append(rootDeps, p)
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

// moduleOf returns the module of mods (this one and the nested ones) that holds the package
// importPath: the longest module path it starts with.
func moduleOf(importPath string, mods []string) string {
	best := ""
	for _, m := range mods {
		if (importPath == m || strings.HasPrefix(importPath, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// importRule says why the package from, of module fromMod, may not import imp, or "" if it
// may. mods are the module paths of this repository. withinModule leaves out the layer rule
// for imports inside the root module (its tests import freely: package shard_test uses
// catalog), keeping the rule between modules.
func importRule(from, imp string, mods []string, withinModule bool) string {
	if imp != module && !strings.HasPrefix(imp, module+"/") {
		return ""
	}
	fromMod, impMod := moduleOf(from, mods), moduleOf(imp, mods)
	if fromMod == module && impMod != module {
		return fmt.Sprintf("%s imports %s of the nested module %s: the root module must never need a nested one", from, imp, impMod)
	}
	if fromMod == module && !withinModule {
		return ""
	}
	gf, gt := group(from), group(imp)
	lf, okf := layers[gf]
	lt, okt := layers[gt]
	switch {
	case !okf:
		return fmt.Sprintf("%s: directory %q is in no layer: add it to the layer table in layout_test.go and the README", from, gf)
	case !okt:
		return fmt.Sprintf("%s imports %s, whose directory %q is in no layer", from, imp, gt)
	case gf == gt && fromMod == impMod:
		return "" // within one directory tree of one module
	case gf == gt:
		return fmt.Sprintf("%s (module %s) imports %s of another module, %s: nested modules of one directory are independent", from, fromMod, imp, impMod)
	case lt >= lf:
		return fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must point to a lower layer", from, lf, imp, lt)
	}
	return ""
}

// nestedModule is a go.mod below the root: its directory and module path.
type nestedModule struct{ dir, path string }

// nestedModules walks the repository for go.mod files, skipping testdata (the vector
// generators there are programs run by hand, not library code, and go ./... skips them too)
// and hidden directories.
func nestedModules(t *testing.T) []nestedModule {
	t.Helper()
	var mods []nestedModule
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if d.IsDir() || name != "go.mod" || path == "go.mod" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
				mods = append(mods, nestedModule{dir: filepath.Dir(path), path: strings.Trim(strings.TrimSpace(rest), `"`)})
				return nil
			}
		}
		return fmt.Errorf("%s has no module line", path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// listNested returns the packages of the nested module m, from go list run in its directory.
// -e lists a package whose import cannot be resolved (a module not required) with its
// imports, so that TestLayers names the forbidden import rather than only go list's error.
func listNested(m nestedModule) ([]listedPackage, error) {
	cmd := exec.Command("go", "list", "-C", m.dir, "-e", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -C %s -e -json ./...: %v: %s", m.dir, err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
}

// TestLayers checks every import of this module's packages against the layer table, and of
// every nested module's packages, their tests included; and that no package of this module,
// not even a test, imports a nested module.
func TestLayers(t *testing.T) {
	root := modulePackages(t)
	nested := nestedModules(t)
	mods := []string{module}
	for _, m := range nested {
		mods = append(mods, m.path)
	}
	for _, want := range []string{module + "/coord", module + "/sqlstore", module + "/examples/rebalance"} {
		if !slices.Contains(mods, want) {
			t.Errorf("no nested module %s found under %v: the walk for go.mod files missed it", want, mods)
		}
	}
	for _, p := range root {
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		for _, imp := range p.Imports {
			if why := importRule(p.ImportPath, imp, mods, true); why != "" {
				t.Error(why)
			}
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if why := importRule(p.ImportPath, imp, mods, false); why != "" {
				t.Error("test: " + why)
			}
		}
	}

	// The nested modules, two go list at a time.
	type listing struct {
		pkgs []listedPackage
		err  error
	}
	results := make([]listing, len(nested))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, m := range nested {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i].pkgs, results[i].err = listNested(m)
		})
	}
	wg.Wait()
	for i, m := range nested {
		if results[i].err != nil {
			t.Error(results[i].err)
			continue
		}
		n := 0
		for _, p := range results[i].pkgs {
			if p.Module == nil || p.Module.Path != m.path {
				continue
			}
			n++
			for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
				if why := importRule(p.ImportPath, imp, mods, true); why != "" {
					t.Error(why)
				}
			}
			if p.Error != nil {
				t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
			}
		}
		if n == 0 {
			t.Errorf("go list found no package of the nested module %s in %s", m.path, m.dir)
		}
	}
}

// TestRootDependencies checks that the root module's packages depend on nothing outside the
// standard library but xxhash and murmur3, as the README promises.
func TestRootDependencies(t *testing.T) {
	modulePackages(t)
	for _, p := range rootDeps {
		if p.Standard {
			continue
		}
		if p.Module == nil || !rootDependencies[p.Module.Path] {
			mod := "no module"
			if p.Module != nil {
				mod = p.Module.Path
			}
			t.Errorf("the root module depends on %s (%s): only the standard library, xxhash and murmur3 may be", p.ImportPath, mod)
		}
	}
}

// TestLayersCatchUpwardImports proves TestLayers' rule on made-up imports, so that a table
// that allowed everything could not pass unnoticed.
func TestLayersCatchUpwardImports(t *testing.T) {
	mods := []string{module, module + "/coord", module + "/sqlstore", module + "/examples/rebalance",
		module + "/examples/plot", module + "/benchmarks/peers", module + "/benchmarks/peers/byhand",
		module + "/clients/gomemcache", module + "/clients/goredis", module + "/examples/goredis"}
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
		// The nested modules.
		{"examples/rebalance", "coord", true},
		{"examples/rebalance", "coord/embedded", true},
		{"examples/rebalance", "sqlstore", true},
		{"coord/embedded", "coord", true},
		{"coord", "catalog", true},
		{"sqlstore", "rebalance", true},
		{"benchmarks/peers", "benchmarks/peers/ketama", true},
		{"coord", "examples/rebalance", false},
		{"coord", "cmd/shard", false},
		{"sqlstore", "examples/rebalance", false},
		{"sqlstore", "cmd/shard", false},
		{"sqlstore", "coord", false},
		{"sqlstore", "catalog", false},
		{"rebalance", "sqlstore", false},
		{"catalog", "coord", false},
		{"", "coord", false},
		{"examples/plot", "examples/rebalance", false},
		{"benchmarks/peers/byhand", "benchmarks/peers", false},
		{"clients/gomemcache", "compat", true},
		{"examples/goredis", "clients/goredis", true},
		{"compat", "clients/gomemcache", false},
		{"clients/goredis", "clients/gomemcache", false},
	} {
		from, to := strings.TrimSuffix(module+"/"+c.from, "/"), strings.TrimSuffix(module+"/"+c.to, "/")
		if why := importRule(from, to, mods, true); (why == "") != c.ok {
			t.Errorf("%q importing %q: allowed %v (%s), want %v", c.from, c.to, why == "", why, c.ok)
		}
	}
	// The root module's tests may import any of its packages, but no nested module.
	if why := importRule(module, module+"/cmd/shard", mods, false); why != "" {
		t.Errorf("a root test importing cmd/shard: %s, want allowed", why)
	}
	if why := importRule(module+"/rebalance", module+"/sqlstore", mods, false); why == "" {
		t.Error("a root test importing the nested sqlstore: allowed, want refused")
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
