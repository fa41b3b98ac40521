package rebalance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/shardkit/shard"
)

// ErrMoverRunning reports a claim refused because another mover holds the migration: a
// mover of the same election token whose lease has not run out. The error is a *MoverError
// that names it.
var ErrMoverRunning = errors.New("another mover runs this migration")

// ErrPlacement reports an access, or a claim, for a placement the shard does not serve: a
// process routing by another migration's sharders, or a mover started before the migration
// the shards serve was finished. The error is a *PlacementError.
var ErrPlacement = errors.New("shard serves another placement")

// Upper bound of the movers' lease, beyond which NewShared returns an error wrapping
// ErrConfig.
const MaxLease = time.Hour

// Claim is what a mover asks of a store before it changes anything (MoverLock.Claim).
type Claim struct {
	// Migration is the migration's ID.
	Migration string
	// Election is the mover's election epoch (SharedOptions.Token): a claim of an older one
	// than the store has seen is refused, and a newer one takes the migration over at once.
	Election uint64
	// Mover names the process that claims, in errors and in the store.
	Mover string
	// Lease is how long the claim holds without a Renew: a second mover of the same
	// Election is refused until it has run out.
	Lease time.Duration
	// Placement, if not zero, is recorded on every shard as the placement it serves.
	Placement Placement
	// Process, for the claim of an in-process Migration, names its process: a store that is
	// a ProcessBinder refuses the claim, as Bind would, while another process is bound to
	// the migration, and binds this one while the claim holds and ProcessWindow after.
	Process string
}

// MoverLock is how a store lets one mover at a time move a migration's data, and refuses
// every write of a mover that another one has replaced. A SharedStore is one; a Store may
// be one too, and then Migration.Run claims through it.
//
// The store issues the tokens itself: Claim returns one greater than every token it issued
// for the migration before, and records it on every shard, so that a token can never be left
// at a default by mistake and no two movers ever hold one token. The control database
// arbitrates: it holds the claim's election epoch, mover, token and lease end.
type MoverLock interface {
	// Claim takes the migration for c.Mover and returns its token. It refuses (changing
	// nothing) with a *FenceError if the store has seen a newer election epoch, and with a
	// *MoverError if another mover of the same epoch holds a lease that has not run out. It
	// then records the token on every shard (each refuses it if it has seen a newer one),
	// and c.Placement if not zero (a *PlacementError if a shard serves a placement that
	// this one may not follow, an error wrapping ErrFinished if the store recorded the
	// migration finished: a finished migration is never moved again).
	Claim(ctx context.Context, c Claim) (token uint64, err error)
	// Renew extends the lease of the claim of token to lease from now, or returns a
	// *FenceError if a newer claim took the migration.
	Renew(ctx context.Context, migration string, token uint64, lease time.Duration) error
	// Release ends the lease of the claim of token at once, so that the next mover need not
	// wait for it; it does nothing if a newer claim took the migration.
	Release(ctx context.Context, migration string, token uint64) error
}

// MoverError is the error of a claim refused because another mover holds the migration.
// errors.Is(err, ErrMoverRunning) is true of it.
type MoverError struct {
	Migration string
	// Holder is the mover that holds the migration, and Election its epoch.
	Holder   string
	Election uint64
	// Left is how long its lease had to run when the claim was refused.
	Left time.Duration
}

