package pool

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroValues: no method of a pool's zero value panics; lookups find no node and changes
// fail with ErrEmpty, naming the strategy.
func TestZeroValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Pool
	}{
		{"ring", &Ring{}},
		{"rendezvous", &Rendezvous{}},
		{"maglev", &Maglev{}},
		{"memento", &Memento{}},
		{"multi-probe", &MultiProbe{}},
		{"modula", &Modula{}},
		{"directory", &Directory{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			require.NotPanics(t, func() {
				assert.Empty(t, p.Locate("user:1"))
				assert.Equal(t, []string{"x"}, p.AppendN([]string{"x"}, "user:1", 3))
				assert.Empty(t, p.Nodes())
			})
			assert.Zero(t, testing.AllocsPerRun(10, func() { p.Locate("user:1") }))
			if b, ok := p.(BatchLocator); ok {
				keys := []string{"a", "b", "c", "d", "e"}
				dst := []string{"x", "x", "x", "x", "x", "x"}
				require.NotPanics(t, func() { b.LocateBatch(keys, dst) })
				assert.Equal(t, []string{"", "", "", "", "", "x"}, dst, "LocateBatch on the zero value")
			}
			for _, err := range []error{p.Add(Node{Name: "a"}), p.Remove("a"), p.SetWeight("a", 2)} {
				require.ErrorIs(t, err, ErrEmpty)
				assert.Regexp(t, `^pool: (zero `+tc.name+`|directory: [a-z ]+: zero Directory): make one with `, err.Error())
			}
			assert.Empty(t, p.Nodes(), "a failed change changes nothing")
		})
	}
	var m Maglev
	assert.Zero(t, m.TableSize())
	var mem Memento
	_, err := mem.MarshalText()
	require.ErrorIs(t, err, ErrEmpty)
}
