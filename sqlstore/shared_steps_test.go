package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// The Shared mover's steps, each interfered with: a store that wraps *sqlstore.Store runs an interfering
// action once, right before or right after one chosen call of the mover (Run or Finish),
// then lets the mover go on. Afterwards every acknowledged write (insert, update, delete,
// change of owner) must be found exactly once, with its last acknowledged content, on the
// shard that serves its owner (the after sharder's once Finish returned nil), and no
// acknowledged deletion may come back.
//
// On PostgreSQL the sweeps take about a quarter of an hour; they run there with
// SQLSTORE_LONG=1 (TestSharedPlantedBetweenCountAndFence always runs on both engines).

// spCall is one call of the mover through spStore.
type spCall struct {
	n        int
	kind     string
	owners   []string
	shard    int // the shard written or read (to, for a copy or a replay)
	from     int // a copy's or a replay's source, else -1
	state    rebalance.FenceState
	inWindow bool
}

func (c spCall) String() string {
	s := fmt.Sprintf("#%d %s shard %d", c.n, c.kind, c.shard)
	if c.from >= 0 {
		s = fmt.Sprintf("#%d %s %d->%d", c.n, c.kind, c.from, c.shard)
	}
	return s
}

// spStore counts the mover's calls and runs hook once, before (or after) call number at.
type spStore struct {
	*sqlstore.Store
	mu    sync.Mutex
	calls []spCall
	at    int
	after bool // the hook after the call, not before
	hook  func(c spCall)
}

func (s *spStore) around(c spCall, real func()) {
	s.mu.Lock()
	c.n = len(s.calls) + 1
	s.calls = append(s.calls, c)
	hit := s.hook != nil && c.n == s.at
	s.mu.Unlock()
	if hit && !s.after {
		s.hook(c)
	}
	real()
	if hit && s.after {
		s.hook(c)
	}
}

func (s *spStore) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) (err error) {
	s.around(spCall{kind: "fence " + state.String(), owners: owners, shard: shard, from: -1, state: state}, func() {
		err = s.Store.SetFence(ctx, migration, owners, shard, state, token)
	})
	return err
}

func (s *spStore) Counts(ctx context.Context, owners []string, shard int) (n []int64, err error) {
	s.around(spCall{kind: "counts", owners: owners, shard: shard, from: -1}, func() {
		n, err = s.Store.Counts(ctx, owners, shard)
	})
	return n, err
}

func (s *spStore) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) (next []rebalance.Cursor, rows int, done bool, err error) {
	s.around(spCall{kind: "copy chunk", owners: owners, shard: to, from: from}, func() {
		next, rows, done, err = s.Store.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
	})
	return next, rows, done, err
}

func (s *spStore) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (n int, err error) {
	s.around(spCall{kind: "replay", owners: owners, shard: to, from: from}, func() {
		n, err = s.Store.Replay(ctx, migration, token, owners, from, to, limit)
	})
	return n, err
}

func (s *spStore) ClearChanges(ctx context.Context, migration string, token uint64, owners []string, shard int) (err error) {
	s.around(spCall{kind: "clear changes", owners: owners, shard: shard, from: -1}, func() {
		err = s.Store.ClearChanges(ctx, migration, token, owners, shard)
	})
	return err
}

func (s *spStore) Sums(ctx context.Context, owners []string, shard int) (sums []rebalance.Sum, err error) {
	s.around(spCall{kind: "sums", owners: owners, shard: shard, from: -1}, func() {
		sums, err = s.Store.Sums(ctx, owners, shard)
	})
	return sums, err
}

func (s *spStore) KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []rebalance.Sum) (err error) {
	s.around(spCall{kind: "keep sums", owners: owners, shard: shard, from: -1}, func() {
		err = s.Store.KeepSums(ctx, migration, token, owners, shard, sums)
	})
	return err
}

func (s *spStore) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (n int, err error) {
	s.around(spCall{kind: "delete chunk", owners: owners, shard: shard, from: -1}, func() {
		n, err = s.Store.DeleteChunk(ctx, migration, token, owners, shard, limit)
	})
	return n, err
}

