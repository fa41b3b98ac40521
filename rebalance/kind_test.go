package rebalance

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardkit/shard"
)

// TestAcceptsTellsTheAPIsApart: a shard that serves a migration unfinished refuses an access
// or a claim of the same ID and sharders through the other API (Placement.InProcess): an
// in-process mover sets no fences, so a Shared process's write on an owner's old shard
// during its copy would be deleted with the old copy. Once the migration is finished the
// kind no longer matters, and a next migration of either kind follows a finished one.
func TestAcceptsTellsTheAPIsApart(t *testing.T) {
	two, _ := shard.NewModulo(2)
	three, _ := shard.NewModulo(3)
	shared, back := PlacementOf("grow", two, three), PlacementOf("shrink", three, two)
	inProcess := func(p Placement) Placement { p.InProcess = true; return p }
	leaving := func(p Placement) Placement { p.Leaving = true; return p }
	arriving := func(p Placement) Placement { p.Arriving = true; return p }
	for _, tc := range []struct {
		name           string
		p, served      Placement
		finished, want bool
	}{
		{"shared access, in-process migration unfinished", shared, inProcess(shared), false, false},
		{"shared leaving access, in-process migration unfinished", leaving(shared), inProcess(shared), false, false},
		{"in-process access, shared migration unfinished", inProcess(shared), shared, false, false},
		{"in-process access, its own migration unfinished", inProcess(shared), inProcess(shared), false, true},
		{"shared access, in-process migration finished", shared, inProcess(shared), true, true},
		{"shared arriving access, in-process migration finished", arriving(shared), inProcess(shared), true, true},
		{"in-process access, shared migration finished", inProcess(shared), shared, true, true},
		{"shared next migration after an in-process one", back, inProcess(shared), true, true},
		{"in-process next migration after a shared one", inProcess(back), shared, true, true},
		{"in-process next migration, shared one unfinished", inProcess(back), shared, false, false},
	} {
		if got := tc.p.Accepts(tc.served, tc.finished); got != tc.want {
			t.Errorf("%s: Accepts = %v, want %v", tc.name, got, tc.want)
		}
	}
	err := error(&PlacementError{Shard: 1, Served: inProcess(shared), Wanted: shared})
	if !errors.Is(err, ErrPlacement) || !strings.Contains(err.Error(), "same API") {
		t.Errorf("PlacementError = %v, want one that says both must use the same API", err)
	}
}
