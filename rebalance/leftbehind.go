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

// leftBehind looks, if store is an OwnerLister, on each of the first shards shards for
// owners whose rows are not where after places them, and records them in left.
func leftBehind(ctx context.Context, store any, after shard.Sharder, shards int, left *UnfinishedError) error {
	lister, ok := store.(OwnerLister)
	if !ok {
		return nil
	}
	for s := range shards {
		seen := map[string]bool{} // of the misplaced only: an owner is listed once per table
		for o, err := range lister.Owners(ctx, s) {
			if err != nil {
				return fmt.Errorf("rebalance: migration %q: list the owners on shard %d: %w", left.Migration, s, err)
			}
			if after.Locate(o) == s || seen[o] {
				continue
			}
			seen[o] = true
			if left.Unlisted++; len(left.UnlistedOwners) < 10 {
				left.UnlistedOwners = append(left.UnlistedOwners, fmt.Sprintf("%s (shard %d)", o, s))
			}
		}
	}
	return nil
}
