package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// checkProcs validates the -procs flags.
func (c config) checkProcs() error {
	switch {
	case c.procs < 0 || c.procs > 16:
		return fmt.Errorf("-procs %d: want [0, 16]", c.procs)
	case c.role != "" && c.role != "app" && c.role != "mover" && c.role != "rogue":
		return fmt.Errorf("-role %q: want app, mover or rogue", c.role)
	case c.rogueMover && (c.procs == 0 || c.role != ""):
		return fmt.Errorf("-rogue-mover goes with -procs")
	case c.role != "" && (c.etcd == "" || c.prefix == ""):
		return fmt.Errorf("-role %s needs -etcd and -prefix: the placement record of the -procs run", c.role)
	case c.role == "app" && c.ledger == "":
		return fmt.Errorf("-role app needs -ledger: the directory of the -procs run's ledgers")
	case c.writers > 16:
		return fmt.Errorf("-writers %d: want at most 16 (message IDs hold 16 writers per process)", c.writers)
	case c.killEvery <= 0 || c.idle < 0 || c.ttl < time.Second || c.moverPace < 0 || c.appPause < 0 || !(c.moverYield >= 0 && c.moverYield <= rebalance.MaxYield):
		return fmt.Errorf("-kill-every %v -idle %v -ttl %v -mover-pace %v -app-pause %v -mover-yield %v: want > 0, >= 0, >= 1s, >= 0, >= 0, [0, %d]", c.killEvery, c.idle, c.ttl, c.moverPace, c.appPause, c.moverYield, rebalance.MaxYield)
	case c.rows < 0 || c.rows > 0 && (c.rows/c.users < 1 || c.rows/c.users > 100_000):
		return fmt.Errorf("-rows %d -users %d: want rows / users in [1, 100000]", c.rows, c.users)
	}
	return nil
}

