package rebalance

import (
	"context"
	"fmt"
	"iter"

	"github.com/shardkit/shard"
)

// OwnerLister is a Store that can list the owners of the rows on a shard. Finish uses it,
// when the store is one, to refuse to finish while a shard holds rows of an owner that the
// after sharder places elsewhere: an owner left out of the owners given to Run and Finish
// (one created after that list was made, say), whose rows nothing would ever move and which
// the application would no longer find once Do routes by the after sharder alone.
type OwnerLister interface {
	// Owners yields each owner that has rows on shard, in any order, possibly more than
	// once, and stops at the first error, which it yields. It reads in short statements and
	// holds no lock: rows written meanwhile may be seen or not.
	Owners(ctx context.Context, shard int) iter.Seq2[string, error]
}

// FenceLister is the part of a SharedStore that names the owners a migration left fenced
// part way on a shard: importing or exporting, as a Run that stopped leaves them.
// Shared.Finish refuses while any is (an *UnfinishedError naming them), listed or not: the
// after sharder's shard refuses such an owner, and its old shard still takes its writes,
// which the listing of the shards may not see (an owner fenced there does not wait for
// Finish), so a finish would strand them. Finish looks once it recorded Finishing, and SetFence refuses from
// then on (a Run of another process), so none is fenced after the look.
type FenceLister interface {
	// Unsettled returns up to 10 owners fenced Importing or Exporting by migration on
	// shard, and how many are.
	Unsettled(ctx context.Context, migration string, shard int) (owners []string, n int, err error)
}

// unsettled records in left the owners that migration left fenced part way on each of the
// first shards shards.
func unsettled(ctx context.Context, fl FenceLister, shards int, left *UnfinishedError) error {
	for s := range shards {
		owners, n, err := fl.Unsettled(ctx, left.Migration, s)
		if err != nil {
			return fmt.Errorf("rebalance: migration %q: list the owners it left fenced on shard %d: %w", left.Migration, s, err)
		}
		left.Unlisted += n
		for _, o := range owners[:min(len(owners), 10-min(10, len(left.UnlistedOwners)))] {
			left.UnlistedOwners = append(left.UnlistedOwners, fmt.Sprintf("%s (fenced part way on shard %d)", o, s))
		}
	}
	return nil
}

// movedFunc reports, for each of owners, whether the migration's mover moved it (marked it
// Done). A migration that cannot tell passes nil to leftBehind.
type movedFunc func(ctx context.Context, owners []string) ([]bool, error)

// leftBehind looks, if store is an OwnerLister, on each of the first shards shards for
// owners whose rows are not where after places them, and records them in left: owners the
// migration moved (per moved) as Returned, the others as Unlisted.
func leftBehind(ctx context.Context, store any, after shard.Sharder, shards int, moved movedFunc, left *UnfinishedError) error {
	lister, ok := store.(OwnerLister)
	if !ok {
		return nil
	}
	for s := range shards {
		seen := map[string]bool{} // of the misplaced only: an owner is listed once per table
		batch := make([]string, 0, 1000)
		record := func() error {
			var done []bool
			if moved != nil && len(batch) > 0 {
				var err error
				if done, err = moved(ctx, batch); err != nil {
					return fmt.Errorf("rebalance: migration %q: read the marks of the owners left on shard %d: %w", left.Migration, s, err)
				}
			}
			for i, o := range batch {
				named := fmt.Sprintf("%s (shard %d)", o, s)
				if done != nil && done[i] {
					if left.Returned++; len(left.ReturnedOwners) < 10 {
						left.ReturnedOwners = append(left.ReturnedOwners, named)
					}
				} else if left.Unlisted++; len(left.UnlistedOwners) < 10 {
					left.UnlistedOwners = append(left.UnlistedOwners, named)
				}
			}
			batch = batch[:0]
			return nil
		}
		for o, err := range lister.Owners(ctx, s) {
			if err != nil {
				return fmt.Errorf("rebalance: migration %q: list the owners on shard %d: %w", left.Migration, s, err)
			}
			if after.Locate(o) == s || seen[o] {
				continue
			}
			seen[o] = true
			if batch = append(batch, o); len(batch) == cap(batch) {
				if err := record(); err != nil {
					return err
				}
			}
		}
		if err := record(); err != nil {
			return err
		}
	}
	return nil
}
