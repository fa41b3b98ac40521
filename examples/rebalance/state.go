package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shardkit/shard/rebalance"
)

// errState reports databases in a state this run must not touch.
var errState = errors.New("unexpected state")

// phase is one resize of the example's round: grow and shrink, each in both modes.
type phase struct {
	grow bool
	mode rebalance.Mode
}

var phases = []phase{{true, rebalance.Async}, {false, rebalance.Lazy}, {true, rebalance.Lazy}, {false, rebalance.Async}}

// state is the example's progress, one row in the control database. Phase -1 means the
// initial load has not finished; Started means the phase's migration may have set marks.
type state struct {
	Round, Phase        int
	Started             bool
	Shards, Grow, Users int
}

func (s state) counts(p int) (from, to int) {
	if phases[p].grow {
		return s.Shards, s.Grow
	}
	return s.Grow, s.Shards
}

// migrationID names the marks of phase p of round r; a resumed run derives the same one.
func (s state) migrationID(r, p int) string {
	from, to := s.counts(p)
	return fmt.Sprintf("round%d-phase%d-%v-%d-to-%d", r, p+1, phases[p].mode, from, to)
}

// previousID names the migration finished last, whose marks may be left if the process
// stopped between recording the finish and deleting them; "" if there is none.
func (s state) previousID() string {
	switch {
	case s.Phase > 0:
		return s.migrationID(s.Round, s.Phase-1)
	case s.Round > 1:
		return s.migrationID(s.Round-1, len(phases)-1)
	}
	return ""
}

// layout is the number of shards the data is on when no migration runs.
func (s state) layout() int {
	from, _ := s.counts(max(s.Phase, 0))
	return from
}

func readState(ctx context.Context, d *dbs) (*state, error) {
	ok, err := d.hasTable(ctx, d.control, "example_state")
	if err != nil || !ok {
		return nil, err
	}
	var s state
	var started int
	err = d.control.QueryRowContext(ctx,
		"SELECT round, phase, started, shards, grow, users FROM example_state WHERE id = 1").
		Scan(&s.Round, &s.Phase, &started, &s.Shards, &s.Grow, &s.Users)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	s.Started = started != 0
	return &s, err
}

func writeState(ctx context.Context, db execer, s state) error {
	started := 0
	if s.Started {
		started = 1
	}
	_, err := db.ExecContext(ctx,
		`INSERT INTO example_state (id, round, phase, started, shards, grow, users) VALUES (1, $1, $2, $3, $4, $5, $6)
		 ON CONFLICT (id) DO UPDATE SET round = excluded.round, phase = excluded.phase, started = excluded.started,
		 shards = excluded.shards, grow = excluded.grow, users = excluded.users`,
		s.Round, s.Phase, started, s.Shards, s.Grow, s.Users)
	return err
}

// checkFresh refuses databases that hold messages or marks but no state of this example:
// they are someone else's data.
func checkFresh(ctx context.Context, d *dbs) error {
	for i, db := range d.shards {
		if err := checkEmpty(ctx, d, db, "messages"); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return checkEmpty(ctx, d, d.control, "rebalance_marks")
}

func checkEmpty(ctx context.Context, d *dbs, db *sql.DB, table string) error {
	ok, err := d.hasTable(ctx, db, table)
	if err != nil || !ok {
		return err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("table %s has %d rows but this example has no state there: not its data, refusing to touch it: %w", table, n, errState)
	}
	return nil
}

// checkMarks accepts only marks of the migration under way and leftovers of the one
// finished before it, with values Copied or Done: any other mark means someone else is
// migrating, or the state was lost, and moving now could copy over their data.
func checkMarks(ctx context.Context, d *dbs, s *state) error {
	ok, err := d.hasTable(ctx, d.control, "rebalance_marks")
	if err != nil || !ok {
		return err
	}
	rows, err := d.control.QueryContext(ctx, "SELECT migration, mark, COUNT(*) FROM rebalance_marks GROUP BY migration, mark")
	if err != nil {
		return err
	}
	defer rows.Close()
	current, under := "", "no migration is under way"
	if s.Started {
		current = s.migrationID(s.Round, s.Phase)
		under = fmt.Sprintf("the migration under way is %q", current)
	}
	for rows.Next() {
		var (
			id      string
			mark, n int
		)
		if err := rows.Scan(&id, &mark, &n); err != nil {
			return err
		}
		if m := rebalance.Mark(mark); m != rebalance.Copied && m != rebalance.Done {
			return fmt.Errorf("rebalance_marks: %d marks of migration %q have value %d, want %d (copied) or %d (done): %w",
				n, id, mark, rebalance.Copied, rebalance.Done, errState)
		}
		if id != current && id != s.previousID() {
			return fmt.Errorf("rebalance_marks: %d marks of migration %q, but %s: %w", n, id, under, errState)
		}
	}
	return rows.Err()
}