// endpoints are the -etcd endpoints, none if -etcd is empty.
func (c config) endpoints() []string {
	var out []string
	for _, e := range strings.Split(c.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// userLayout is the record of n shards by user_id % n. The record names coord's "modulo"
// strategy; this example routes it by the numeric user ID (Modulo.LocateID, userSharder),
// which every one of its processes does alike.
func userLayout(n int) coord.Layout { return coord.Layout{Strategy: "modulo", Shards: n} }

// layoutShards returns the shard count of a record's layout, refusing any layout this
// example did not write.
func layoutShards(l coord.Layout, c config) (int, error) {
	if l.Strategy != "modulo" || l.Pool != "" || l.Table != "" || (l.Shards != c.shards && l.Shards != c.grow) {
		return 0, fmt.Errorf("the placement record says %+v, not user_id %% %d or %d as this run's -shards and -grow: %w", l, c.shards, c.grow, errState)
	}
	return l.Shards, nil
}

// openDBs opens the -data or -pg databases of every shard of the run.
func openDBs(c config) (*dbs, error) {
	if c.pg == "" {
		return openSQLite(c.data, max(c.shards, c.grow))
	}
	d, err := openPostgres(c.dsns())
	if err != nil {
		return nil, err
	}
	// Keep connections for the goroutines that use a shard at once (database/sql keeps 2
	// and would open a connection for most transactions), but not 8 a shard in each of
	// five processes: PostgreSQL's default max_connections is 100.
	for _, db := range d.shards {
		db.SetMaxIdleConns(4)
	}
	return d, nil
}

// openStore opens the shared store over d and checks its tables.
func openStore(ctx context.Context, d *dbs) (*sqlstore.Store, error) {
	dialect := sqlstore.SQLite
	if d.kind == "postgres" {
		dialect = sqlstore.PostgreSQL
	}
	// On PostgreSQL the control tables live in shard 0's database, the one-process mode's
	// ledger among them (example_ledger, a row per user_id): it stays there, unmoved.
	s, err := sqlstore.New(dialect, d.shards, d.control, chatTables, sqlstore.Options{ShardNames: d.names, Unmoved: []string{"example_ledger"}})
	if err != nil {
		return nil, err
	}
	return s, s.Init(ctx)
}

// prepareProcs opens the databases for a -procs run and loads them. It accepts empty
// databases, or the databases of an earlier -procs run (its table example_procs says so),
// which it empties first: the -procs scenario always starts from a fresh load. The one-process
// mode's databases (example_state) and anyone else's data are refused untouched.
func prepareProcs(ctx context.Context, c config, out io.Writer) (*dbs, error) {
	d, err := openDBs(c)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	if s, err := readState(ctx, d); err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	} else if s != nil {
		return nil, fmt.Errorf("these databases hold the one-process mode's round %d: give -procs databases of its own: %w", s.Round, errState)
	}
	earlier, err := d.hasTable(ctx, d.control, "example_procs")
	if err != nil {
		return nil, err
	}
	if earlier { // the chat tables dropped, sqlstore's tables dropped: Init makes them anew
		// The claim goes too: it holds the earlier run's election epoch, and a new run's
		// embedded etcd counts its epochs from the start again, so its mover's claim would be
		// refused as stale. So does the placement the shards served.
		for i, db := range d.shards {
			if err := dropChat(ctx, d, db); err != nil {
				return nil, d.shard(i, err)
			}
		}
		for _, stmt := range []string{"DELETE FROM rebalance_marks", "DROP TABLE IF EXISTS rebalance_epoch", "DROP TABLE IF EXISTS rebalance_claim"} {
			if _, err := d.control.ExecContext(ctx, stmt); err != nil {
				return nil, err
			}
		}
	} else if err := checkFresh(ctx, d); err != nil {
		return nil, err
	}
	if err := d.createSchema(ctx, chatSchema); err != nil {
		return nil, err
	}
	if _, err := d.control.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS example_procs (users BIGINT NOT NULL, messages BIGINT NOT NULL)"); err != nil {
		return nil, err
	}
	if _, err := d.control.ExecContext(ctx, "DELETE FROM example_procs"); err != nil {
		return nil, err
	}
	if _, err := d.control.ExecContext(ctx, "INSERT INTO example_procs (users, messages) VALUES ($1, $2)", c.users, c.messages); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := loadProcs(ctx, c, d); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if _, err := openStore(ctx, d); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "loaded %d messages of %d users (and their %d reactions) on %d %s shards (user_id %% %d) in %v\n",
		c.users*c.messages, c.users, c.users*(c.messages/reactionEvery), c.shards, d.kind, c.shards, time.Since(start).Round(time.Millisecond))
	ok = true
	return d, nil
}

