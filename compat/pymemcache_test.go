package compat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPymemcacheVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "pymemcache", "pymemcache", "json", nil)
	require.Equal(t, 13, files)
	require.Equal(t, 11*1671+2*754, placements)
	require.Equal(t, placements, presetOf(t, "pymemcache").Checked, "the preset's Checked")
}

func TestPymemcacheRefused(t *testing.T) {
	require.Equal(t, 4, checkRefusedIn(t, "pymemcache", "pymemcache", "json"))
}
