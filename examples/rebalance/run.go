package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// run opens the databases, checks that they are empty or in a state this example left, loads
// them if needed, records the writes a kill left unrecorded, and runs the phases left in the
// current round.
func run(ctx context.Context, c config, out io.Writer) error {
	var (
		d   *dbs
		err error
	)
	if c.pg != "" {
		d, err = openPostgres(c.dsns())
	} else {
		d, err = openSQLite(c.data, max(c.shards, c.grow))
	}
	if err != nil {
		return err
	}
	defer d.close()

	// Everything up to createSchema only reads: bad state leaves the databases untouched.
	s, err := readState(ctx, d)
	if err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	if s == nil {
		err = checkFresh(ctx, d)
	} else if s.Shards != c.shards || s.Grow != c.grow || s.Users != c.users {
		err = fmt.Errorf("the databases were loaded with -shards %d -grow %d -users %d, not %d, %d, %d: rerun with those, or use empty databases: %w",
			s.Shards, s.Grow, s.Users, c.shards, c.grow, c.users, errState)
	} else if err = checkMarks(ctx, d, s); err == nil {
		err = d.checkShards(ctx)
	}
	if err != nil {
		return err
	}
	if err := d.createSchema(ctx, shardSchema); err != nil {
		return err
	}
	if s == nil || s.Phase < 0 {
		if s, err = load(ctx, c, d, out); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	l, err := loadLedger(ctx, d.control)
	if err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	if len(l.users) != c.users {
		return fmt.Errorf("the ledger has %d users, the state says %d: %w", len(l.users), c.users, errState)
	}
	if n, err := l.adoptUnrecorded(ctx, d); err != nil {
		return fmt.Errorf("ledger: %w", err)
	} else if n > 0 {
		fmt.Fprintf(out, "ledger: recorded %d messages written on their shard but not in the ledger when the last run was killed\n", n)
	}
	if id := s.previousID(); id != "" {
		if _, err := d.control.ExecContext(ctx, "DELETE FROM rebalance_marks WHERE migration = $1", id); err != nil {
			return err
		}
	}

	var crash *crasher
	if c.crashAfter > 0 {
		crash = &crasher{after: c.crashAfter, point: c.crashPoint}
	}
	for round := s.Round; s.Round == round; {
		if err := runPhase(ctx, c, d, l, s, crash, out); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nround %d done: the data is on %d shards again; run again for another round\n", s.Round-1, s.Shards)
	return nil
}

// owners yields the user IDs 1..n as owners of package rebalance.
func owners(n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for id := 1; id <= n; id++ {
			if !yield(strconv.Itoa(id)) {
				return
			}
		}
	}
}

// load puts c.messages messages of each user on its shard of the first layout, and their
// counts and checksums in the ledger. A load cut short is redone from scratch: phase -1 says
// the databases hold nothing but this example's partial load.
func load(ctx context.Context, c config, d *dbs, out io.Writer) (*state, error) {
	s := &state{Round: 1, Phase: -1, Shards: c.shards, Grow: c.grow, Users: c.users}
	if err := writeState(ctx, d.control, *s); err != nil {
		return nil, err
	}
	for i, db := range d.shards {
		if _, err := db.ExecContext(ctx, "DELETE FROM messages"); err != nil {
			return nil, d.shard(i, err)
		}
	}
	for _, table := range []string{"example_ledger", "rebalance_marks"} {
		if _, err := d.control.ExecContext(ctx, "DELETE FROM "+table); err != nil {
			return nil, err
		}
	}
	layout := newUserSharder(c.shards)
	bar := newProgress(c.progress, "loading", "users")
	for user := int64(1); user <= int64(c.users); user++ {
		bar.show(int(user-1), c.users)
		msgs := make([]message, c.messages)
		a := &account{}
		for i := range msgs {
			msgs[i] = loadedMessage(user, int64(i+1), c.users)
		}
		shard := layout.Locate(strconv.FormatInt(user, 10))
		if err := insertMessages(ctx, d.shards[shard], msgs); err != nil {
			return nil, d.shard(shard, err)
		}
		if err := (&ledger{}).record(ctx, d.control, user, a, msgs...); err != nil {
			return nil, err
		}
	}
	bar.end(c.users, c.users)
	s.Phase = 0
	if err := writeState(ctx, d.control, *s); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "loaded %d messages of %d users on %d shards (shard = user_id %% %d)\n", c.users*c.messages, c.users, c.shards, c.shards)
	return s, nil
}

