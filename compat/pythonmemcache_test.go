package compat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPythonMemcacheVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "python-memcache", "python-memcache", "json", nil)
	require.Equal(t, 13, files)
	require.Equal(t, 13*1671, placements)
	require.Equal(t, placements, presetOf(t, "python-memcache").Checked, "the preset's Checked")
}

func TestPythonMemcacheRefused(t *testing.T) {
	require.Equal(t, 4, checkRefusedIn(t, "python-memcache", "python-memcache", "json"))
}
