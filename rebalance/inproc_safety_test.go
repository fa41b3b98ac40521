package rebalance

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// movingOwner returns an owner that before and after place apart.
func movingOwner(before, after shard.Sharder) string {
	for i := 0; ; i++ {
		if o := fmt.Sprint("user", i); before.Locate(o) != after.Locate(o) {
			return o
		}
	}
}

// panicStore panics in Mark or Copy while armed: a Store bug, or a driver that panics on
// a broken connection.
type panicStore struct {
	*memStore
	inMark, inCopy atomic.Bool
}

func (s *panicStore) Mark(ctx context.Context, migration, owner string) (Mark, error) {
	if s.inMark.Load() {
		panic("store panics in Mark")
	}
	return s.memStore.Mark(ctx, migration, owner)
}

func (s *panicStore) Copy(ctx context.Context, owner string, from, to int) error {
	if s.inCopy.Load() {
		panic("store panics in Copy")
	}
	return s.memStore.Copy(ctx, owner, from, to)
}

// TestPanicInDoReleasesTheOwner: a panic in the Store under Do (in the mark read, or in
// the move of a Lazy Do), recovered by the application as net/http does, leaves the owner's
// lock free: Run and Finish then complete.
func TestPanicInDoReleasesTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode Mode
		arm  func(*panicStore) *atomic.Bool
	}{
		{"async/mark", Async, func(s *panicStore) *atomic.Bool { return &s.inMark }},
		{"lazy/copy", Lazy, func(s *panicStore) *atomic.Bool { return &s.inCopy }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 4, 2, 3)
			st := &panicStore{memStore: w.store}
			m := w.migration(t, "panic-"+tc.name, st, Options{Mode: tc.mode})
			ctx := context.Background()
			armed := tc.arm(st)
			armed.Store(true)
			func() {
				defer func() { require.NotNil(t, recover(), "the Store's panic") }()
				_ = m.Do(ctx, movingOwner(w.before, w.after), func(int) error { return nil })
			}()
			armed.Store(false)
			done := make(chan error, 1)
			go func() {
				err := m.Run(ctx, slices.Values(w.owners))
				if err == nil {
					err = m.Finish(ctx, slices.Values(w.owners))
				}
				done <- err
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("Run and Finish still wait 5s after a recovered panic in one Do: the owner's lock leaked")
			}
			w.checkMoved(t)
			w.checkServed(t, m)
		})
	}
}
