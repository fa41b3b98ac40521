package pool

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the regress files under ../testdata/regress")

// checkRegress compares got with the regress file ../testdata/regress/name, which pins this
// package's own placements: do not change one without saying so. With -update it rewrites it.
func checkRegress(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("..", "testdata", "regress", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to create it", t.Name())
	require.Equal(t, string(want), got,
		"placement changed: if on purpose, rerun with -update and say so in the commit message")
}