func (s *spStore) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (n int, whole bool, err error) {
	s.around(spCall{kind: "delete owners", owners: owners, shard: shard, from: -1}, func() {
		n, whole, err = s.Store.DeleteOwners(ctx, migration, token, owners, shard, most)
	})
	return n, whole, err
}

func (s *spStore) SetMarks(ctx context.Context, migration string, owners []string, m rebalance.Mark, token uint64) (err error) {
	s.around(spCall{kind: "marks", owners: owners, shard: -1, from: -1}, func() {
		err = s.Store.SetMarks(ctx, migration, owners, m, token)
	})
	return err
}

func (s *spStore) Finishing(ctx context.Context, p rebalance.Placement, finisher uint64, on bool) (err error) {
	s.around(spCall{kind: fmt.Sprintf("finishing %v", on), shard: -1, from: -1}, func() {
		err = s.Store.Finishing(ctx, p, finisher, on)
	})
	return err
}

func (s *spStore) Finished(ctx context.Context, p rebalance.Placement, finisher uint64) (err error) {
	s.around(spCall{kind: "finished", shard: -1, from: -1}, func() {
		err = s.Store.Finished(ctx, p, finisher)
	})
	return err
}

// spRow is the last acknowledged state of one row.
type spRow struct {
	owner   int64
	text    string
	deleted bool
}

// spWorld is a migration 2 -> 3 shards of a few moving and staying users, with a ledger
// of the content of every acknowledged row.
type spWorld struct {
	e             *engine
	before, after shard.Sharder
	admin         *proc
	moving        []string
	staying       map[int][]string // by shard
	mu            sync.Mutex
	rows          map[int64]*spRow
	maybe         map[int64]bool // written by a write whose outcome is unknown
	notes         []string
}

func newSpWorld(t *testing.T, e *engine, moving, stayingPerShard, rows int) *spWorld {
	// Modulo 2 -> 3: owners move among the old shards too, so a new shard may serve others.
	w := &spWorld{e: e, before: must(shard.NewModulo(2)), after: must(shard.NewModulo(3)), admin: e.open(t, 4),
		staying: map[int][]string{}, rows: map[int64]*spRow{}, maybe: map[int64]bool{}}
	toOld := 0 // moving owners whose new shard is an old one
	for u := 1; len(w.moving) < moving || toOld < 2 || len(w.staying[0]) < stayingPerShard || len(w.staying[1]) < stayingPerShard; u++ {
		s := strconv.Itoa(u)
		a, b := w.before.Locate(s), w.after.Locate(s)
		switch {
		case a != b && len(w.moving) < moving && (b != 2 || moving-len(w.moving) > max(2-toOld, 0)):
			w.moving = append(w.moving, s)
			if b != 2 {
				toOld++
			}
		case a == b && len(w.staying[a]) < stayingPerShard:
			w.staying[a] = append(w.staying[a], s)
		}
	}
	// Users who stay on shard 2 have no rows yet (shard 2 is new): they are only written.
	var all []string
	all = append(all, w.moving...)
	all = append(all, w.staying[0]...)
	all = append(all, w.staying[1]...)
	for _, u := range all {
		uid, _ := strconv.ParseInt(u, 10, 64)
		db := w.admin.dbs[w.before.Locate(u)]
		for range rows {
			id := nextID.Add(1)
			text := fmt.Sprintf("loaded %d", id)
			mustExec(t, db, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)", id, uid, id, text, int64(7))
			w.rows[id] = &spRow{owner: uid, text: text}
		}
	}
	return w
}

