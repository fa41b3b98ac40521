package shard_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard/catalog"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadmeStrategies holds the strategy tables of docs/strategies.md to the code: every
// constructor they name exists and its documentation states the shard range the table
// gives, every -strategy name is in package catalog with that range as MaxShards (under the
// default options), and every catalogued strategy and pool is in the tables. Every pool
// constructor the README or the page names exists.
func TestReadmeStrategies(t *testing.T) {
	page, err := os.ReadFile("docs/strategies.md")
	require.NoError(t, err)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	rows := markdownTable(t, string(page), "## Dense strategies", 0)
	require.NotEmpty(t, rows)
	require.Equal(t, []string{"constructor", "`-strategy`", "shards"}, rows[0][:3], "the table's first columns")
	require.Less(t, 1, len(markdownTable(t, string(page), "## Named nodes", 0)), "the pool table")

	docs := funcDocs(t, ".")
	inTable := map[string]bool{}
	for _, row := range rows[1:] {
		names := regexp.MustCompile("`(\\w+)\\(").FindAllStringSubmatch(row[0], -1)
		require.NotEmpty(t, names, "row %q names no constructor", row[0])
		for _, m := range names {
			d, ok := docs[m[1]]
			if !assert.True(t, ok, "docs/strategies.md names %s, which package shard does not have", m[1]) {
				continue
			}
			if limit, ok := strings.CutPrefix(row[2], "1.."); ok {
				assert.Contains(t, d, "[1, "+limit+"]", "%s: docs/strategies.md says %s shards, its documentation does not", m[1], row[2])
			}
		}
		name := strings.Trim(row[1], "`")
		if name == "-" {
			continue
		}
		inTable[name] = true
		st, ok := catalog.Find(name)
		if !assert.True(t, ok, "-strategy %s is not in package catalog", name) {
			continue
		}
		limit, ok := strings.CutPrefix(row[2], "1..")
		require.True(t, ok, "%s: shards %q: want 1..MAX", name, row[2])
		assert.Equal(t, st.MaxShards(catalog.Options{}), evalLimit(t, limit), "%s: the limit %s of docs/strategies.md", name, limit)
	}
	for _, st := range catalog.All() {
		assert.True(t, inTable[st.Name], "catalog strategy %s is missing from the table of docs/strategies.md", st.Name)
	}
	pools := map[string]bool{}
	poolDocs := funcDocs(t, "pool")
	for _, row := range markdownTable(t, string(page), "## Named nodes", 0)[1:] {
		pools[strings.Trim(row[1], "`")] = true
		assert.Contains(t, poolDocs, strings.TrimPrefix(strings.Trim(row[0], "`"), "pool."), "the pool table names %s", row[0])
		_, ok := catalog.FindPool(strings.Trim(row[1], "`"))
		assert.True(t, ok, "the pool table names -strategy %s, which catalog does not have", row[1])
	}
	for _, ps := range catalog.Pools() {
		assert.True(t, pools[ps.Name], "pool strategy %s is missing from the pool table of docs/strategies.md", ps.Name)
	}
	for _, text := range []string{string(readme), string(page)} {
		for _, m := range regexp.MustCompile(`pool\.(New\w+)`).FindAllStringSubmatch(text, -1) {
			assert.Contains(t, poolDocs, m[1], "the documentation names pool.%s", m[1])
		}
	}
}

// markdownTable returns the cells of table number index (from 0) after the line heading,
// header first.
func markdownTable(t *testing.T, text, heading string, index int) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(text, "\n"+heading+"\n")
	require.True(t, ok, "no %q section", heading)
	var rows [][]string
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if rows != nil {
				if index == 0 {
					break
				}
				index, rows = index-1, nil
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

// funcDocs returns the doc comment of every exported function of the package in dir.
func funcDocs(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	require.NoError(t, err)
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	d, err := doc.NewFromFiles(fset, files, "example.com/"+dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range d.Funcs {
		out[f.Name] = f.Doc
	}
	for _, typ := range d.Types {
		for _, f := range typ.Funcs {
			out[f.Name] = f.Doc
		}
	}
	return out
}

// evalLimit evaluates a README limit under catalog's defaults: 16384, 2^20, 2^31-1,
// 4194304/vnodes, partitions.
func evalLimit(t *testing.T, s string) int {
	t.Helper()
	vars := map[string]int{"vnodes": catalog.DefaultVnodes, "partitions": catalog.DefaultPartitions}
	if v, ok := vars[s]; ok {
		return v
	}
	if num, den, ok := strings.Cut(s, "/"); ok {
		return evalLimit(t, num) / evalLimit(t, den)
	}
	m := regexp.MustCompile(`^(\d+)(?:\^(\d+))?(?:-(\d+))?$`).FindStringSubmatch(s)
	require.NotNil(t, m, "limit %q", s)
	n, _ := strconv.Atoi(m[1])
	if m[2] != "" {
		e, _ := strconv.Atoi(m[2])
		n = 1 << e
	}
	if m[3] != "" {
		d, _ := strconv.Atoi(m[3])
		n -= d
	}
	return n
}
