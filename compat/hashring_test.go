package compat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHashringVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "hashring", "hashring", "json", nil)
	require.Equal(t, 33, files)
	require.Equal(t, 66000, placements)
	require.Equal(t, 66000+8000, presetOf(t, "hashring").Checked, "the preset's Checked: these and the JS ones")
}

func TestHashringRefused(t *testing.T) {
	require.Equal(t, 5, checkRefusedIn(t, "hashring", "hashring", "json"))
}

// JavaScript's reading of odd values (testdata/compat/hashring/js), from the real hashring.
func TestHashringJSVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "hashring", "hashring/js", "json", nil)
	require.Equal(t, 4, files)
	require.Equal(t, 8000, placements)
}
