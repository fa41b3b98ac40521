package compat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSpymemcachedVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "spymemcached", "spymemcached", "conf", func(name string) bool { return strings.HasPrefix(name, "accepted-") })
	require.Equal(t, 53, files)
	require.Equal(t, 106000, placements)
}

func TestSpymemcachedRefused(t *testing.T) {
	require.Equal(t, 8, checkRefusedIn(t, "spymemcached", "spymemcached", "conf"))
}

// The odd configurations spymemcached accepts, and the node its getPrimary("user:1") gave.
func TestSpymemcachedAccepted(t *testing.T) {
	for file, want := range map[string]string{
		"accepted-ipv6-bare":        "::1:24101",
		"accepted-ipv6-bracketed":   "[::1]:24101",
		"accepted-separators":       "127.0.0.1:24102",
		"accepted-weights-negative": "127.0.0.1:24102",
	} {
		config, err := os.ReadFile(filepath.Join(vectorDir, "spymemcached", file+".conf"))
		require.NoError(t, err)
		transcript, err := os.ReadFile(filepath.Join(vectorDir, "spymemcached", file+".txt"))
		require.NoError(t, err)
		require.Contains(t, string(transcript), "getPrimary(\"user:1\")\n  -> /")
		p, err := presetOf(t, "spymemcached").New(config, "")
		require.NoError(t, err, file)
		require.Equal(t, want, p.Locate("user:1"), file)
	}
}