func (w *spWorld) shared(t *testing.T, store rebalance.SharedStore[*sql.Tx], id string, opts rebalance.SharedOptions) *rebalance.Shared[*sql.Tx] {
	t.Helper()
	m, err := rebalance.NewShared(id, w.before, w.after, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (w *spWorld) owners() []string {
	all := slices.Clone(w.moving)
	for s := range 3 {
		all = append(all, w.staying[s]...)
	}
	return all
}

// live returns up to n live rows of owner in the ledger, lowest ID first.
func (w *spWorld) live(owner string, n int) []int64 {
	uid, _ := strconv.ParseInt(owner, 10, 64)
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []int64
	for id, r := range w.rows {
		if r.owner == uid && !r.deleted && !w.maybe[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids[:min(n, len(ids))]
}

// spEdit is one write's effect on the ledger, applied when the write is acknowledged.
type spEdit struct {
	id      int64
	row     spRow
	deleted bool
}

func (w *spWorld) ack(edits []spEdit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range edits {
		r := e.row
		r.deleted = e.deleted
		w.rows[e.id] = &r
	}
}

func (w *spWorld) unknown(edits []spEdit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range edits {
		w.maybe[e.id] = true
	}
}

func (w *spWorld) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// changeSet writes, in tx, an update of one live row of owner, a deletion of another and an
// insertion, and returns the edits it makes. tag marks the texts.
func (w *spWorld) changeSet(ctx context.Context, tx interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, owner string, tag string) ([]spEdit, error) {
	uid, _ := strconv.ParseInt(owner, 10, 64)
	ids := w.live(owner, 2)
	var edits []spEdit
	if len(ids) > 0 {
		text := fmt.Sprintf("%s updated %d", tag, nextID.Add(1))
		res, err := tx.ExecContext(ctx, "UPDATE messages SET message = $1 WHERE id = $2 AND user_id = $3", text, ids[0], uid)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			edits = append(edits, spEdit{id: ids[0], row: spRow{owner: uid, text: text}})
		}
	}
	if len(ids) > 1 {
		res, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE id = $1 AND user_id = $2", ids[1], uid)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			edits = append(edits, spEdit{id: ids[1], deleted: true, row: spRow{owner: uid}})
		}
	}
	id := nextID.Add(1)
	text := fmt.Sprintf("%s inserted %d", tag, id)
	if _, err := tx.ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)", id, uid, id, text, int64(2)); err != nil {
		return nil, err
	}
	edits = append(edits, spEdit{id: id, row: spRow{owner: uid, text: text}})
	return edits, nil
}

// doChange runs changeSet for owner through m; fenced or placement refusals are not errors.
func (w *spWorld) doChange(ctx context.Context, m *rebalance.Shared[*sql.Tx], owner, tag string) error {
	var edits []spEdit
	err := m.Do(ctx, owner, func(tx *sql.Tx, _ int) error {
		var err error
		edits, err = w.changeSet(ctx, tx, owner, tag)
		return err
	})
	return w.settle(edits, err, tag+" of "+owner)
}

// settle acknowledges edits if err is nil; a refusal leaves them unacknowledged; any other
// error marks their rows unknown and is returned.
func (w *spWorld) settle(edits []spEdit, err error, what string) error {
	switch {
	case err == nil:
		w.ack(edits)
		w.note("%s: acknowledged", what)
		return nil
	case isFenced(err) || errors.Is(err, rebalance.ErrPlacement) || spGuardRefusal(err) || errors.Is(err, errSpNoRow):
		w.note("%s: refused (%v)", what, spLine(err))
		return nil
	}
	w.unknown(edits)
	return fmt.Errorf("%s: %w", what, err)
}

// errSpNoRow is a write that found no row to change where it ran (a shard that does not
// hold the row): nothing happened.
var errSpNoRow = errors.New("no such row here")

func spGuardRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not served here")
}

