package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrOtherProcess reports an in-process Migration used by a second process: its Do, Run or
// Finish refused while another process routes by the migration or moves it. The error is a
// *ProcessError that names that process.
var ErrOtherProcess = errors.New("in-process migration used by another process")

// ProcessWindow is how long a process stays bound to an in-process migration after it last
// routed by it (see ProcessBinder): five times PlacementRecheck, so that a Do of another
// process that passed its last check before then has asked again, and been refused, by the
// time a mover claims.
const ProcessWindow = 5 * PlacementRecheck

// ProcessBinder is a Store that lets one process at a time use an in-process Migration of an
// ID. A Migration's locks live in its process: a second process that routes by the same
// migration (a second replica of the application, a script) takes none of them, so its
// write between the mover's copy and its deletion of the old copy is lost, or its UPDATE
// after the deletion changes no row and is acknowledged all the same. Processes that share
// only the databases use Shared.
//
// The Migration binds its process at each placement check of Do (the first, and the first
// after each PlacementRecheck), in its claims (Claim.Process) and in Finish, before and after
// it lists the shards; a store that binds should be a MoverLock too, whose claim keeps the
// mover's process bound for as long as it moves. A Repin binds its ID as a migration's at
// each placement check of its Do between batches, and before each batch claims. The store
// records, for the migration, the process bound and when it last did, and refuses another
// process while that one is bound: one that routed by it, or whose claim ended, within
// ProcessWindow, or whose claim's lease has not run out. A migration recorded finished binds
// nobody: every process routes its owners by the after sharder. So a process restarted
// after a crash of the one that moved may route by the migration once the dead one's lease
// (Options.Lease) and then ProcessWindow have run out; until then its Do returns the
// *ProcessError, which says when.
//
// What stays open: a function that a second process's Do started before a mover claimed,
// still running when that mover moves its owner: one of more than ProcessWindow -
// PlacementRecheck (4 s), since every Do after that asked again and was refused.
type ProcessBinder interface {
	// Bind binds process to the in-process migration, or returns a *ProcessError,
	// changing nothing, while another process is bound to it.
	Bind(ctx context.Context, migration, process string) error
}

// ProcessError is the error of a Bind, or a claim, refused because another process uses the
// in-process migration. errors.Is(err, ErrOtherProcess) is true of it.
type ProcessError struct {
	Migration string
	// Process is the process bound to the migration, and Wanted the one refused.
	Process, Wanted string
	// Moving says that Process's mover holds the migration's claim.
	Moving bool
	// Left is how long Process stays bound unless it routes or claims again.
	Left time.Duration
}

// Error names both processes and says how to use the migration from many.
func (e *ProcessError) Error() string {
	what := "routes by it"
	if e.Moving {
		what = "moves it"
	}
	return fmt.Sprintf("rebalance: migration %q: process %s %s through the in-process API (rebalance.New), whose locks live in its own process: process %s may not use it meanwhile, or a write it made while the owner moved would be lost. Run the application and the mover of an in-process migration in one process, or use rebalance.NewShared in every process; if %s is gone, this one may use it in %v",
		e.Migration, e.Process, what, e.Wanted, e.Process, e.Left.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrOtherProcess) true.
func (e *ProcessError) Is(target error) bool { return target == ErrOtherProcess }

// thisProcess names this process to a ProcessBinder: host, pid and a random part (a pid
// comes back after a restart). The Migration values of an ID in one process share their
// locks, so they share this name too.
var thisProcess = defaultMover()

// bind binds this process to the migration over a Store that is a ProcessBinder.
func (m *Migration) bind(ctx context.Context) error { return bindProcess(ctx, m.store, m.id) }

// bindProcess binds this process to the in-process migration id over a store that is a
// ProcessBinder.
func bindProcess(ctx context.Context, store Store, id string) error {
	b, ok := store.(ProcessBinder)
	if !ok {
		return nil
	}
	if err := b.Bind(ctx, id, thisProcess); err != nil {
		var pe *ProcessError
		if errors.As(err, &pe) {
			return err
		}
		return fmt.Errorf("rebalance: migration %q: bind process %s: %w", id, thisProcess, err)
	}
	return nil
}