// Error names the mover that runs and says when its lease runs out.
func (e *MoverError) Error() string {
	return fmt.Sprintf("rebalance: migration %q: a mover already runs it: %s (election epoch %d); its lease runs out in %v unless it renews it: stop it, or, if it died, run again after that",
		e.Migration, e.Holder, e.Election, e.Left.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrMoverRunning) true.
func (e *MoverError) Is(target error) bool { return target == ErrMoverRunning }

// Placement names what a process routes by: a migration and fingerprints of its before and
// after sharders. A mover's claim records it on every shard, and a shard refuses an access
// routed by a placement it does not serve (see PlacementError), also for an owner that never
// had a fence there.
type Placement struct {
	Migration     string
	Before, After uint64
	// Leaving marks an access routed to the shard an owner leaves: the before sharder's,
	// for an owner the migration moves. Once the migration is finished that shard no
	// longer serves the owner, fenced or not (a new owner's first rows would be left there,
	// where the after sharder never looks), and refuses it.
	Leaving bool
	// Arriving marks an access routed by the after sharder alone, because the process holds
	// the migration finished (Shared.Do once Finish returned or a shard said so; a router
	// that reads the migration done in its record). A shard accepts it only where it serves
	// this very placement, finished: an access of the next migration is otherwise accepted
	// before its mover claims, which is sound only for one routed by that migration's before
	// sharder, where every owner still is; a migration said done that no mover ran (a wrong
	// record) would put a write where nobody reads it. Where the finish is recorded on some
	// shards and not yet on others, the others refuse it until it is: availability, not data.
	Arriving bool
	// InProcess marks the placement of an in-process Migration (New): its mover sets no
	// fences, and its Do holds an owner's lock in its own process only. A shard that serves
	// a migration unfinished refuses an access or a claim of the same ID of the other kind:
	// a Shared process that wrote on an owner's old shard while an in-process mover copied it
	// would lose the write when that mover deleted the old copy, and an in-process Do does
	// not wait for a Shared mover's fences. Once the migration is finished both kinds route
	// its owners by the after sharder, and the kind no longer matters.
	InProcess bool
}

// PlacementOf returns the Placement of migration id from before to after.
func PlacementOf(id string, before, after shard.Sharder) Placement {
	return Placement{Migration: id, Before: Fingerprint(before), After: Fingerprint(after)}
}

// IsZero says whether p is the zero Placement.
func (p Placement) IsZero() bool { return p == Placement{} }

// fingerprintProbes is how many keys Fingerprint locates.
const fingerprintProbes = 256

// Fingerprint identifies where s puts keys: a hash of its shard count, of where it places
// 256 fixed keys, for a sharder with a partition table (shard.Partitions,
// shard.PagedPartitions: Table) of every partition's shard, and for a sharder with entries
// (a shard.Directory with owners pinned) of every entry. Two sharders that place keys alike (one strategy and size, built in two
// processes, with the same entries) have the same fingerprint; two that differ in strategy,
// size, seed or an entry have different ones, but for a chance of about 2^-64, or when they
// agree on every probe key (they then place nearly all keys alike). A directory (a sharder
// with a Fallback) is probed through its rule, so one with no entry has its rule's
// fingerprint whatever its owner function. A sharder that routes keys by their prefix-ID
// owner or hash tag (shard.ByPrefix, shard.ByHashTag) differs from the one it wraps. Never 0.
func Fingerprint(s shard.Sharder) uint64 {
	buf := make([]byte, 0, 8*(fingerprintProbes+1))
	put := func(v int) { buf = strconv.AppendInt(buf, int64(v), 10); buf = append(buf, ',') }
	put(s.Shards())
	// A directory places owners by its fallback: probed through an owner function (the
	// part before a "/", say) the keys could all be one owner, and directories over two
	// rules of one size would agree on every probe.
	rule := s
	if d, ok := s.(interface{ Fallback() shard.Sharder }); ok && d.Fallback() != nil {
		rule = d.Fallback()
	}
	for i := range fingerprintProbes {
		put(rule.Locate("rebalance/fingerprint/" + strconv.Itoa(i)))
	}
	h := xxhash.New()
	h.Write(buf)
	// The probes above hold neither a '-' nor a hash tag, so a co-location wrapper
	// (shard.ByPrefix, shard.ByHashTag, a directory whose owner function is
	// shard.PrefixOwner) places them as the sharder it wraps: a process configured with the
	// wrapper and one without would share a placement. Where every key of such a shape
	// lands with its owner, a flag says so; other sharders agree on all 64 by a chance of
	// Shards()^-64, and keep their fingerprints.
	if s.Shards() > 1 {
		if colocates(s, func(owner string) string { return owner + "-fingerprint" }) {
			h.WriteString("/prefix")
		}
		if colocates(s, func(owner string) string { return "{" + owner + "}fingerprint" }) {
			h.WriteString("/tag")
		}
	}
	if p, ok := s.(interface{ Table() []int }); ok {
		// A partition table that moved one partition agrees on every probe key that
		// falls outside it: nearly all of them, with thousands of partitions.
		for _, owner := range p.Table() {
			buf = buf[:0]
			put(owner)
			h.Write(buf)
		}
	}
	if d, ok := s.(interface{ Entries() iter.Seq2[string, int] }); ok {
		// A process whose directory lacks a pin routes that owner to where its rows no
		// longer are, though every probe key agrees.
		for owner, shard := range d.Entries() {
			buf = buf[:0]
			put(len(owner))
			put(shard)
			h.Write(buf)
			h.WriteString(owner)
		}
	}
	return max(h.Sum64(), 1)
}

// colocates reports whether s places the key that key makes of each of 64 probe owners
// where it places the owner.
func colocates(s shard.Sharder, key func(owner string) string) bool {
	for i := range 64 {
		owner := "rebalance" + strconv.Itoa(i)
		if s.Locate(key(owner)) != s.Locate(owner) {
			return false
		}
	}
	return true
}

// Accepts says whether a shard that serves placement served (the zero Placement: none
// recorded yet), finished or not, accepts an access routed by p: p is the placement it
// serves, or p's migration follows a finished one whose after sharder is p's before (its
// mover has not claimed yet, and every owner is where p's before sharder puts it). Stores
// apply this rule to every access, and to every claim: a mover may claim a shard for p on
// the same terms (a resume of p, or the migration after a finished one).
//
// An access or a claim of the migration the shard serves unfinished is refused if it is of
// the other kind (InProcess). A Leaving access of a migration is refused once the shard
// serves it finished, and an Arriving access everywhere but where the shard serves p
// itself, finished. A store
// also refuses an access routed by a migration it recorded finished other than the one it
// serves (SharedStore.Finished): after 2 -> 3, 3 -> 2 and 2 -> 3 again, a process that
// still routes by the finished 3 -> 2 is no next migration, though its before sharder is
// the after sharder of the one served.
func (p Placement) Accepts(served Placement, finished bool) bool {
	if finished {
		p.InProcess = served.InProcess
	}
	if p.Leaving && finished && p.Migration == served.Migration {
		return false
	}
	if p.Arriving {
		p.Leaving, p.Arriving = false, false
		return finished && p == served
	}
	p.Leaving = false
	return served.IsZero() || p == served || finished && p.Migration != served.Migration && p.Before == served.After
}

// PlacementError is the error of an access or a claim for a placement the shard does not
// serve. errors.Is(err, ErrPlacement) is true of it.
type PlacementError struct {
	// Shard is the shard that refused, or -1 for the control database (a claim).
	Shard int
	// Served is what the shard serves, and Finished whether its migration is finished;
	// Wanted is the access's or the claim's.
	Served, Wanted Placement
	Finished       bool
	// Finishing says the shard's migration is being finished (SharedStore.Finishing): a
	// Leaving access of an owner the shard holds no fence for waits until it is finished
	// or not, as Do does.
	Finishing bool
	// Claim is true for a refused claim, false for a refused access.
	Claim bool
}

// Error says what the shard serves and what was asked of it.
func (e *PlacementError) Error() string {
	state := "unfinished"
	if e.Finished {
		state = "finished"
	}
	served := fmt.Sprintf("migration %q (%s; sharders %016x -> %016x)", e.Served.Migration, state, e.Served.Before, e.Served.After)
	where := fmt.Sprintf("shard %d", e.Shard)
	if e.Shard < 0 {
		where = "the control database"
	}
	wanted := fmt.Sprintf("migration %q (sharders %016x -> %016x)", e.Wanted.Migration, e.Wanted.Before, e.Wanted.After)
	switch {
	case e.Served.Migration == e.Wanted.Migration && e.Served.InProcess != e.Wanted.InProcess && !e.Finished:
		what := "access"
		if e.Claim {
			what = "claim"
		}
		return fmt.Sprintf("rebalance: %s serves %s, moved through %s; this %s is of %s: the application and the mover of one migration must use the same API, or a write one makes while the other moves the owner is lost",
			where, served, apiOf(e.Served.InProcess), what, apiOf(e.Wanted.InProcess))
	case e.Finishing:
		return fmt.Sprintf("rebalance: %s: migration %q is being finished, and the owner has no fence here: an owner that moves waits for the finish", where, e.Served.Migration)
	case e.Claim && e.Served.Migration == e.Wanted.Migration:
		return fmt.Sprintf("rebalance: %s serves %s: a mover of the same ID with other sharders cannot claim it as %s", where, served, wanted)
	case e.Claim && !e.Finished:
		return fmt.Sprintf("rebalance: %s serves %s: finish it before a mover claims %s", where, served, wanted)
	case e.Claim:
		return fmt.Sprintf("rebalance: %s serves %s, whose after sharder is not the before sharder of %s: the plan does not start where the data is", where, served, wanted)
	case e.Wanted.Arriving:
		return fmt.Sprintf("rebalance: %s serves %s, not an access routed by the after sharder of %s as finished: such an access is accepted only where the shard serves that migration finished; the process holds finished a migration the shards do not (a wrong placement record, or a finish not recorded here yet)", where, served, wanted)
	}
	return fmt.Sprintf("rebalance: %s serves %s, not an access routed by %s: the process routes by a placement out of date or wrong; reload it", where, served, wanted)
}

// apiOf names the API of a placement's kind (Placement.InProcess).
func apiOf(inProcess bool) string {
	if inProcess {
		return "the in-process API (rebalance.New), whose mover sets no fences"
	}
	return "the Shared API (rebalance.NewShared), whose mover fences each owner"
}

// Is makes errors.Is(err, ErrPlacement) true.
func (e *PlacementError) Is(target error) bool { return target == ErrPlacement }

// defaultMover names this process: host, pid and a random part, so that two movers of one
// process are told apart too.
func defaultMover() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/pid %d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// hold claims c through lock and renews the claim's lease every third of it. If a renewal is
// refused (a newer mover claimed) or the lease runs out unrenewed, it calls lost with that
// cause, which should cancel the mover's context: its later writes would be refused anyway,
// and this stops it before it tries. stop ends the renewals and releases the claim.
func hold(ctx context.Context, lock MoverLock, c Claim, lost func(error)) (token uint64, stop func(), err error) {
	token, err = lock.Claim(ctx, c)
	if err != nil {
		var fe *FenceError
		var me *MoverError
		var pe *PlacementError
		var oe *ProcessError
		if errors.As(err, &fe) || errors.As(err, &me) || errors.As(err, &pe) || errors.As(err, &oe) {
			return 0, nil, err // they say which migration, mover and tokens
		}
		return 0, nil, fmt.Errorf("rebalance: migration %q: claim for mover %s, election epoch %d: %w", c.Migration, c.Mover, c.Election, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var renewing sync.WaitGroup
	renewing.Go(func() {
		renewed := time.Now()
		t := time.NewTicker(c.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			began := time.Now()
			err := lock.Renew(rctx, c.Migration, token, c.Lease)
			var fe *FenceError
			switch {
			case err == nil:
				renewed = began
			case rctx.Err() != nil:
				return
			case errors.As(err, &fe):
				lost(fmt.Errorf("rebalance: migration %q: mover %s lost its claim (token %d): %w", c.Migration, c.Mover, token, err))
				return
			case time.Since(renewed) >= c.Lease:
				lost(fmt.Errorf("rebalance: migration %q: mover %s could not renew its lease for %v, so another mover may hold it now: stopped: %w", c.Migration, c.Mover, c.Lease, err))
				return
			}
		}
	})
	return token, func() {
		cancel()
		renewing.Wait()
		rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer stop()
		lock.Release(rctx, c.Migration, token) // if it fails, the lease runs out
	}, nil
}
