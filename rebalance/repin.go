package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard"
)

// Repin moves single owners between shards by writing their entries in a shard.Directory (the
// ID-features article's [001] lookup table, for IDs that cannot change): pin a hot owner to a
// shard of its own, or drain a shard a batch of owners at a time, without changing the rule for
// anyone else. Each batch is a Migration from the directory to a Clone of it over a second
// instance of the rule, in which the batch's owners are pinned first: their data is copied,
// counted on both shards, marked, and deleted from the old shard; only then are they pinned in
// the directory itself.
//
// While owners move, the application reads and writes through Do, which routes by the
// batch under way, and changes the directory only through the Repin. After Move or Drain
// returns, save the directory (MarshalText, or Entries into a table); delete the marks of
// its batches (migrations named "<ID>/...", see below) only once every process routes by the
// saved entries. After a crash, make a new Repin with the same ID over the saved directory
// and move the same owners again, in the same batches (Drain with the same arguments), before
// serving them: owners the crash left moved are found Done by their marks and only pinned.
//
// Each batch is a migration named "<ID>/<fingerprint of the directory it starts
// from>/<fingerprint of the directory it ends at>" (Fingerprint covers the directory's
// entries): its marks, its claim and its finish are under that name, so a batch resumed from
// the same directory to the same pins finds its marks, a later batch moving an owner again
// starts afresh, and one to other pins from a directory whose batch finished unsaved (a crash;
// a second process with a Repin of the same ID) is refused, and so is one repeated after its
// pins were undone (pin, unpin, pin again: ErrFinished; move with a new ID). Over a Store that
// is a MoverLock and a PlacementChecker (the sqlstore module's is), each batch claims the
// shards with its placement and records it finished, and Move, Drain and Do (its first, the
// first after each PlacementRecheck, and the first after each batch) return a *PlacementError
// while the shards serve a migration the directory does not follow: one unfinished (another
// migration, or another Repin's batch), whose owners are not all where the directory places
// them, or a finished one whose after sharder is not the directory (a directory without a pin
// another Repin made). Change the directory's shard count with Resize, which records the change
// the same way.
//
// All methods are safe for concurrent use. The Repin values of one ID over one Store in a
// process share the batch under way (one Store value, or Stores of one [StoreIdentity]: a
// wrapper that embeds the sqlstore's, a second one over the same databases): Move, Unpin,
// Drain and Resize of any of them run one at a time, and Do of each routes through the batch
// another one runs, then asks the shards again, so a value whose directory lacks the batch's
// pins is refused (ErrPlacement) rather than writing on an old copy. Such a value may not
// move either (ErrPlacement), nor may one whose directory differs from that of a batch
// another value left unfinished by an error: the next Move of a value with that batch's
// directory ends it. Make one Repin per ID in a process and share it between the
// application's requests and the operator's calls. The zero Repin moves nothing: its
// methods return an error wrapping ErrConfig.
type Repin struct {
	id    string
	d     *shard.Directory
	rule  shard.Sharder
	store Store
	opts  Options

	sh *repinShared // what the ID's values in this process share

	placementRead recheck       // when Do last found the placement served, if checked
	seen          atomic.Uint64 // sh.ended at that check
}

// repinShared is what every Repin value of one ID in this process shares (see repinTables):
// a second value (an admin handler's beside the application's) routes through the batch
// under way as the first does, and asks the shards again after each batch, so that it
// neither writes on an old copy a batch is about to delete nor routes by a directory
// without the batch's pins.
type repinShared struct {
	run sync.Mutex // serializes Move, Unpin, Drain and Resize

	// The batch left unfinished by an error, and the Fingerprint of the directory it starts
	// from: the next Move of a value with that directory ends it. Guarded by run.
	pending map[string]int
	from    uint64

	// Do holds mu shared while it routes and runs fn, so that a batch is published only
	// when no access routed without it is still running.
	mu    sync.RWMutex
	cur   *Migration       // the batch under way or left by an error, nil between batches
	ended atomic.Uint64    // batches ended (directories changed): Do asks the shards again
	dir   *shard.Directory // the directory the last batch ended at, and its Fingerprint
	at    uint64
	bound binding // kept while Do runs functions between batches
}