func spLine(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// direct runs changeSet for owner on shard s's database, around the library.
func (w *spWorld) direct(ctx context.Context, s int, owner, tag string) error {
	tx, err := w.admin.dbs[s].BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	edits, err := w.changeSet(ctx, tx, owner, tag)
	if err == nil {
		err = tx.Commit()
	}
	return w.settle(edits, err, fmt.Sprintf("%s of %s on shard %d", tag, owner, s))
}

// serving returns the shard that serves owner now, by the fences (-1 if none does); where
// both do (the new shard holds no fence before the move begins), the old one.
func (w *spWorld) serving(t *testing.T, owner string, finished bool) int {
	set := w.servingSet(t, owner, finished)
	if len(set) == 0 {
		return -1
	}
	return set[0]
}

// servingQuiet is serving for an interference: -1 in the window, where none serves.
func (w *spWorld) servingQuiet(owner string) int {
	a, b := w.before.Locate(owner), w.after.Locate(owner)
	ctx := context.Background()
	fa := must(w.admin.store.Fences(ctx, []string{owner}, a))[0]
	fb := must(w.admin.store.Fences(ctx, []string{owner}, b))[0]
	switch {
	case fa.State == rebalance.Serving || fa.State == rebalance.Exporting:
		return a
	case fb.State == rebalance.Serving:
		return b
	}
	return -1
}

// servingSet returns the shards whose fences serve owner now: its old shard if fenced
// serving or exporting there, its new one if it holds no fence there.
func (w *spWorld) servingSet(t *testing.T, owner string, finished bool) []int {
	a, b := w.before.Locate(owner), w.after.Locate(owner)
	if finished || a == b {
		return []int{b}
	}
	ctx := context.Background()
	fa := must(w.admin.store.Fences(ctx, []string{owner}, a))[0]
	fb := must(w.admin.store.Fences(ctx, []string{owner}, b))[0]
	var set []int
	if fa.State == rebalance.Serving || fa.State == rebalance.Exporting {
		set = append(set, a)
	}
	if fb.State == rebalance.Serving {
		set = append(set, b)
	}
	if len(set) == 0 {
		t.Errorf("owner %s: no shard serves it (%v on %d, %v on %d)", owner, fa, a, fb, b)
	}
	return set
}

// check compares the ledger with the shards: each acknowledged live row once, with its
// content, on the shard that serves its owner; no acknowledged deletion back there.
func (w *spWorld) check(t *testing.T, finished bool) (problems []string) {
	t.Helper()
	type found struct {
		owner int64
		text  string
		shard int
	}
	at := map[int64][]found{}
	for s, db := range w.admin.dbs {
		rows, err := db.Query("SELECT id, user_id, message FROM messages")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var f found
			var id int64
			if err := rows.Scan(&id, &f.owner, &f.text); err != nil {
				t.Fatal(err)
			}
			f.shard = s
			at[id] = append(at[id], f)
		}
		rows.Close()
	}
	servedBy := map[int64][]int{}
	serves := func(owner int64) []int {
		if s, ok := servedBy[owner]; ok {
			return s
		}
		s := w.servingSet(t, strconv.FormatInt(owner, 10), finished)
		servedBy[owner] = s
		return s
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.rows))
	for id := range w.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := w.rows[id]
		if w.maybe[id] {
			continue
		}
		s := serves(r.owner)
		var there []found
		for _, f := range at[id] {
			if slices.Contains(s, f.shard) {
				there = append(there, f)
			}
		}
		switch {
		case r.deleted && len(there) > 0:
			problems = append(problems, fmt.Sprintf("row %d of %d: deleted (acknowledged), back on shard %d: %q", id, r.owner, there[0].shard, there[0].text))
		case r.deleted:
		case len(there) == 0:
			problems = append(problems, fmt.Sprintf("row %d of %d (%q): lost: not on shards %v, which serve its owner (found: %v)", id, r.owner, r.text, s, at[id]))
		case len(there) > 1:
			problems = append(problems, fmt.Sprintf("row %d of %d: %d times on shards %v", id, r.owner, len(there), s))
		case there[0].owner != r.owner || there[0].text != r.text:
			problems = append(problems, fmt.Sprintf("row %d: on shard %d as (%d, %q), acknowledged as (%d, %q)", id, there[0].shard, there[0].owner, there[0].text, r.owner, r.text))
		}
	}
	return problems
}

// spOpts are the mover's options of the sweeps: chunks of 4 rows, groups of 2, one mover.
func spOpts(deleteRows int) rebalance.SharedOptions {
	return rebalance.SharedOptions{ChunkRows: 4, Group: 2, DeleteRows: deleteRows, FenceWait: 20 * time.Millisecond, Lease: 5 * time.Second}
}

// spAction is one interference: act runs at the chosen call.
type spAction struct {
	name string
	act  func(t *testing.T, w *spWorld, c spCall, bg *sync.WaitGroup)
}

// target is the moving owner the call is about, or the first moving one.
func (w *spWorld) target(c spCall) string {
	for _, o := range c.owners {
		if slices.Contains(w.moving, o) {
			return o
		}
	}
	return w.moving[0]
}

func (w *spWorld) app(t *testing.T, fenceWait time.Duration) *rebalance.Shared[*sql.Tx] {
	p := w.e.open(t, 2)
	return w.shared(t, rebalance.SharedStore[*sql.Tx](p.store), "grow", rebalance.SharedOptions{FenceWait: fenceWait})
}

