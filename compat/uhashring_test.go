package compat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUhashringVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "uhashring", "uhashring", "json", nil)
	require.Equal(t, 26, files)
	require.Equal(t, 26*1671, placements)
	require.Equal(t, placements, presetOf(t, "uhashring").Checked, "the preset's Checked")
}

func TestUhashringRefused(t *testing.T) {
	require.Equal(t, 6, checkRefusedIn(t, "uhashring", "uhashring", "json"))
}