// end records that a batch ended with the directory d; the caller holds mu.
func (sh *repinShared) end(d *shard.Directory) {
	sh.cur, sh.dir, sh.at = nil, d, Fingerprint(d)
	sh.ended.Add(1)
}

// knows returns an error wrapping ErrPlacement if the last batch of the ID ended at another
// directory than d, with other entries: d lacks that batch's pins (whether or not the store
// can tell). The caller holds mu shared.
func (sh *repinShared) knows(id string, d *shard.Directory) error {
	if sh.dir == nil || sh.dir == d {
		return nil
	}
	if fp := Fingerprint(d); fp != sh.at {
		return fmt.Errorf("rebalance: repin %q: another Repin of this ID in this process moved owners to the directory %016x; this one's is %016x: load the saved directory: %w", id, sh.at, fp, ErrPlacement)
	}
	return nil
}

// mayMove returns an error wrapping ErrPlacement unless r's directory is where the ID's
// batches in this process left it: a batch from a directory without the last batch's pins,
// or beside a batch another value left unfinished from another directory, would move owners
// from shards their rows have left (the store may not be able to tell). The caller holds
// sh.run.
func (r *Repin) mayMove() error {
	r.sh.mu.RLock()
	err := r.sh.knows(r.id, r.d)
	r.sh.mu.RUnlock()
	if err != nil {
		return err
	}
	if len(r.sh.pending) > 0 {
		if fp := Fingerprint(r.d); fp != r.sh.from {
			return fmt.Errorf("rebalance: repin %q: another Repin of this ID in this process left a batch of %d owners unfinished from the directory %016x; this one's is %016x: finish it with that one's Move: %w", r.id, len(r.sh.pending), r.sh.from, fp, ErrPlacement)
		}
	}
	return nil
}

// repinTables holds the repinShared of each Repin ID and Store in use: Stores of one
// StoreIdentity are one, and values over two Stores of other databases do not share (two
// clusters may use one ID), nor do values over a Store that cannot be a map key.
var repinTables perID[repinKey, repinShared]

type repinKey struct {
	id    string
	store any // the Store's identity, or else the Store
}

// identityOf is a StoreIdentity's name as a repinKey's store.
type identityOf string

// sharedOf returns what the Repin values of id over store share in this process, or an
// error if store is a StoreIdentity that names no databases yet: keyed by the value until
// then, a Repin would share nothing with those made after.
func sharedOf(id string, store Store) (*repinShared, error) {
	var of any = store
	if s, ok := store.(StoreIdentity); ok {
		name := s.Identity()
		if name == "" {
			return nil, fmt.Errorf("rebalance: repin %q: the store (%T) names no databases yet (sqlstore: call Init first): %w", id, store, ErrConfig)
		}
		of = identityOf(name)
	}
	if v := reflect.ValueOf(of); !v.IsValid() || !v.Comparable() {
		return new(repinShared), nil
	}
	return repinTables.get(repinKey{id, of}, func() *repinShared { return new(repinShared) }), nil
}

// NewRepin returns a Repin with the given ID that moves owners of d. rule is a second
// instance of d's fallback rule, with as many shards and no state shared with it (for Jump,
// another NewJump of the same count): the batches' clones place unpinned owners with it.
// The ID names the marks in store, as for New; opts are the Options of every batch's
// Migration. Bad arguments are errors wrapping ErrConfig.
func NewRepin(id string, d *shard.Directory, rule shard.Sharder, store Store, opts Options) (*Repin, error) {
	if id == "" {
		return nil, fmt.Errorf("rebalance: empty repin ID: %w", ErrConfig)
	}
	if d == nil || isNil(rule) {
		return nil, fmt.Errorf("rebalance: repin %q: nil directory or rule: %w", id, ErrConfig)
	}
	// One mover name for every batch: a batch whose claim failed after the store recorded
	// it (the answer lost) is claimed again by the next Move at once, not after its lease.
	opts.Mover = cmp.Or(opts.Mover, defaultMover())
	r := &Repin{id: id, d: d, rule: rule, store: store, opts: opts}
	sh, err := sharedOf(id, store)
	if err != nil {
		return nil, err
	}
	r.sh = sh
	// A batch of no owner checks the rest of the arguments as every batch will.
	if _, err := r.batch(nil); err != nil {
		return nil, err
	}
	return r, nil
}

