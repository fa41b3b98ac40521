package shard_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file holds the README and the pages under docs/ to the code: their deterministic
// figures, their Go snippets and their links.

// readmeMaxLines is the most lines the README may have: the rest belongs under docs/.
const readmeMaxLines = 350

func TestReadmeLength(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	n := bytes.Count(readme, []byte("\n"))
	assert.LessOrEqual(t, n, readmeMaxLines, "README.md has %d lines: move detail to docs/", n)
}

// TestDocsCompare runs `shard compare -rounds 0` (no timing) and checks every cell of the
// compare section of docs/measurements.md but the timings against what it prints: state
// bytes, allocations, balance, moves, the pools' deviations and moves, the vnodes curve.
// Those come from seeded keys, so they change only when the code does; docs/compare.sh
// rewrites the section from a fresh run.
func TestDocsCompare(t *testing.T) {
	if testing.Short() || shard.RaceEnabled {
		t.Skip("runs compare on 1M keys: not with -short or -race")
	}
	if strconv.IntSize != 64 {
		t.Skip("the page's state bytes are a 64-bit platform's")
	}
	page, err := os.ReadFile("docs/measurements.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(page), "<!-- compare: begin -->\n")
	require.True(t, ok, "docs/measurements.md: no compare: begin marker")
	section, _, ok = strings.Cut(section, "<!-- compare: end -->")
	require.True(t, ok, "docs/measurements.md: no compare: end marker")

	bin := filepath.Join(t.TempDir(), "shard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/shard")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/shard: %s", out)
	compare := func() [][][]string {
		var stdout, stderr bytes.Buffer
		run := exec.Command(bin, "compare", "-rounds", "0")
		run.Stdout, run.Stderr = &stdout, &stderr
		require.NoError(t, run.Run(), "shard compare -rounds 0: %s", stderr.String())
		return tablesOf(stdout.String())
	}
	got, want := compare(), tablesOf(section)
	// same says whether cell (i, r, c) of compare's tables is text. State bytes are the live
	// heap read around a build, and a runtime allocation in between shows once in a while as
	// a few bytes more: such a cell must then match a second run.
	var second [][][]string
	same := func(i, r, c int, text string) bool {
		if got[i][r][c] == text {
			return true
		}
		if got[i][0][c] != "state bytes" {
			return false
		}
		if second == nil {
			second = compare()
		}
		return second[i][r][c] == text
	}
	require.Equal(t, len(got), len(want), "compare prints %d tables, docs/measurements.md shows %d", len(got), len(want))
	for i := range got {
		require.Equal(t, got[i][0], want[i][0], "table %d: the header", i+1)
		require.Equal(t, len(got[i]), len(want[i]), "table %d (%s ...): rows", i+1, got[i][0][0])
		for r := 1; r < len(got[i]); r++ {
			require.Equal(t, len(got[i][r]), len(want[i][r]), "table %d, row %q: cells", i+1, got[i][r][0])
			for c := range got[i][r] {
				if got[i][0][c] == "ns/op" {
					continue // timing: one run's, dated on the page
				}
				assert.True(t, same(i, r, c, want[i][r][c]), "docs/measurements.md, table %d, row %q, column %q: %s, compare prints %s",
					i+1, got[i][r][0], got[i][0][c], want[i][r][c], got[i][r][c])
			}
		}
	}

	// The README's summary: its deterministic cells are compare's, its timings the page's.
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, choosing, ok := strings.Cut(string(readme), "\n## Choosing a strategy\n")
	require.True(t, ok, "README.md: no Choosing a strategy section")
	choosing, _, _ = strings.Cut(choosing, "\n## ")
	summary := tablesOf(choosing)
	require.Len(t, summary, 1, "README.md: one table under Choosing a strategy")
	column := func(table [][]string, name string) int {
		i := slices.Index(table[0], name)
		require.GreaterOrEqual(t, i, 0, "no column %q in %q", name, table[0])
		return i
	}
	index := func(table [][]string, name string) int {
		i := slices.IndexFunc(table, func(r []string) bool { return r[0] == name })
		require.Greater(t, i, 0, "no row %q", name)
		return i
	}
	row := func(table [][]string, name string) []string { return table[index(table, name)] }
	cols := map[int]int{ // the README's column -> compare's
		column(summary[0], "state bytes"):          column(got[0], "state bytes"),
		column(summary[0], "stddev % of the mean"): column(got[0], "stddev %"),
		column(summary[0], "moved % 10→11"):        column(got[0], "moved % 10->11"),
	}
	ns := column(summary[0], "ns per lookup (one idle run)")
	for _, r := range summary[0][1:] {
		name, _, _ := strings.Cut(r[0], " (")
		for rc, cc := range cols {
			assert.True(t, same(0, index(got[0], name), cc, r[rc]), "README.md's summary, %s, %s: %s, compare prints %s",
				name, summary[0][0][rc], r[rc], row(got[0], name)[cc])
		}
		if name != "ideal" {
			assert.Equal(t, row(want[0], name)[column(want[0], "ns/op")], r[ns], "README.md's summary, %s: the ns/op of docs/measurements.md", name)
		}
	}

	// The pool table of docs/strategies.md: what a removal moves is compare's node50 leaving.
	strategies, err := os.ReadFile("docs/strategies.md")
	require.NoError(t, err)
	pools := markdownTable(t, string(strategies), "## Named nodes", 0)
	removal := column(pools, "what a removal moves (100 nodes; ideal 1.20%)")
	var moves [][]string
	for _, table := range got {
		if slices.Contains(table[0], "100 nodes: node50 leaves") {
			moves = table
		}
	}
	require.NotNil(t, moves, "compare prints no table of a removal from 100 nodes")
	leaves := column(moves, "100 nodes: node50 leaves")
	assert.Equal(t, "1.20", row(moves, "ideal")[leaves], "the pool table's ideal")
	for _, r := range pools[1:] {
		name := strings.Trim(r[1], "`") + " pool"
		pct := regexp.MustCompile(`(\d+\.\d+)%`).FindStringSubmatch(r[removal])
		require.NotNil(t, pct, "docs/strategies.md, %s: no share in %q", name, r[removal])
		assert.Equal(t, row(moves, name)[leaves], pct[1], "docs/strategies.md, %s: what a removal moves", name)
	}
}

// tablesOf returns the Markdown tables of text, each a list of rows of trimmed cells, header
// first, the separator row left out.
func tablesOf(text string) [][][]string {
	var tables [][][]string
	var cur [][]string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if cur != nil {
				tables, cur = append(tables, cur), nil
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		cur = append(cur, cells)
	}
	if cur != nil {
		tables = append(tables, cur)
	}
	return tables
}

// TestReadmeSnippets holds every Go snippet of the README to a runnable example: each
// ```go block, but for the one that declares the Sharder interface, must be a run of whole
// lines of the body of an Example function of this repository (its nested modules
// included), one tab of indentation less, so that `go test` compiles and runs the code the
// README shows.
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	bodies := exampleBodies(t)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		snippet := b[1]
		if strings.Contains(snippet, "type Sharder interface") {
			assert.Contains(t, readInterface(t), snippet, "the README's Sharder is not the one in shard.go")
			continue
		}
		found := false
		for _, body := range bodies {
			if strings.HasPrefix(body, snippet) || strings.Contains(body, "\n"+snippet) {
				found = true
				break
			}
		}
		first, _, _ := strings.Cut(strings.TrimSpace(snippet), "\n")
		assert.True(t, found, "the README's snippet that starts %q is in no Example function: copy it from one, or change both", first)
	}
}

// exampleBodies returns the body of every Example function in the repository's
// example*_test.go files, each line with one tab less.
func exampleBodies(t *testing.T) []string {
	t.Helper()
	var bodies []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), "example") || !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			body = strings.TrimPrefix(body, "\n")
			var out strings.Builder
			for line := range strings.Lines(body) {
				out.WriteString(strings.TrimPrefix(line, "\t"))
			}
			bodies = append(bodies, out.String())
		}
		return nil
	})
	require.NoError(t, err)
	return bodies
}

// readInterface returns shard.go's declaration of Sharder, without its doc comment.
func readInterface(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("shard.go")
	require.NoError(t, err)
	i := strings.Index(string(src), "type Sharder interface {")
	require.GreaterOrEqual(t, i, 0)
	j := strings.Index(string(src[i:]), "\n}\n")
	require.GreaterOrEqual(t, j, 0)
	return string(src[i : i+j+3])
}

// TestDocsLinks checks that every relative link of the README and the pages under docs/
// names a file or directory of the repository.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	files = append(files, "README.md")
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(f), target))
			assert.NoError(t, err, "%s links to %s", f, target)
		}
	}
}
