package rebalance

import (
	"context"
	"fmt"
)

// Store is what the application implements so that a Migration can move its data: it
// copies, counts and deletes the rows of one owner on one shard, and keeps each owner's Mark
// durably. Nothing here assumes a particular database.
//
// Every method must be idempotent, because a crash between any two calls is followed by the
// same calls again, and safe for concurrent use with different owners: a Migration never
// calls Copy, Count or Delete for one owner twice at the same time, nor while a Do of that
// owner runs.
//
// A Store must not create a shard that is missing: a shard that existed and is gone (a
// deleted file, a dropped database) must make its methods return an error that names it,
// never look like an empty shard, or a move could copy nothing and then delete the only
// copy.
type Store interface {
	// Copy makes owner's rows on shard to equal its rows on shard from: rows of the same
	// identity are replaced, and rows on to that are not on from are removed (a partial copy
	// left by a crash, say). It leaves from unchanged. In SQL: in one transaction on to,
	// delete the owner's rows, then insert every row read from from. If from holds no row of
	// owner while to holds some, or from lost rows while Copy read them, it changes nothing
	// and returns an error wrapping ErrSourceEmpty: the source may be gone because the owner
	// moved meanwhile. A Store that records which copies it made should replace only rows a
	// Copy of the owner to that shard wrote, as it wrote them (a crash, or a comparison that
	// failed, before the owner was marked Copied), and otherwise change nothing and return
	// an error wrapping ErrStrayRows: rows a process wrote there by another placement, or
	// through another owner's access, before or after a copy, would be lost. Such a Store may copy an empty source
	// over a crashed copy of its own (the application deleted the owner's rows since), once
	// it has checked, after reading the source, that the copy is still recorded (a twin that
	// moved the owner forgets it before deleting the old copy).
	Copy(ctx context.Context, owner string, from, to int) error
	// Count returns how many rows owner has on shard, read from the shard itself (no cache).
	// Before every Delete the Migration compares the counts of the old and the new shard, so
	// that a copy that did not land, or a new shard that lost it since, stops the move while
	// the old copy still exists. A count rather than a checksum: it is one indexed query in
	// any database, and the faults it guards against (a shard recreated empty, a lost
	// write-ahead log, a restore from an older backup) lose whole rows.
	Count(ctx context.Context, owner string, shard int) (int64, error)
	// Delete removes every row of owner from shard. Deleting nothing is not an error.
	Delete(ctx context.Context, owner string, shard int) error
	// Mark returns owner's mark in migration, or Unmoved if it has none.
	Mark(ctx context.Context, migration, owner string) (Mark, error)
	// SetMark durably records owner's mark in migration before returning.
	SetMark(ctx context.Context, migration, owner string, mark Mark) error
}

// Summer is a Store that sums owners' rows by content (the methods of SharedStore of the
// same names; the sqlstore's is one). A Migration over one compares the copy with the old
// copy by content, not only by count, before it deletes the old copy: a trigger of the
// application's firing for the copy's inserts, or a column rewritten on one shard while the
// owner moved, changes rows that the counts do not tell. A mismatch stops the move with
// ErrCopyMismatch, deleting nothing.
type Summer interface {
	Sums(ctx context.Context, owners []string, shard int) ([]Sum, error)
	FirstDiff(ctx context.Context, owner string, a, b int) (key string, err error)
}

// CheckedDeleter is a Store that deletes an owner's old copy only as the Migration found it
// when it compared it with the new copy. A Migration over one that is also a Summer keeps
// the old copy's sum (KeepOldSum) before it marks the owner Copied, and deletes the old copy
// with DeleteChecked, after a crash too. A write that reached the old copy after the
// comparison from something that holds none of the Migration's locks (another process
// routing through the in-process API, a script) would be deleted with it: the deletion
// stops instead with ErrCopyMismatch, deleting nothing, and the old copy stays for the
// operator to settle. An insert after the deletion is left on the old shard, where Finish
// finds it.
type CheckedDeleter interface {
	// KeepOldSum durably records sum as owner's rows on shard, its old copy, in migration.
	KeepOldSum(ctx context.Context, migration, owner string, shard int, sum Sum) error
	// DeleteChecked removes every row of owner from shard, as Delete does, in one
	// transaction that sums them first: if a sum is kept of the owner in migration and the
	// rows, if any, are not that sum, it deletes nothing and returns an error wrapping
	// ErrCopyMismatch. Once the rows are gone it forgets the kept sum.
	DeleteChecked(ctx context.Context, migration, owner string, shard int) error
}

