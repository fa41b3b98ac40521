package compat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func FuzzTwemproxy(f *testing.F) { fuzzPreset(f, "twemproxy", "yml") }

// FuzzLibmemcached starts from the calls and from the configuration strings.
func FuzzLibmemcached(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join(vectorDir, "libmemcached", "csl", "*.csl"))
	require.NoError(f, err)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(b)
	}
	fuzzPreset(f, "libmemcached", "conf")
}

func FuzzSpymemcached(f *testing.F) { fuzzPreset(f, "spymemcached", "conf") }

func FuzzHashring(f *testing.F) { fuzzPreset(f, "hashring", "json") }