func spActions() []spAction {
	ctx := context.Background()
	report := func(t *testing.T, err error) {
		if err != nil {
			t.Errorf("interference: %v", err)
		}
	}
	return []spAction{
		{"app", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			report(t, w.doChange(ctx, w.app(t, 20*time.Millisecond), w.target(c), "app"))
		}},
		{"app-spanning", func(t *testing.T, w *spWorld, c spCall, bg *sync.WaitGroup) {
			m, o := w.app(t, 30*time.Second), w.target(c)
			bg.Go(func() { report(t, w.doChange(ctx, m, o, "spanning")) })
			time.Sleep(2 * time.Millisecond)
		}},
		{"direct-old", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			o := w.target(c)
			report(t, w.direct(ctx, w.before.Locate(o), o, "direct-old"))
		}},
		{"direct-new", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			o := w.target(c)
			report(t, w.direct(ctx, w.after.Locate(o), o, "direct-new"))
		}},
		{"give-away", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			// The moving owner gives a row to an owner who stays on its old shard.
			o := w.target(c)
			s := w.servingQuiet(o)
			if s < 0 || len(w.staying[s]) == 0 {
				return
			}
			to := w.staying[s][0]
			w.giveRow(t, w.app(t, 20*time.Millisecond), o, o, to, "give-away")
		}},
		{"take-over", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			// An owner who stays on the moving owner's old shard gives it one of its rows.
			o := w.target(c)
			s := w.servingQuiet(o)
			if s < 0 || len(w.staying[s]) == 0 {
				return
			}
			from := w.staying[s][0]
			w.giveRow(t, w.app(t, 20*time.Millisecond), from, from, o, "take-over")
		}},
		{"planted-on-new", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			// An owner who stays on the moving owner's new shard writes, through its own
			// access there, a row of the moving owner (the after sharder's shard for it).
			o := w.target(c)
			if len(w.staying[w.after.Locate(o)]) == 0 {
				for _, m := range w.moving {
					if len(w.staying[w.after.Locate(m)]) > 0 {
						o = m
						break
					}
				}
			}
			via := w.staying[w.after.Locate(o)][0]
			w.plantRow(t, w.app(t, 20*time.Millisecond), via, o, "planted-on-new")
		}},
		{"stale-sharders", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			p := w.e.open(t, 2)
			m, err := rebalance.NewShared("grow", w.before, must(shard.NewRendezvous(3)), rebalance.SharedStore[*sql.Tx](p.store), rebalance.SharedOptions{FenceWait: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			report(t, w.doChange(ctx, m, w.target(c), "stale-sharders"))
		}},
		{"other-migration", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			p := w.e.open(t, 2)
			m := w.shared(t, rebalance.SharedStore[*sql.Tx](p.store), "grow-b", rebalance.SharedOptions{FenceWait: 20 * time.Millisecond})
			report(t, w.doChange(ctx, m, w.target(c), "other-migration"))
		}},
		{"second-mover", func(t *testing.T, w *spWorld, c spCall, _ *sync.WaitGroup) {
			p := w.e.open(t, 2)
			opts := spOpts(0)
			opts.Mover = "b"
			m := w.shared(t, rebalance.SharedStore[*sql.Tx](p.store), "grow", opts)
			err := m.Run(ctx, slices.Values(w.owners()))
			w.note("second mover: %v", err)
			if err != nil && !errors.Is(err, rebalance.ErrMoverRunning) && !errors.Is(err, rebalance.ErrFinished) {
				t.Errorf("second mover: %v", err)
			}
		}},
	}
}

// giveRow moves one live row of owner from to owner to, through owner via's access.
func (w *spWorld) giveRow(t *testing.T, m *rebalance.Shared[*sql.Tx], via, from, to, tag string) {
	ctx := context.Background()
	ids := w.live(from, 1)
	if len(ids) == 0 {
		return
	}
	fu, _ := strconv.ParseInt(from, 10, 64)
	tu, _ := strconv.ParseInt(to, 10, 64)
	text := fmt.Sprintf("%s %d", tag, nextID.Add(1))
	e := []spEdit{{id: ids[0], row: spRow{owner: tu, text: text}}}
	err := m.Do(ctx, via, func(tx *sql.Tx, _ int) error {
		res, err := tx.ExecContext(ctx, "UPDATE messages SET user_id = $1, message = $2 WHERE id = $3 AND user_id = $4", tu, text, ids[0], fu)
		if err == nil {
			if n, _ := res.RowsAffected(); n != 1 {
				err = fmt.Errorf("%d rows: %w", n, errSpNoRow)
			}
		}
		return err
	})
	if err := w.settle(e, err, fmt.Sprintf("%s: row %d of %s given to %s via %s", tag, ids[0], from, to, via)); err != nil {
		t.Errorf("interference: %v", err)
	}
}

