package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// TestArrivingAcceptedOnlyWhereFinished: an access labelled Arriving (routed by the after
// sharder alone, its process holding the migration finished) is accepted only by a shard
// that serves that very placement, finished; the next migration's accesses before its mover
// claims are accepted only unlabelled (routed by its before sharder, where every owner still
// is). Without the label's rule, a migration said done that no mover ran (a wrong record)
// was accepted everywhere as "the next migration", and its writes landed where the
// placement the shards serve never reads them.
func TestArrivingAcceptedOnlyWhereFinished(t *testing.T) {
	two, _ := shard.NewModulo(2)
	three, _ := shard.NewModulo(3)
	grow, shrink := PlacementOf("grow", two, three), PlacementOf("shrink", three, two)
	arriving := func(p Placement) Placement { p.Arriving = true; return p }
	leaving := func(p Placement) Placement { p.Leaving = true; return p }
	for _, tc := range []struct {
		name           string
		p, served      Placement
		finished, want bool
	}{
		{"arriving, served finished", arriving(grow), grow, true, true},
		{"arriving, served unfinished (a finish not recorded here yet)", arriving(grow), grow, false, false},
		{"arriving, nothing served", arriving(grow), Placement{}, false, false},
		{"arriving of a migration no mover claimed, after a finished one", arriving(shrink), grow, true, false},
		{"arriving and leaving, served finished", leaving(arriving(grow)), grow, true, false},
		{"unlabelled next migration (its before sharder)", shrink, grow, true, true},
		{"unlabelled, served unfinished", grow, grow, false, true},
		{"leaving, served finished", leaving(grow), grow, true, false},
	} {
		if got := tc.p.Accepts(tc.served, tc.finished); got != tc.want {
			t.Errorf("%s: Accepts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// partialFinish records a Finish on the shards in at only, then fails: a Finish stopped part
// way (its process killed, a shard unreachable).
type partialFinish struct {
	*MemShared
	at []int
}

func (s *partialFinish) Finished(_ context.Context, p Placement, _ uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.at {
		if s.serves[i].p == p {
			s.serves[i].finished, s.serves[i].finishing = true, 0
		}
	}
	return errors.New("partialfinish: the other shards are unreachable")
}

// TestPartialFinishCostsAvailabilityOnly: a Finish recorded on one old shard, not on the
// others. A process that learns of the finish from that shard routes by the after sharder
// alone, labelled Arriving, and the shards not finished yet refuse it (after FenceWait):
// nothing lands anywhere. A process that has not heard still routes by the migration, and
// its accesses are served. Once a Finish records the rest, the first process's accesses are
// served where the after sharder puts them.
func TestPartialFinishCostsAvailabilityOnly(t *testing.T) {
	w := newSharedWorld(t, 10, 3, 2, 3)
	ctx := context.Background()
	operator := w.shared(t, "grow", &partialFinish{MemShared: w.store, at: []int{0}}, SharedOptions{})
	require.NoError(t, operator.Run(ctx, slices.Values(w.owners)))
	require.Error(t, operator.Finish(ctx, slices.Values(w.owners)))
	var moving, staying string // moving: shard 0 -> 2; staying on shard 1
	for _, o := range w.owners {
		switch from, to := w.before.Locate(o), w.after.Locate(o); {
		case from == 0 && to == 2 && moving == "":
			moving = o
		case from == 1 && to == 1 && staying == "":
			staying = o
		}
	}
	require.NotEmpty(t, moving)
	require.NotEmpty(t, staying)

	heard := w.shared(t, "grow", w.store, SharedOptions{FenceWait: 50 * time.Millisecond})
	err := w.write(ctx, heard, moving, 100)
	var pe *PlacementError
	require.ErrorAs(t, err, &pe, "the after shard has not recorded the finish")
	require.Equal(t, 2, pe.Shard)
	require.True(t, pe.Wanted.Arriving)
	require.ErrorIs(t, w.write(ctx, heard, staying, 100), ErrPlacement, "once held finished, every access is Arriving")

	unheard := w.shared(t, "grow", w.store, SharedOptions{})
	require.NoError(t, w.write(ctx, unheard, staying, 101))
	w.check(t, true) // the refused writes landed nowhere

	finisher := w.shared(t, "grow", w.store, SharedOptions{})
	require.NoError(t, finisher.Finish(ctx, slices.Values(w.owners)))
	require.NoError(t, w.write(ctx, heard, moving, 100))
	require.NoError(t, w.write(ctx, heard, staying, 100))
	fresh := ""
	for i := 100; fresh == ""; i++ {
		if o := fmt.Sprint("user", i); w.before.Locate(o) != w.after.Locate(o) {
			fresh = o
		}
	}
	w.acked[fresh] = map[int]string{}
	w.owners = append(w.owners, fresh)
	require.NoError(t, w.write(ctx, heard, fresh, 1))
	w.check(t, true)
}

// raceFinish refuses the first Arriving access as a store does that read the placement it
// serves after its check, the finish committing in between: the refusal says finished.
type raceFinish struct {
	*MemShared
	refused bool
}

func (s *raceFinish) Access(ctx context.Context, p Placement, owner string, shard int, fn func(tx *MemTx) error) error {
	if p.Arriving && !s.refused {
		s.refused = true
		served := p
		served.Arriving = false
		return &PlacementError{Shard: shard, Served: served, Wanted: p, Finished: true}
	}
	return s.MemShared.Access(ctx, p, owner, shard, fn)
}

// TestArrivingRetriesARefusalThatSaysFinished: an Arriving access refused by its after
// shard while the finish committed there (the refusal already saying finished, as
// sqlstore's on PostgreSQL, which reads what the shard serves after its check) is tried
// again, not returned: the shard serves it now.
func TestArrivingRetriesARefusalThatSaysFinished(t *testing.T) {
	w := newSharedWorld(t, 10, 3, 2, 3)
	ctx := context.Background()
	operator := w.shared(t, "grow", w.store, SharedOptions{})
	require.NoError(t, operator.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, operator.Finish(ctx, slices.Values(w.owners)))
	st := &raceFinish{MemShared: w.store}
	m := w.shared(t, "grow", st, SharedOptions{FenceWait: time.Second})
	require.NoError(t, m.Finish(ctx, slices.Values(w.owners)), "finished again: m holds it finished")
	require.NoError(t, w.write(ctx, m, w.owners[0], 100))
	require.True(t, st.refused)
	w.check(t, true)
}
