package rebalance

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
// While Do runs a function on an owner's old shard (a Repin's Do, any function between
// batches), its process binds itself again each PlacementRecheck, so that a mover of another
// process cannot claim until the function has returned: one that runs longer than
// ProcessWindow would otherwise write on an old copy that mover copied or deleted. What
// stays open: a process frozen (stopped, swapped out) for longer than ProcessWindow -
// PlacementRecheck (4 s) in such a function.
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

// binding keeps this process bound to an in-process migration, over a ProcessBinder, while
// functions run whose owners a mover of another process must not move meanwhile (a
// Migration's on old shards, a Repin's between batches): it binds again each
// PlacementRecheck until none runs.
type binding struct {
	running atomic.Int64
	keeping atomic.Bool // keep runs
}

// hold is called before such a function runs, and release after it if hold returned true.
func (b *binding) hold(store Store, id string) bool {
	if _, ok := store.(ProcessBinder); !ok {
		return false
	}
	if b.running.Add(1) == 1 && b.keeping.CompareAndSwap(false, true) {
		go b.keep(store, id)
	}
	return true
}

func (b *binding) release() { b.running.Add(-1) }

// keep binds each PlacementRecheck, and returns once no function runs. A failed bind is not
// retried sooner: the process stays bound for ProcessWindow after the last one that passed.
func (b *binding) keep(store Store, id string) {
	tick := time.NewTicker(PlacementRecheck)
	defer tick.Stop()
	for range tick.C {
		if b.running.Load() == 0 {
			b.keeping.Store(false)
			// A function that began meanwhile saw keeping true and started no other keep.
			if b.running.Load() == 0 || !b.keeping.CompareAndSwap(false, true) {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), PlacementRecheck)
		_ = bindProcess(ctx, store, id) // refused or failed: nothing to do for the functions under way
		cancel()
	}
}

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