// plantRow inserts a row of owner through owner via's access.
func (w *spWorld) plantRow(t *testing.T, m *rebalance.Shared[*sql.Tx], via, owner, tag string) {
	ctx := context.Background()
	uid, _ := strconv.ParseInt(owner, 10, 64)
	id := nextID.Add(1)
	text := fmt.Sprintf("%s %d", tag, id)
	e := []spEdit{{id: id, row: spRow{owner: uid, text: text}}}
	err := m.Do(ctx, via, func(tx *sql.Tx, _ int) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)", id, uid, id, text, int64(3))
		return err
	})
	if err := w.settle(e, err, fmt.Sprintf("%s: row %d of %s via %s", tag, id, owner, via)); err != nil {
		t.Errorf("interference: %v", err)
	}
}

// spOutcome is what one run found.
type spOutcome struct {
	runErrs   []string
	finishErr error
	finished  bool
	problems  []string
}

// spOnce runs the migration on a fresh world, act at call at (before or after it), then
// plain Runs until one returns nil (at most 3), then Finish; and checks the ledger.
func spOnce(t *testing.T, e *engine, deleteRows, at int, after bool, act spAction) (spOutcome, []spCall, *spWorld) {
	ctx := context.Background()
	w := newSpWorld(t, e, 4, 1, 6)
	var bg sync.WaitGroup
	st := &spStore{Store: e.open(t, 2).store, at: at, after: after}
	st.hook = func(c spCall) { act.act(t, w, c, &bg) }
	if act.act == nil {
		st.hook = nil
	}
	m := w.shared(t, rebalance.SharedStore[*sql.Tx](st), "grow", spOpts(deleteRows))
	var out spOutcome
	err := m.Run(ctx, slices.Values(w.owners()))
	if err == nil {
		err = m.Finish(ctx, slices.Values(w.owners()))
		out.finishErr, out.finished = err, err == nil
	}
	if err != nil {
		out.runErrs = append(out.runErrs, spLine(err))
	}
	bg.Wait()
	for try := 0; !out.finished && try < 3; try++ {
		p := e.open(t, 2)
		plain := w.shared(t, rebalance.SharedStore[*sql.Tx](p.store), "grow", spOpts(deleteRows))
		err := plain.Run(ctx, slices.Values(w.owners()))
		if err == nil {
			err = plain.Finish(ctx, slices.Values(w.owners()))
			out.finishErr, out.finished = err, err == nil
		}
		if err != nil {
			out.runErrs = append(out.runErrs, spLine(err))
		}
	}
	out.problems = w.check(t, out.finished)
	return out, st.calls, w
}

