package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerdict: the verdict names the row with the best figure of each kind, leaves the
// uneven ones out of the movement, and says so when nothing was timed.
func TestVerdict(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rep := &compareReport{Shards: 10, Rounds: 1,
		Ideal: compareRow{Strategy: "ideal", StddevPct: 1, GrowPct: f(9.09)},
		Rows: []compareRow{
			{Strategy: "modulo", Fits: true, NsPerOp: 2, StddevPct: 1, MaxMean: 1.02, GrowPct: f(90)},
			{Strategy: "jump", Fits: true, NsPerOp: 9, StddevPct: 1.1, MaxMean: 1.03, GrowPct: f(9.1)},
			{Strategy: "trie", Fits: true, NsPerOp: 3, StddevPct: 30, MaxMean: 1.4, GrowPct: f(6)}, // uneven: moves little
			{Strategy: "first-byte-sha1"},
			{Strategy: "ring pool", Fits: true, NsPerOp: 20, StddevPct: 1.5, MaxMean: 1.01, GrowPct: f(9.5)},
			{Strategy: "modula pool", Fits: true, NsPerOp: 15, StddevPct: 1, MaxMean: 1.02, GrowPct: f(90)},
		}}
	v := rep.makeVerdict()
	assert.Equal(t, &verdict{Fastest: "modulo", MostEven: "ring pool", LeastMoved: "jump",
		Even: []string{"modulo", "jump", "ring pool", "modula pool"}, Numbered: "jump", Named: "ring pool"}, v)
	rep.Verdict = v
	var b bytes.Buffer
	require.NoError(t, rep.writeVerdict(&b))
	assert.Contains(t, b.String(), "least movement  jump: 9.10% of the keys on 10->11 (ideal 9.09%)")
	assert.Contains(t, b.String(), "numbered shards that grow and shrink: jump; named nodes that join")

	rep.Rounds = 0
	rep.Verdict = rep.makeVerdict()
	b.Reset()
	require.NoError(t, rep.writeVerdict(&b))
	assert.Empty(t, rep.Verdict.Fastest)
	assert.Contains(t, b.String(), "fastest         not timed (-rounds 0)")
}