// errZeroRepin is the error of the zero Repin's methods.
var errZeroRepin = fmt.Errorf("rebalance: zero Repin: make one with NewRepin: %w", ErrConfig)

// unpinned, as the shard of an owner in a batch, removes the owner's entry: the owner moves to
// where the rule places it (see Unpin).
const unpinned = -1

// target is where the batch entry (owner, to) places owner.
func (r *Repin) target(owner string, to int) int {
	if to == unpinned {
		return r.rule.Locate(owner)
	}
	return to
}

// batch returns the Migration that moves the owners of pins from d's placement to a clone
// of d in which they are pinned, or unpinned.
func (r *Repin) batch(pins map[string]int) (*Migration, error) {
	if n, m := r.rule.Shards(), r.d.Shards(); n != m {
		return nil, fmt.Errorf("rebalance: repin %q: the rule has %d shards, the directory %d: give a second instance of the directory's rule with its count: %w", r.id, n, m, ErrConfig)
	}
	after, err := r.d.Clone(r.rule)
	if err != nil {
		return nil, fmt.Errorf("rebalance: repin %q: %w", r.id, err)
	}
	for _, o := range slices.Sorted(maps.Keys(pins)) {
		if pins[o] == unpinned {
			after.Unpin(o)
		} else if err := after.Pin(o, pins[o]); err != nil {
			return nil, fmt.Errorf("rebalance: repin %q: %w", r.id, err)
		}
	}
	return r.migration(after)
}

// migration returns the Migration from d to after, a clone of it, named by the Repin's ID
// and the directories it starts from and ends at: while it is unfinished no other
// migration or Repin may claim the shards, and a batch left by an error or a crash is
// resumed by the next one from the same directory to the same pins. One to other pins,
// after a crash kept the finished batch's pins from being saved, is another migration,
// which the shards refuse (they serve the finished one, whose after is not this before).
func (r *Repin) migration(after *shard.Directory) (*Migration, error) {
	from, to := Fingerprint(r.d), Fingerprint(after)
	m, err := newMigration(fmt.Sprintf("%s/%016x/%016x", r.id, from, to), r.d, after, r.store, r.opts, from, to)
	if err != nil {
		return nil, err
	}
	m.repin, m.finished = true, new(atomic.Bool)
	return m, nil
}

// Do calls fn with the shard that serves owner now, and returns fn's error: through the
// batch under way (see Migration.Do), else where the directory places owner. fn must not
// call a method of a Repin of this ID over this Store: it could wait for itself.
func (r *Repin) Do(ctx context.Context, owner string, fn func(shard int) error) error {
	if r.d == nil {
		return errZeroRepin
	}
	r.sh.mu.RLock()
	defer r.sh.mu.RUnlock()
	if r.sh.cur != nil {
		return r.sh.cur.Do(ctx, owner, fn) // which checks the batch's placement
	}
	if ended := r.sh.ended.Load(); r.placementRead.due() || r.seen.Load() != ended {
		if err := r.sh.knows(r.id, r.d); err != nil {
			return err
		}
		if err := r.served(ctx, r.standing()); err != nil {
			return err
		}
		if err := bindProcess(ctx, r.store, r.id); err != nil {
			return err
		}
		r.placementRead.passed()
		r.seen.Store(ended)
	}
	if r.sh.bound.hold(r.store, r.id) {
		defer r.sh.bound.release()
	}
	return fn(r.d.Locate(owner))
}

// standing is the Placement of the directory as it stands, no batch under way.
func (r *Repin) standing() Placement {
	fp := Fingerprint(r.d)
	return Placement{Migration: r.id, Before: fp, After: fp, InProcess: true}
}