// spSteps runs every action at every call (before and after it) that dry runs list, on e.
// calls limits the calls tried (all if 0).
func spSteps(t *testing.T, e *engine, deleteRows int, actions []spAction, pick func([]spCall) []int) {
	if e.dialect == sqlstore.PostgreSQL && os.Getenv("SQLSTORE_LONG") != "1" {
		t.Skip("the sweeps on PostgreSQL take about a quarter of an hour: SQLSTORE_LONG=1 runs them")
	}
	var calls []spCall
	// Each run in a subtest of its own: its processes' pools close when it ends.
	t.Run(fmt.Sprintf("dry-%d", deleteRows), func(t *testing.T) {
		_, calls, _ = spOnce(t, e.fresh(t), deleteRows, 0, false, spAction{name: "none"})
	})
	var kinds []string
	for _, c := range calls {
		kinds = append(kinds, c.String())
	}
	t.Logf("dry run: %d calls: %s", len(calls), strings.Join(kinds, ", "))
	positions := pick(calls)
	failures := 0
	for _, act := range actions {
		for _, n := range positions {
			for _, after := range []bool{false, true} {
				where := "before"
				if after {
					where = "after"
				}
				t.Run(fmt.Sprintf("%s-%s-%d-%d", act.name, where, n, deleteRows), func(t *testing.T) {
					began := time.Now()
					out, calls2, w := spOnce(t, e.fresh(t), deleteRows, n, after, act)
					if os.Getenv("SP_PROGRESS") != "" {
						fmt.Fprintf(os.Stderr, "%s: %v runs=%q problems=%d notes=%q\n", t.Name(), time.Since(began).Round(time.Millisecond), out.runErrs, len(out.problems), w.notes)
					}
					at := "?"
					if n <= len(calls2) {
						at = calls2[n-1].String()
					}
					label := fmt.Sprintf("%s %s %s", act.name, where, at)
					if len(out.problems) > 0 {
						failures++
						t.Errorf("%s: %d problems (runs: %q; finished %v): %s\n\tnotes: %s", label, len(out.problems), out.runErrs, out.finished,
							strings.Join(out.problems[:min(4, len(out.problems))], "; "), strings.Join(w.notes, "; "))
						return
					}
					if !out.finished {
						t.Logf("NOT FINISHED %s: runs %q; notes %s", label, out.runErrs, strings.Join(w.notes, "; "))
					} else if len(out.runErrs) > 0 {
						t.Logf("%s: finished after %q", label, out.runErrs)
					}
				})
				if failures > 6 {
					t.FailNow()
				}
			}
		}
	}
}

// spFirstOfEachKind picks the first call of each run of calls of one kind (and shard).
func spFirstOfEachKind(calls []spCall) []int {
	var out []int
	for i, c := range calls {
		if i == 0 || c.kind != calls[i-1].kind || c.shard != calls[i-1].shard {
			out = append(out, c.n)
		}
	}
	return out
}

func spEveryCall(calls []spCall) []int {
	out := make([]int, len(calls))
	for i := range calls {
		out[i] = i + 1
	}
	return out
}

func spActionsNamed(names ...string) []spAction {
	var out []spAction
	for _, a := range spActions() {
		if slices.Contains(names, a.name) {
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return slices.Index(names, out[i].name) < slices.Index(names, out[j].name) })
	return out
}

// TestSharedStepsAppWrites: the application, through another process's Shared, changes a
// moving owner's rows (update, delete, insert) before and after each of the mover's calls,
// waiting briefly or across the window.
func TestSharedStepsAppWrites(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		pick := spEveryCall
		if e.dialect == sqlstore.PostgreSQL {
			pick = spFirstOfEachKind
		}
		spSteps(t, e, 0, spActionsNamed("app", "app-spanning"), pick)
		spSteps(t, e, 1000, spActionsNamed("app", "direct-old"), spFirstOfEachKind)
	})
}

// TestSharedStepsDirectWrites: the same changes written on the old or the new shard's
// database directly, around the library.
func TestSharedStepsDirectWrites(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		pick := spEveryCall
		if e.dialect == sqlstore.PostgreSQL {
			pick = spFirstOfEachKind
		}
		spSteps(t, e, 0, spActionsNamed("direct-old", "direct-new"), pick)
	})
}

// TestSharedStepsOwnerChanges: rows change owner between a moving owner and one that stays.
func TestSharedStepsOwnerChanges(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		spSteps(t, e, 0, spActionsNamed("give-away", "take-over"), spFirstOfEachKind)
	})
}

// TestSharedStepsStaleProcesses: processes routing by stale sharders or another migration
// ID, and a second mover, between the steps.
func TestSharedStepsStaleProcesses(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		spSteps(t, e, 0, spActionsNamed("stale-sharders", "other-migration", "second-mover"), spFirstOfEachKind)
	})
}

// TestSharedStepsPlantedOnNewShard: an owner who stays on the moving owner's new shard
// writes, in its own access there, a row of the moving owner.
func TestSharedStepsPlantedOnNewShard(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		spSteps(t, e, 0, spActionsNamed("planted-on-new"), spFirstOfEachKind)
	})
}

