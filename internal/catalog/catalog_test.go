package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAll(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		require.False(t, seen[s.Name], "duplicate name %q", s.Name)
		seen[s.Name] = true
		for _, n := range []int{1, 10} {
			sh, err := s.New(n, Options{})
			require.NoError(t, err, "%s(%d)", s.Name, n)
			assert.Equal(t, n, sh.Shards(), s.Name)
		}
		got, ok := Find(s.Name)
		require.True(t, ok)
		assert.Equal(t, s.Name, got.Name)
	}
	_, ok := Find("no such strategy")
	assert.False(t, ok)
}
