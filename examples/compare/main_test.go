package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func small() config {
	return config{keys: 3000, shards: 10, vnodes: 100, keylen: 16, rounds: 1, seeds: 1}
}

func TestRunPrintsEveryColumn(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(&out, small()))
	s := out.String()
	for _, want := range []string{"| modulo ", "| ideal ", "moved % 10->11", "moved % 10->20", "state bytes", "9.09", "50.00"} {
		assert.Contains(t, s, want)
	}
}

func TestRunKeyfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.txt")
	require.NoError(t, os.WriteFile(path, []byte("user:1\nuser:2\r\nuser:3\n"), 0o644))
	c := small()
	c.keyfile = path
	var out strings.Builder
	require.NoError(t, run(&out, c))
	assert.Contains(t, out.String(), "3 keys from "+path)

	c.keyfile = filepath.Join(t.TempDir(), "missing.txt")
	require.Error(t, run(&out, c))
}

func TestCheckFlags(t *testing.T) {
	require.NoError(t, small().check())
	for _, bad := range []func(*config){
		func(c *config) { c.shards = 0 },
		func(c *config) { c.keys = 0 },
		func(c *config) { c.vnodes = -1 },
		func(c *config) { c.plot = "chart.pdf" },
	} {
		c := small()
		bad(&c)
		assert.Error(t, c.check())
	}
}