// TestSharedPlantedBetweenCountAndFence: a row of a moving owner X lands on X's new shard B
// between the mover's count of X's rows there (which refuses the move with ErrConfig where
// B holds some: "shard B holds rows of the owner and serves it") and its fence of X
// importing there, written through the access of an owner who stays on B (the guard lets it
// through: B holds no fence of X yet). The first Run stopped at the comparison
// (ErrCopyMismatch), and the next took the row for a stopped copy of its own (B fenced
// importing by this migration), deleted it and copied X anew: Run and Finish returned nil
// without the acknowledged row. Now the first Run counts again under the fence, fences B
// serving X again and stops with ErrStrayRows; the next refuses X (ErrConfig), and the row
// stays.
func TestSharedPlantedBetweenCountAndFence(t *testing.T) {
	for _, dies := range []bool{false, true} {
		t.Run(map[bool]string{false: "goes on", true: "dies at the fence"}[dies], func(t *testing.T) {
			forEngines(t, 3, func(t *testing.T, e *engine) { plantedBetweenCountAndFence(t, e, dies) })
		})
	}
}

// plantedBetweenCountAndFence is TestSharedPlantedBetweenCountAndFence; if dies, the mover
// dies right after its fence importing landed, before it counts again: the next mover finds
// the owner fenced importing by the migration on its new shard, and the row there.
func plantedBetweenCountAndFence(t *testing.T, e *engine, dies bool) {
	ctx := context.Background()
	w := newSpWorld(t, e, 4, 1, 6)
	var x string
	for _, o := range w.moving {
		if len(w.staying[w.after.Locate(o)]) > 0 {
			x = o
			break
		}
	}
	b := w.after.Locate(x)
	z := w.staying[b][0]
	st := &spStore{Store: e.open(t, 2).store, at: -1}
	planted := false
	hooked := &spFenceHook{spStore: st, before: func(owners []string, shard int, state rebalance.FenceState) {
		if !planted && state == rebalance.Importing && shard == b && slices.Contains(owners, x) {
			w.plantRow(t, w.app(t, 20*time.Millisecond), z, x, "planted")
			planted = true
		}
	}}
	if dies {
		hooked.after = func(owners []string, shard int, state rebalance.FenceState) error {
			if state == rebalance.Importing && shard == b && slices.Contains(owners, x) {
				return errDied
			}
			return nil
		}
	}
	var runs []error
	run := func(st rebalance.SharedStore[*sql.Tx]) error {
		err := w.shared(t, st, "grow", spOpts(0)).Run(ctx, slices.Values(w.owners()))
		runs = append(runs, err)
		return err
	}
	first := run(hooked)
	if !planted {
		t.Fatal("no row planted")
	}
	if dies && !errors.Is(first, errDied) {
		t.Fatalf("the Run that dies at the fence: %v", first)
	}
	if dies {
		first = run(e.open(t, 2).store) // the next mover
	}
	if !errors.Is(first, rebalance.ErrStrayRows) {
		t.Errorf("Run, a row planted before the fence: %v, want ErrStrayRows", first)
	}
	var finished error
	next := run(e.open(t, 2).store)
	if next == nil {
		finished = w.shared(t, e.open(t, 2).store, "grow", spOpts(0)).Finish(ctx, slices.Values(w.owners()))
	}
	if !errors.Is(next, rebalance.ErrConfig) {
		t.Errorf("the Run after: %v, want ErrConfig (the new shard holds rows of the owner and serves it)", next)
	}
	if problems := w.check(t, next == nil && finished == nil); len(problems) > 0 {
		t.Errorf("Runs %v, Finish %v; %d problems: %s\n\tnotes: %s", runs, finished, len(problems), strings.Join(problems, "; "), strings.Join(w.notes, "; "))
	}
}

// spFenceHook calls before ahead of every SetFence, and after (if set) once it returned nil,
// returning after's error instead.
type spFenceHook struct {
	*spStore
	before func(owners []string, shard int, state rebalance.FenceState)
	after  func(owners []string, shard int, state rebalance.FenceState) error
}

func (h *spFenceHook) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	h.before(owners, shard, state)
	err := h.spStore.SetFence(ctx, migration, owners, shard, state, token)
	if err == nil && h.after != nil {
		err = h.after(owners, shard, state)
	}
	return err
}