// runPhase runs (or resumes) the phase s.Phase with the workload running, finishes it,
// verifies, and only then records it done in the state and drops its marks: a phase whose
// verification fails stays under way, its marks kept, for an operator to look at.
func runPhase(ctx context.Context, c config, d *dbs, l *ledger, s *state, crash *crasher, out io.Writer) error {
	p := s.Phase
	from, to := s.counts(p)
	before, after := newUserSharder(from), newUserSharder(to)
	id := s.migrationID(s.Round, p)
	mode := phases[p].mode
	resumed := ""
	if s.Started {
		resumed = ", resuming after a stop"
	}
	fmt.Fprintf(out, "\n== %s: %d -> %d shards, %v mode%s\n", id, from, to, mode, resumed)
	printPlan(out, rebalance.PlanKeys(before, after, owners(c.users)))
	capacity, err := printCapacity(ctx, out, d, before, after, phases[p].grow && !s.Started) // capacity.go
	if err != nil {
		return err
	}

	if !s.Started { // from here on the migration's marks may exist
		s.Started = true
		if err := writeState(ctx, d.control, *s); err != nil {
			return err
		}
	}
	moving := &store{db: d, crash: crash}
	m, err := rebalance.New(id, before, after, moving,
		rebalance.Options{Mode: mode, Concurrency: c.movers, Progress: newProgress(c.progress, "moving", "users").moved()})
	if err != nil {
		return err
	}
	w := startWorkload(ctx, c, d, l, m, crash)
	if mode == rebalance.Lazy {
		time.Sleep(c.work) // users move as the workload asks for them
	}
	start := time.Now()
	runErr := m.Run(ctx, owners(c.users))
	took := time.Since(start)
	if err := errors.Join(runErr, w.stop()); err != nil {
		return err
	}
	if err := m.Finish(ctx, owners(c.users)); err != nil {
		return err
	}
	st := m.Stats()
	fmt.Fprintf(out, "moved by this run: %d users by the mover, %d on first access\n", st.ByRun, st.Lazily)
	capacity.printRate(out, mode, moving.copied.Load(), took)
	fmt.Fprintf(out, "meanwhile: %d messages written, %d reads, %d reads saw fewer messages than acknowledged\n",
		w.writes.Load(), w.reads.Load(), w.anomalies.Load())
	v, err := verify(ctx, d, after, l, newProgress(c.progress, "verifying", "messages"))
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	v.print(out, c.users)
	if !v.ok() {
		return errVerify
	}

	// Record the finish first, then drop the marks: a crash in between leaves marks that the
	// next run recognizes as the previous migration's, never an unmarked user whose data
	// has already moved.
	next := *s
	next.Started = false
	if next.Phase++; next.Phase == len(phases) {
		next.Phase, next.Round = 0, next.Round+1
	}
	if err := writeState(ctx, d.control, next); err != nil {
		return err
	}
	*s = next
	if _, err := d.control.ExecContext(ctx, "DELETE FROM rebalance_marks WHERE migration = $1", id); err != nil {
		return err
	}
	if w.anomalies.Load() > 0 {
		return errAnomaly
	}
	return nil
}

// printPlan prints how many users move, and between which shards.
func printPlan(out io.Writer, p *rebalance.Plan) {
	fmt.Fprintf(out, "plan: %d of %d users change shard (%.1f%%):", p.Moved(), p.Total, 100*p.Fraction())
	for _, f := range p.Flows {
		if f.From != f.To {
			fmt.Fprintf(out, " %d->%d:%d", f.From, f.To, f.Count)
		}
	}
	fmt.Fprintln(out)
}