// served returns nil if a Store that is a PlacementChecker accepts an access routed by p
// (see Placement.Accepts). While another migration, or another Repin's batch, is unfinished,
// or after one the directory does not follow, an owner's rows are not where the directory
// says, and a batch would copy "nothing" and pin the owner to an empty shard: served returns
// the *PlacementError.
func (r *Repin) served(ctx context.Context, p Placement) error {
	if pc, ok := r.store.(PlacementChecker); ok {
		return pc.CheckPlacement(ctx, p)
	}
	return nil
}

// Move moves every owner of pins to its shard and then pins it there in the directory, as
// one batch. An owner must be an owner as the directory's owner function returns it, and a
// shard in [0, Shards()) (else the error wraps shard.ErrDirectory or shard.ErrShard, and
// nothing moves); an owner named with another shard in an unfinished batch is an error
// wrapping ErrConfig. If the move fails, Do keeps routing the batch's owners by their
// marks, and the next Move finishes that batch first, alone, then moves its own owners as
// a batch of their own; nothing is pinned in the directory until every owner of the batch
// is Done.
func (r *Repin) Move(ctx context.Context, pins map[string]int) error {
	if r.d == nil {
		return errZeroRepin
	}
	for o, to := range pins {
		if to < 0 {
			return fmt.Errorf("rebalance: repin %q: owner %.64q to shard %d: %w", r.id, o, to, shard.ErrShard)
		}
	}
	r.sh.run.Lock()
	defer r.sh.run.Unlock()
	if err := r.mayMove(); err != nil {
		return err
	}
	if err := r.move(ctx, pins); err != nil {
		return err
	}
	return r.served(ctx, r.standing())
}

// Unpin removes the directory's entries of owners, as one batch, as Move moves: an owner
// whose entry places it elsewhere than the rule moves back to the rule's shard first; one
// already there only loses its entry. Owners without an entry are left alone (if the shards
// serve the directory: else the *PlacementError, as Move returns it). Removing an
// entry changes the directory's fingerprint, so the shards then serve the directory without
// it; a directory unpinned by hand is refused (ErrPlacement).
func (r *Repin) Unpin(ctx context.Context, owners ...string) error {
	if r.d == nil {
		return errZeroRepin
	}
	pins := map[string]int{}
	for _, o := range owners {
		pins[o] = unpinned // an owner without an entry stays where it is
	}
	r.sh.run.Lock()
	defer r.sh.run.Unlock()
	if err := r.mayMove(); err != nil {
		return err
	}
	if err := r.move(ctx, pins); err != nil {
		return err
	}
	return r.served(ctx, r.standing())
}