// FinishRecorder is a Store that keeps durably which migrations finished. Migration.Finish
// records its migration there before it returns nil, and a Migration of that ID, in any
// process and after any restart, then refuses Run (ErrFinished) and routes Do by the after
// sharder alone, reading no mark: a new owner whose first rows were written after Finish,
// and so has no mark, is never read from, nor copied over from, its old shard.
//
// A Store that is not one leaves the finish in the memory of the Migration value that
// finished. The application must then make sure that no Migration of a finished ID is made
// again, in any process, while owners may be written: every process that starts after Finish
// routes by the after sharder alone (the configuration stops naming the migration before any
// process restarts), or a new owner's rows are read from its old shard and the next Run
// copies that shard over them.
type FinishRecorder interface {
	// RecordFinished durably records that migration finished, before returning. Recording
	// it again is not an error. A store that is also a MoverLock records it, as
	// SharedStore.Finished does, on the shards whose placement the migration's claim
	// recorded, so that the next migration may claim them.
	RecordFinished(ctx context.Context, migration string) error
	// IsFinished reports whether RecordFinished succeeded for migration, in any process.
	IsFinished(ctx context.Context, migration string) (bool, error)
}

// PlacementChecker is a Store that records on its shards the placement each serves, as a
// MoverLock keeps Claim.Placement (the in-process Migration's Run claims with its own). The
// first Do of a Migration value, and the first after each PlacementRecheck, asks it whether
// every shard accepts an access routed by the migration (Placement.Accepts), and until one
// does, Do calls no function and returns its
// *PlacementError: a process that routes by a migration started before the one in force
// finished, or by one a newer migration replaced, would write where no mover reads, and a
// later copy could replace the owner's rows with what it wrote.
type PlacementChecker interface {
	// CheckPlacement returns a *PlacementError naming the first shard that does not accept
	// an access routed by p, or nil if every shard does.
	CheckPlacement(ctx context.Context, p Placement) error
}

// Mark is how far one owner's move has gone in one migration: the rebalancing post's [004]
// messages_rebalanced flag, with one more state so that a crash after the copy never leaves
// a stale copy on the old shard. A mark only ever advances.
type Mark uint8

const (
	// Unmoved: the owner's rows are on its old shard, which serves it. The new shard may hold
	// a partial copy, which the next Copy replaces. Stores return it for an owner with no
	// mark.
	Unmoved Mark = iota
	// Copied: the owner's rows are complete on the new shard, which serves it from now on; the
	// old copy may still exist and is deleted next.
	Copied
	// Done: the old copy is deleted too. The owner's move is over.
	Done
)

// String returns "unmoved", "copied", "done", or "mark(n)" for a value out of range.
func (m Mark) String() string {
	switch m {
	case Unmoved:
		return "unmoved"
	case Copied:
		return "copied"
	case Done:
		return "done"
	}
	return fmt.Sprintf("mark(%d)", uint8(m))
}

// StoreIdentity is a Store that names the databases it works on, whatever value holds them:
// two Stores over the same databases (a second one made in the process, a wrapper that
// embeds one to add metrics) give one Identity, and Repin values of one ID over them share
// the batch under way, as values over one Store value do; else they would not see each
// other's batch, and one would write an owner the other moves. "" names none yet, and
// NewRepin refuses such a Store. The sqlstore's is the identity of its control database,
// known once Init ran. A wrapper that does not embed the Store it wraps must forward it.
type StoreIdentity interface {
	Identity() string
}
