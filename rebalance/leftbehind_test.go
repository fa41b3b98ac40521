package rebalance

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// twiceLister lists each owner twice, as a store of two tables per owner does.
type twiceLister struct{ *memStore }

func (s twiceLister) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for range 2 {
			for o, err := range s.memStore.Owners(ctx, shard) {
				if !yield(o, err) {
					return
				}
			}
		}
	}
}

// An owner left out counts once, however many times the store lists it.
func TestLeftBehindCountsOwnersOnce(t *testing.T) {
	store := newMemStore(2)
	two, err := shard.NewJump(2)
	require.NoError(t, err)
	var misplaced []string
	for i := 0; len(misplaced) < 3; i++ {
		o := fmt.Sprint("user:", i)
		s := 1 - two.Locate(o)
		store.put(s, o, 0, "row")
		store.put(s, o, 1, "row")
		misplaced = append(misplaced, o)
	}
	left := &UnfinishedError{Migration: "m"}
	require.NoError(t, leftBehind(context.Background(), twiceLister{store}, two, 2, nil, left))
	require.Equal(t, 3, left.Unlisted)
	require.Len(t, left.UnlistedOwners, 3)
}
