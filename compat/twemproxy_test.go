package compat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTwemproxyVectors(t *testing.T) {
	files, placements := checkVectors(t, "twemproxy", "yml", nil)
	require.Equal(t, 64, files)
	require.Equal(t, 128000, placements)
}

func TestTwemproxyRefused(t *testing.T) {
	require.Equal(t, 23, checkRefused(t, "twemproxy", "yml"))
}