// dropChat empties a shard database of an earlier -procs run: the change capture of the
// chat tables (triggers, and on PostgreSQL their functions), the chat tables, children
// first, and sqlstore's tables. Init creates them anew.
func dropChat(ctx context.Context, d *dbs, db *sql.DB) error {
	var stmts []string
	for _, t := range chatTableNames {
		if d.kind == "postgres" {
			ok, err := d.hasTable(ctx, db, t)
			if err != nil {
				return err
			}
			if ok {
				stmts = append(stmts, fmt.Sprintf("DROP TRIGGER IF EXISTS rebalance_changes_%s ON %s", t, t))
			}
			continue
		}
		for _, op := range []string{"insert", "update", "delete"} {
			stmts = append(stmts, fmt.Sprintf("DROP TRIGGER IF EXISTS rebalance_changes_%s_%s", t, op))
		}
	}
	for _, t := range chatTableNames {
		stmts = append(stmts, "DROP TABLE IF EXISTS "+t, "DROP TABLE IF EXISTS rebalance_changes_"+t)
		if d.kind == "postgres" {
			stmts = append(stmts, fmt.Sprintf("DROP FUNCTION IF EXISTS rebalance_changes_%s_record()", t))
		}
	}
	stmts = append(stmts, "DROP TABLE IF EXISTS rebalance_fence", "DROP TABLE IF EXISTS rebalance_epoch", "DROP TABLE IF EXISTS rebalance_placement")
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// loadProcs writes the loaded users, their messages and the reactions to them, each shard in
// transactions of up to 100 users, parents first.
func loadProcs(ctx context.Context, c config, d *dbs) error {
	layout := newUserSharder(c.shards)
	for s := range c.shards {
		var users, msgs, reacts [][]any
		flush := func() error {
			tx, err := d.shards[s].BeginTx(ctx, nil)
			if err != nil {
				return d.shard(s, err)
			}
			defer tx.Rollback()
			for _, t := range []struct {
				i    int
				rows [][]any
			}{{0, users}, {1, msgs}, {2, reacts}} {
				if err := insertRows(ctx, tx, chatTables[t.i].Table, chatTables[t.i].Columns, t.rows); err != nil {
					return d.shard(s, err)
				}
			}
			users, msgs, reacts = users[:0], msgs[:0], reacts[:0]
			return d.shard(s, tx.Commit())
		}
		for user := int64(1); user <= int64(c.users); user++ {
			if layout.LocateID(uint64(user)) != s {
				continue
			}
			users = append(users, userRow(loadedUser(user)))
			for n := int64(1); n <= int64(c.messages); n++ {
				msgs = append(msgs, messageRow(loadedMessage(user, n, c.users)))
				if r, ok := loadedReaction(user, n, c.users); ok {
					reacts = append(reacts, reactionRow(r))
				}
			}
			if len(users) == 100 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if len(users) > 0 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// runRole runs a child process of -procs: an application process, the mover, or the rogue
// mover of -rogue-mover.
func runRole(ctx context.Context, c config, out io.Writer) error {
	d, err := openDBs(c)
	if err != nil {
		return err
	}
	defer d.close()
	store, err := openStore(ctx, d)
	if err != nil {
		return err
	}
	id := fmt.Sprintf("%s%d/pid %d", c.role, c.proc, os.Getpid())
	cl, err := coord.Open(ctx, c.endpoints(), c.prefix, c.access.options(coord.Options{TTL: c.ttl, Identity: id}))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := trustedRecord(ctx, cl, startTrustWait); err != nil {
		return err // no record, a newer format, an unreadable one: nothing is touched
	}
	if c.role == "mover" {
		if c.wait { // started by the parent: it stops when the parent's pipe closes
			stop := untilClosed(os.Stdin)
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-stop.Done():
					cancel()
				case <-ctx.Done():
				}
			}()
		}
		return runMover(ctx, c, cl, store, out)
	}
	if c.role == "rogue" {
		return runRogue(ctx, c, cl, store, out)
	}
	return runApp(c, cl, store, out)
}

// startTrustWait bounds how long a child process waits at its start for its etcd session to
// be trusted.
const startTrustWait = 30 * time.Second

// trustedRecord checks the placement record at a child's start. A session not trusted (no
// keepalive answered within the TTL: a process restarted on a loaded machine, with the
// other processes starting their stores and the parent's embedded etcd busy) is not the
// record's fault: the client makes a new session by itself, so it waits for one, up to
// wait. Any other error (no record, a newer format, an unreadable one) is returned at once.
func trustedRecord(ctx context.Context, cl *coord.Client, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		_, _, err := cl.Current()
		if err == nil || !errors.Is(err, coord.ErrLeaseExpired) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runApp is an application process: it works until its stdin ends. Its figures go to a file
// of its own (statsName) before it says it works, every statsInterval, and at its end.
func runApp(c config, cl *coord.Client, store *sqlstore.Store, out io.Writer) error {
	log, err := createAckLog(c.ledger, c.proc)
	if err != nil {
		return err
	}
	defer log.close()
	a := newAppWorkload(c.proc, c.users, c.messages, c.appPause,
		&placementRouter{c: c, client: cl, store: store, migrations: map[string]*rebalance.Shared[*sql.Tx]{}}, log)
	stats := statsName(c.ledger, c.proc, os.Getpid())
	// Written before "working": the parent kills only a process at work, so every
	// incarnation it counts has a file.
	if err := writeStats(stats, a.stats()); err != nil {
		return err
	}
	stop := untilClosed(os.Stdin)
	saved := make(chan error, 1)
	go func() {
		t := time.NewTicker(statsInterval)
		defer t.Stop()
		for {
			select {
			case <-stop.Done():
				saved <- nil
				return
			case <-t.C:
				if err := writeStats(stats, a.stats()); err != nil {
					saved <- err
					return
				}
			}
		}
	}()
	fmt.Fprintf(out, "working: %d writers, %d readers\n", c.writers, c.readers)
	a.run(stop, c.writers, c.readers)
	return errors.Join(<-saved, writeStats(stats, a.stats()))
}

// placementRouter routes by the placement record as this process's coord client last saw
// it: through the migration's Shared.Do while one is under way (its phase not done), by its
// after sharder once it is done, by the layout when there is none. Either way the shard's fence is read in the access's own
// transaction, so a stale view is refused by the shard (ErrFenced) and retried.
type placementRouter struct {
	c          config
	client     *coord.Client
	store      *sqlstore.Store
	mu         sync.Mutex
	migrations map[string]*rebalance.Shared[*sql.Tx]
}

func (r *placementRouter) do(ctx context.Context, owner string, fn func(tx *sql.Tx, shard int) error) (int, error) {
	p, _, err := r.client.Current()
	if err != nil { // the lease may have expired: no routing by a placement not trusted
		return classIdle, fmt.Errorf("%w: %w", errRetry, err)
	}
	retry := func(err error) error {
		if errors.Is(err, rebalance.ErrFenced) || errors.Is(err, rebalance.ErrPlacement) {
			return fmt.Errorf("%w: %w", errRetry, err)
		}
		return err
	}
	if m := p.Migration; m != nil && m.Phase != coord.PhaseDone {
		sh, before, after, err := r.shared(m)
		if err != nil {
			return classIdle, err
		}
		class := classStaying
		if before.Locate(owner) != after.Locate(owner) {
			class = classMoving
		}
		return class, retry(sh.Do(ctx, owner, fn))
	}
	// No migration: the layout routes, with no placement (none was ever claimed). A done
	// migration: its after sharder routes, the one its placement names (coord's Check holds
	// the record's layout to it; routing by the layout while labelling by the migration
	// would put a write where the placement the shards serve never reads it), and the
	// access says so (Arriving): only a shard that serves that migration, finished, accepts
	// it, so a record that says done of a migration no mover ran is refused, not followed.
	var served rebalance.Placement
	var by userSharder
	if m := p.Migration; m != nil {
		sh, _, after, err := r.shared(m)
		if err != nil {
			return classIdle, err
		}
		served, by = sh.Placement(), after
		served.Arriving = true
	} else {
		n, err := layoutShards(p.Layout, r.c)
		if err != nil {
			return classIdle, err
		}
		by = newUserSharder(n)
	}
	s := by.Locate(owner)
	return classIdle, retry(r.store.Access(ctx, served, owner, s, func(tx *sql.Tx) error { return fn(tx, s) }))
}

// shared returns the Shared migration of the record's migration m, made once per ID.
func (r *placementRouter) shared(m *coord.Migration) (*rebalance.Shared[*sql.Tx], userSharder, userSharder, error) {
	from, err := layoutShards(m.Before, r.c)
	if err != nil {
		return nil, userSharder{}, userSharder{}, err
	}
	to, err := layoutShards(m.After, r.c)
	if err != nil {
		return nil, userSharder{}, userSharder{}, err
	}
	before, after := newUserSharder(from), newUserSharder(to)
	r.mu.Lock()
	defer r.mu.Unlock()
	sh := r.migrations[m.ID]
	if sh == nil {
		if sh, err = rebalance.NewShared(m.ID, before, after, r.store, rebalance.SharedOptions{FenceWait: time.Second}); err != nil {
			return nil, before, after, err
		}
		r.migrations[m.ID] = sh
	}
	return sh, before, after, nil
}

// procsSteps are the migrations of the -procs scenario: grow, then shrink back.
func procsSteps(c config) [][2]int { return [][2]int{{c.shards, c.grow}, {c.grow, c.shards}} }

func stepID(i int, step [2]int) string {
	return fmt.Sprintf("procs-step%d-%d-to-%d", i+1, step[0], step[1])
}

// runMover is the mover process: it takes the election (waiting for it with -wait, else
// failing at once with coord's ErrBusy), then runs each step of the scenario that the
// record does not say is done: it records the migration (a compare-and-swap guarded by its
// leadership), moves with its epoch as the fencing token, and records the new layout.
func runMover(ctx context.Context, c config, cl *coord.Client, store *sqlstore.Store, out io.Writer) error {
	var mv *coord.Mover
	var err error
	if c.wait {
		mv, err = cl.Campaign(ctx)
	} else {
		mv, err = cl.TryMover(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "elected mover, epoch %d\n", mv.Epoch())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // a lost leadership stops the moves; the fences refuse them anyway
		select {
		case <-mv.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	steps := procsSteps(c)
	// An error after the leadership was lost (a lease not renewed in time on a loaded
	// machine: the context is cancelled, an Update refused) ends this mover with
	// errLostElection: the parent starts another, which campaigns and resumes.
	lost := func(err error) error {
		if lerr := mv.Err(); err != nil && lerr != nil {
			return fmt.Errorf("%w: %w (then: %v)", errLostElection, lerr, err)
		}
		return err
	}
	for {
		p, rev, err := cl.Current()
		if err != nil {
			return lost(err)
		}
		i, resume, err := nextStep(p, c)
		if err != nil {
			return err
		}
		if i == len(steps) {
			fmt.Fprintln(out, "all steps done")
			if c.wait {
				// Started by the parent: it holds the election until the parent closes its
				// stdin, so that the parent's second mover finds it held however fast the
				// steps went.
				<-ctx.Done()
			}
			return mv.Resign(context.Background())
		}
		step := steps[i]
		before, after := newUserSharder(step[0]), newUserSharder(step[1])
		id := stepID(i, step)
		if !resume {
			rows, users, err := plannedRows(ctx, store, before, after, c.users)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "step %d: plan %d rows of %d users, %d -> %d shards\n", i+1, rows, users, step[0], step[1])
		} else {
			fmt.Fprintf(out, "step %d: resuming migration %s\n", i+1, id)
		}
		next := p.Clone()
		next.Migration = &coord.Migration{ID: id, Before: userLayout(step[0]), After: userLayout(step[1]),
			Phase: coord.PhaseMoving, Epoch: mv.Epoch()}
		if rev, err = mv.Update(ctx, rev, next); err != nil {
			return lost(err)
		}
		if _, err := cl.Wait(ctx, rev); err != nil {
			return lost(err)
		}
		opts := moverOptions(c, mv.Epoch())
		if i == 0 && c.rogueGate != "" {
			opts.Progress = holdForRogue(ctx, c.rogueGate, mv.Epoch(), out, opts.Progress)
		}
		counted := &replayCounter{Store: store}
		m, err := rebalance.NewShared(id, before, after, counted, opts)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := moveWithRetries(ctx, m, c.users, out); err != nil {
			return lost(err)
		}
		done := next.Clone()
		done.Layout = userLayout(step[1])
		done.Migration.Phase = coord.PhaseDone
		if rev, err = mv.Update(ctx, rev, done); err != nil {
			return lost(err)
		}
		if _, err := cl.Wait(ctx, rev); err != nil {
			return lost(err)
		}
		st := m.Stats()
		fmt.Fprintf(out, "step %d done: this incarnation moved %d users, %d rows in %v, replayed %d changes captured during the copy; users served by no shard (%d windows): p50 %v, p99 %v, longest %v\n",
			i+1, st.Moved, st.Rows, time.Since(start).Round(time.Millisecond), counted.replayed.Load(), st.Windows,
			st.ExclusiveQuantile(0.5).Round(100*time.Microsecond), st.ExclusiveQuantile(0.99).Round(100*time.Microsecond), st.MaxExclusive.Round(100*time.Microsecond))
	}
}

// replayCounter is the mover's store, counting the changes its Replay applied: the
// foreground's writes that the capture recorded while their owner was copied.
type replayCounter struct {
	*sqlstore.Store
	replayed atomic.Int64
}

func (s *replayCounter) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	n, err := s.Store.Replay(ctx, migration, token, owners, from, to, limit)
	s.replayed.Add(int64(n))
	return n, err
}

// nextStep reads the record: the index of the step to run (len(steps) when all are done),
// and whether it is under way already. A record this scenario did not write is refused.
func nextStep(p coord.Placement, c config) (int, bool, error) {
	steps := procsSteps(c)
	m := p.Migration
	if m == nil {
		if l := p.Layout; l.Strategy != "modulo" || l.Shards != c.shards || l.Pool != "" || l.Table != "" || len(l.Nodes) > 0 {
			return 0, false, fmt.Errorf("the placement record says %+v with no migration, want user_id %% %d: not this run's record: %w", p.Layout, c.shards, errState)
		}
		return 0, false, nil
	}
	for i, step := range steps {
		if m.ID != stepID(i, step) {
			continue
		}
		if m.Phase == coord.PhaseDone {
			return i + 1, false, nil
		}
		return i, true, nil
	}
	return 0, false, fmt.Errorf("the placement record holds migration %q, which is none of this run's steps: not this run's record: %w", m.ID, errState)
}

// plannedRows counts the rows of the users whose shard changes from before to after.
func plannedRows(ctx context.Context, store *sqlstore.Store, before, after userSharder, users int) (rows int64, moving int, err error) {
	for o := range owners(users) {
		if before.Locate(o) == after.Locate(o) {
			continue
		}
		n, err := store.Count(ctx, o, before.Locate(o))
		if err != nil {
			return 0, 0, err
		}
		rows += n
		moving++
	}
	return rows, moving, nil
}

// errLostElection ends a mover that lost its leadership; it exits with exitLostElection.
var errLostElection = errors.New("lost the mover election")

// exitLostElection is the exit status of a mover that lost its leadership: its supervisor
// (the -procs parent) starts another.
const exitLostElection = 3

// moverRetries is how many times the mover runs a step again after an error that may pass
// (a database restarted, a connection cut): every step of a move is idempotent, so running
// again resumes. A refusal by a fence (a newer mover's epoch) or the loss of the election
// ends the mover at once.
const moverRetries = 5

func moveWithRetries(ctx context.Context, m *rebalance.Shared[*sql.Tx], users int, out io.Writer) error {
	for try := 0; ; try++ {
		err := m.Run(ctx, owners(users))
		if errors.Is(err, rebalance.ErrFinished) {
			// A mover before this one finished it and died before the record said so:
			// nothing is left to move; Finish again records it on every database.
			err = nil
		}
		if err == nil {
			err = m.Finish(ctx, owners(users))
		}
		if err == nil || try == moverRetries || ctx.Err() != nil || errors.Is(err, rebalance.ErrFenced) {
			return err
		}
		fmt.Fprintf(out, "run again in 1 s after: %v\n", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// pace is a Progress callback that sleeps d after each owner moved (Run's movers wait for
// it), or nil for no pause.
func pace(d time.Duration) func(rebalance.Progress) {
	if d <= 0 {
		return nil
	}
	return func(rebalance.Progress) { time.Sleep(d) }
}