func (r *Repin) move(ctx context.Context, pins map[string]int) error {
	more := false // pins names an owner the unfinished batch does not
	for _, o := range slices.Sorted(maps.Keys(pins)) {
		prev, ok := r.sh.pending[o]
		if ok && prev != pins[o] {
			return fmt.Errorf("rebalance: repin %q: owner %.64q to shard %d: an unfinished batch moves it to shard %d: %w", r.id, o, r.target(o, pins[o]), r.target(o, prev), ErrConfig)
		}
		more = more || !ok
	}
	// The unfinished batch ends first, alone: with more owners it would be another
	// migration, which the shards refuse while that one is unfinished.
	if len(r.sh.pending) > 0 && more {
		if err := r.move(ctx, nil); err != nil {
			return err
		}
	}
	batch := maps.Clone(r.sh.pending)
	if batch == nil {
		batch = map[string]int{}
	}
	maps.Copy(batch, pins)
	same := true // no entry changes
	for o, to := range batch {
		if s, ok := r.d.Pinned(o); to == unpinned && ok || to != unpinned && (!ok || s != to) {
			same = false
		}
	}
	owners := slices.Values(slices.Sorted(maps.Keys(batch)))
	// A batch that pins an owner where the directory places it moves no row, but changes
	// its entries, and so its fingerprint: it is recorded all the same, or the shards would
	// refuse the directory from then on. One that changes no entry (or has no owner: a
	// Drain that finds none left, after a crash that kept its pins from being saved)
	// moves nothing, if the shards serve the directory (its owners' rows are where it
	// places them).
	if same {
		return r.served(ctx, r.standing())
	}
	m, err := r.batch(batch)
	if err != nil {
		return err
	}
	// A batch from this directory that finished before a crash kept its pins from being
	// saved (a Drain's earlier batches): Finish lets its owners be pinned if their marks
	// say Done, with no claim (the shards may serve a batch after it). A process replaying
	// an older batch after the owner moved on pins it where its rows are not: Move, Unpin
	// and Drain then find the directory not served and return the *PlacementError, and Do
	// asks the shards again before it routes by it (placementRead).
	done, err := m.recordedFinished(ctx)
	if err != nil {
		return err
	}
	if done {
		// While the shards serve the directory as it stands, this is no batch a crash left
		// unsaved but one repeated after its pins were undone (pin, unpin, pin again): its
		// marks say Done of owners it would not move.
		if _, ok := r.store.(PlacementChecker); ok && r.served(ctx, r.standing()) == nil {
			return fmt.Errorf("rebalance: repin %q: a batch from this directory to these pins finished before, and the shards serve the directory without them: the pins were undone since; move with a new ID: %w", r.id, ErrFinished)
		}
		if err := r.sameBatch(ctx, batch); err != nil {
			return err
		}
	} else if err := r.served(ctx, m.placement); err != nil {
		return err
	}
	r.sh.mu.Lock()
	r.sh.cur = m
	r.sh.mu.Unlock()
	r.sh.pending, r.sh.from = batch, Fingerprint(r.d)
	if !done {
		// Another process that routes by the directory holds none of the batch's locks;
		// once the batch claims, the shards refuse it, but its last check may be fresh.
		if err := bindProcess(ctx, r.store, r.id); err != nil {
			return err
		}
		// ErrFinished: a shard recorded the batch finished, and the control database did
		// not (the answer of Finish's record lost). Finish records it again, once it has
		// checked every owner Done and where the batch places it.
		if err := m.Run(ctx, owners); err != nil && !errors.Is(err, ErrFinished) {
			return err
		}
	}
	if err := m.Finish(ctx, owners); err != nil {
		return err
	}
	// Every owner is Done: pin them in the directory, then route by it again. Do through
	// the finished batch routes by its clone, which already holds the same pins.
	for o := range owners {
		if batch[o] == unpinned {
			r.d.Unpin(o)
		} else if err := r.d.Pin(o, batch[o]); err != nil { // only if d changed behind the Repin
			return fmt.Errorf("rebalance: repin %q: the batch moved, but pinning it failed: %w", r.id, err)
		}
	}
	r.sh.mu.Lock()
	r.sh.end(r.d) // Do asks again, for the directory pinned
	r.sh.mu.Unlock()
	r.sh.pending = nil
	return nil
}

// sameBatch returns nil if every owner of batch that changes shard holds no row on its old
// shard, as after the batch from this directory that finished before: its marks say Done.
// A batch from a directory the ID left and came back to (pins undone since, by another
// Repin) has the finished one's name and marks, but its owners are on their old shards:
// pinning them would leave their rows where the directory no longer looks.
func (r *Repin) sameBatch(ctx context.Context, batch map[string]int) error {
	for _, o := range slices.Sorted(maps.Keys(batch)) {
		from := r.d.Locate(o)
		if r.target(o, batch[o]) == from {
			continue
		}
		n, err := r.store.Count(ctx, o, from)
		if err != nil {
			return fmt.Errorf("rebalance: repin %q: owner %.64q: count rows on shard %d: %w", r.id, o, from, err)
		}
		if n > 0 {
			return fmt.Errorf("rebalance: repin %q: owner %.64q: a batch from this directory finished before, yet shard %d still holds %d rows of the owner: the directory came back to an earlier state; move with a new ID: %w",
				r.id, o, from, n, ErrFinished)
		}
	}
	return nil
}

// Drain moves every owner of owners that the directory places on shard from to shard
// to(owner), batch owners at a time (the last batch may be smaller), each batch as Move
// moves it: the shard empties gradually while everything else keeps working. to must not
// return from, and batch must be at least 1 (ErrConfig). An unfinished batch left by a
// failed Move is finished by the first batch, so one that pins owners onto from is refused
// before anything moves (ErrConfig, naming them): finish it with Move, then drain. To
// remove the shard afterwards without moving anything, let to place owners where the rule
// with the shard removed does (for Jump draining its last shard, a Jump of one shard
// fewer), then call Resize: the drained owners' entries then agree with the rule, and Unpin
// removes them without moving anything.
//
// After the last batch Drain checks that the shard is empty, and returns an error wrapping
// ErrUnfinished that names the owners left on it: those of owners the directory still
// places there and, if the store is an OwnerLister, every owner with rows on it, such as an
// owner created during the drain whom the rule places on from. Over a Store that is not an
// OwnerLister such an owner goes unnoticed: stop creating owners that the directory places
// on from before draining it, or drain again with them listed. Either way an owner created
// after Drain returns and before the Resize still lands on from.
func (r *Repin) Drain(ctx context.Context, from int, owners iter.Seq[string], batch int, to func(owner string) int) error {
	if owners == nil || to == nil || batch < 1 {
		return fmt.Errorf("rebalance: repin %q: drain with nil owners or to, or batch %d: want a batch of at least 1: %w", r.id, batch, ErrConfig)
	}
	if r.d == nil {
		return errZeroRepin
	}
	r.sh.run.Lock()
	defer r.sh.run.Unlock()
	if err := r.mayMove(); err != nil {
		return err
	}
	var onto []string
	for _, o := range slices.Sorted(maps.Keys(r.sh.pending)) {
		if r.target(o, r.sh.pending[o]) == from {
			onto = append(onto, o)
		}
	}
	if len(onto) > 0 {
		return fmt.Errorf("rebalance: repin %q: drain shard %d: an unfinished batch pins %d owners onto it, among them %.64q: finish it with Move, then drain: %w", r.id, from, len(onto), onto[:min(len(onto), 10)], ErrConfig)
	}
	pins := map[string]int{}
	for o := range owners {
		if r.d.Locate(o) != from {
			continue
		}
		if pins[o] = to(o); pins[o] == from {
			return fmt.Errorf("rebalance: repin %q: drain shard %d: to(%.64q) is %d, the shard being drained: %w", r.id, from, o, from, ErrConfig)
		}
		if len(pins) == batch {
			if err := r.move(ctx, pins); err != nil {
				return err
			}
			clear(pins)
		}
	}
	if err := r.move(ctx, pins); err != nil {
		return err
	}
	if err := r.served(ctx, r.standing()); err != nil {
		return err
	}
	return r.drained(ctx, from, owners)
}

// drained returns nil if no owner of owners is placed on shard from and, if the store is
// an OwnerLister, no owner has rows on it; else an error wrapping ErrUnfinished naming them.
func (r *Repin) drained(ctx context.Context, from int, owners iter.Seq[string]) error {
	left := map[string]bool{}
	for o := range owners {
		if r.d.Locate(o) == from {
			left[o] = true
		}
	}
	if lister, ok := r.store.(OwnerLister); ok {
		for o, err := range lister.Owners(ctx, from) {
			if err != nil {
				return fmt.Errorf("rebalance: repin %q: drain shard %d: list the owners left on it: %w", r.id, from, err)
			}
			left[o] = true
		}
	}
	if len(left) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(left))
	return fmt.Errorf("rebalance: repin %q: drain shard %d: after the last batch %d owners are still on it, among them %.64q (created during the drain, or not among the owners given): drain again with them listed: %w",
		r.id, from, len(names), names[:min(len(names), 10)], ErrUnfinished)
}

// Resize lowers the shard count of the directory, and of the rule with it, to n, moving no
// owner: to remove shards once Drain has emptied them (the rule of n shards must place
// every owner not pinned where it is, as Jump does when its last shards go). It claims the
// shards as a batch would, from the directory to a clone of it over the rule resized, and
// finishes it, which checks, over an OwnerLister, that no shard holds rows of an owner the
// resized directory places elsewhere (an error wrapping ErrUnfinished naming them, nothing
// changed). The shards then serve the resized directory: a process that routes by the old
// count is refused (ErrPlacement), one that loads the saved entries into a directory of n
// shards is served. An entry that pins an owner to a shard removed is an error wrapping
// shard.ErrShard; an unfinished batch, or n not below Shards(), one wrapping ErrConfig
// (finish the batch with Move first). The directory keeps its entries: remove them with
// Unpin, not by hand (the shards would refuse a directory whose entries they never served).
func (r *Repin) Resize(ctx context.Context, n int) error {
	if r.d == nil {
		return errZeroRepin
	}
	r.sh.run.Lock()
	defer r.sh.run.Unlock()
	if err := r.mayMove(); err != nil {
		return err
	}
	if len(r.sh.pending) > 0 {
		return fmt.Errorf("rebalance: repin %q: resize to %d shards: an unfinished batch moves %d owners: finish it with Move first: %w", r.id, n, len(r.sh.pending), ErrConfig)
	}
	if n == r.d.Shards() {
		return nil
	}
	if n < 1 || n > r.d.Shards() {
		return fmt.Errorf("rebalance: repin %q: resize from %d shards to %d: Resize only removes shards (to add some, migrate with New to a directory over a rule of more shards, which moves the owners the rule gives them): %w", r.id, r.d.Shards(), n, ErrConfig)
	}
	was := r.rule.Shards()
	if err := r.rule.Resize(n); err != nil {
		return fmt.Errorf("rebalance: repin %q: resize the rule to %d shards: %w", r.id, n, err)
	}
	err := r.resize(ctx, n)
	if err != nil && r.rule.Shards() != was {
		if rerr := r.rule.Resize(was); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rebalance: repin %q: resize the rule back to %d shards: %w", r.id, was, rerr))
		}
	}
	return err
}

func (r *Repin) resize(ctx context.Context, n int) error {
	after, err := r.d.Clone(r.rule)
	if err != nil {
		return fmt.Errorf("rebalance: repin %q: %w", r.id, err)
	}
	m, err := r.migration(after)
	if err != nil {
		return err
	}
	if err := r.served(ctx, m.placement); err != nil {
		return err
	}
	// Owners left where the resized directory does not place them are named before the
	// claim, so that a refusal changes nothing; Finish looks again, holding every owner.
	left := &UnfinishedError{Migration: m.id}
	if err := leftBehind(ctx, r.store, after, r.d.Shards(), nil, left); err != nil {
		return err
	}
	if left.misplaced() {
		return fmt.Errorf("rebalance: repin %q: resize to %d shards: owners have rows where the resized directory does not place them: drain the shards removed first: %w", r.id, n, left)
	}
	// Do routes through the batch from here: a new owner's first write then holds its lock,
	// which Finish takes while it lists the shards, and lands where the listing sees it.
	r.sh.mu.Lock()
	r.sh.cur = m
	r.sh.mu.Unlock()
	defer func() {
		r.sh.mu.Lock()
		r.sh.cur = nil
		r.sh.mu.Unlock()
	}()
	if err := bindProcess(ctx, r.store, r.id); err != nil {
		return err
	}
	none := slices.Values([]string(nil))
	// After a crash between the finish and the directory's resize, Run refuses the finished
	// batch (ErrFinished) and Finish returns nil: it moved no owner.
	if err := m.Run(ctx, none); err != nil && !errors.Is(err, ErrFinished) {
		return err
	}
	if err := m.Finish(ctx, none); err != nil {
		if errors.Is(err, ErrUnfinished) {
			return fmt.Errorf("rebalance: repin %q: resize to %d shards: owners have rows where the resized directory does not place them: drain the shards removed first: %w", r.id, n, err)
		}
		return err
	}
	r.sh.mu.Lock() // no Do routes while the count changes
	defer r.sh.mu.Unlock()
	r.sh.cur = nil
	if err := r.d.Resize(n); err != nil {
		return fmt.Errorf("rebalance: repin %q: the shards serve the directory of %d shards, but resizing it failed: %w", r.id, n, err)
	}
	r.sh.end(r.d) // Do asks again, for the resized directory
	return nil
}
