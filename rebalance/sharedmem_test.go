package rebalance

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MemShared is a SharedStore over Go maps, for the tests and examples of this package: each
// shard a map of owners to their rows by key, a fence map and a token map per shard, and the
// marks. Its locking is the real thing in miniature: Access holds the owner's per-shard
// RWMutex shared for the whole transaction and SetFence holds it exclusive, as the sqlstore
// module does with PostgreSQL's advisory locks; a transaction's writes apply at its commit.
// The sqlstore module's tests, on SQLite and PostgreSQL, are the proof across processes.
type MemShared struct {
	mu     sync.Mutex
	rows   []map[string]map[int]string // shard -> owner -> key -> row
	fences []map[string]Fence          // shard -> owner -> fence (absent: Serving)
	tokens []map[string]uint64         // shard -> migration -> newest token; the last is the control's
	marks  map[[2]string]Mark          // {migration, owner}
	kept   map[[2]string]Sum           // {migration, owner}: the window's sums of the old copy
	locks  []map[string]*sync.RWMutex  // shard -> owner -> fence lock
	lost   []bool                      // a shard that is gone answers every call with an error
	claims map[string]memClaim         // the control's claims, by migration
	serves []memServes                 // shard -> the placement it serves
	done   map[string]bool             // the migrations finished
	seq    int64                       // the last change recorded
	logs   [][]memChange               // shard -> the changes recorded of exporting owners
	gates  [64]sync.RWMutex            // shard -> held shared by accesses, exclusive by Finishing
}

// memChange is a change of one row of an exporting owner.
type memChange struct {
	seq   int64
	owner string
	key   int
}

// memClaim is a migration's claim in the control database.
type memClaim struct {
	election, token uint64
	mover           string
	expires         time.Time
}

// memServes is the placement a shard serves.
type memServes struct {
	p         Placement
	finished  bool
	finishing uint64 // the Finish recording it is being finished, 0 if none
}

// NewMemShared returns a MemShared of n empty shards.
func NewMemShared(n int) *MemShared {
	s := &MemShared{marks: map[[2]string]Mark{}, kept: map[[2]string]Sum{}, lost: make([]bool, n), claims: map[string]memClaim{}, done: map[string]bool{}, serves: make([]memServes, n), logs: make([][]memChange, n)}
	for range n {
		s.rows = append(s.rows, map[string]map[int]string{})
		s.fences = append(s.fences, map[string]Fence{})
		s.tokens = append(s.tokens, map[string]uint64{})
		s.locks = append(s.locks, map[string]*sync.RWMutex{})
	}
	s.tokens = append(s.tokens, map[string]uint64{})
	return s
}

// grow adds empty shards up to n.
func (s *MemShared) grow(n int) *MemShared {
	for len(s.rows) < n {
		s.rows = append(s.rows, map[string]map[int]string{})
		s.fences = append(s.fences, map[string]Fence{})
		s.tokens = slices.Insert(s.tokens, len(s.tokens)-1, map[string]uint64{})
		s.locks = append(s.locks, map[string]*sync.RWMutex{})
		s.lost = append(s.lost, false)
		s.serves = append(s.serves, memServes{})
		s.logs = append(s.logs, nil)
	}
	return s
}

// MemTx is a MemShared transaction on one shard, of one owner.
type MemTx struct {
	s       *MemShared
	shard   int
	owner   string
	writes  map[int]string
	deletes map[int]bool
}

// Put writes a row of the transaction's owner; it is visible to others at commit.
func (tx *MemTx) Put(key int, row string) { tx.writes[key] = row; delete(tx.deletes, key) }

// Delete deletes a row of the transaction's owner at commit.
func (tx *MemTx) Delete(key int) { tx.deletes[key] = true; delete(tx.writes, key) }

// Rows returns the owner's committed rows on the shard, and the transaction's own writes.
func (tx *MemTx) Rows() map[int]string {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	out := maps.Clone(tx.s.rows[tx.shard][tx.owner])
	if out == nil {
		out = map[int]string{}
	}
	maps.Copy(out, tx.writes)
	for k := range tx.deletes {
		delete(out, k)
	}
	return out
}

func (s *MemShared) check(shard int) error {
	if shard < 0 || shard >= len(s.rows) {
		return fmt.Errorf("memshared: shard %d out of range: %w", shard, ErrConfig)
	}
	if s.lost[shard] {
		return fmt.Errorf("memshared: shard %d is gone", shard)
	}
	return nil
}

func (s *MemShared) lock(owner string, shard int) *sync.RWMutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[shard][owner]
	if l == nil {
		l = new(sync.RWMutex)
		s.locks[shard][owner] = l
	}
	return l
}

// token records token for migration in tokens[i], or refuses an older one. s.mu is held.
func (s *MemShared) token(migration string, token uint64, i int) error {
	if newest := s.tokens[i][migration]; newest > token {
		shard := i
		if i == len(s.rows) {
			shard = -1
		}
		return &FenceError{Shard: shard, Migration: migration, Token: token, Newest: newest}
	}
	s.tokens[i][migration] = token
	return nil
}

func (s *MemShared) Claim(_ context.Context, c Claim) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.claims[c.Migration]
	switch now := time.Now(); {
	case held.election > c.Election:
		return 0, &FenceError{Shard: -1, Migration: c.Migration, Token: c.Election, Newest: held.election}
	case held.election == c.Election && held.mover != c.Mover && held.expires.After(now):
		return 0, &MoverError{Migration: c.Migration, Holder: held.mover, Election: held.election, Left: held.expires.Sub(now)}
	}
	if !c.Placement.IsZero() {
		if s.done[c.Migration] {
			return 0, fmt.Errorf("memshared: migration %q was finished: %w", c.Migration, ErrFinished)
		}
		for i, sv := range s.serves {
			if !c.Placement.Accepts(sv.p, sv.finished) {
				return 0, &PlacementError{Shard: i, Served: sv.p, Wanted: c.Placement, Finished: sv.finished, Claim: true}
			}
		}
	}
	token := held.token + 1
	s.claims[c.Migration] = memClaim{election: c.Election, token: token, mover: c.Mover, expires: time.Now().Add(c.Lease)}
	for i := range s.tokens {
		if err := s.token(c.Migration, token, i); err != nil {
			return 0, err
		}
	}
	if !c.Placement.IsZero() {
		for i, sv := range s.serves {
			if sv.p != c.Placement {
				s.serves[i] = memServes{p: c.Placement}
			}
		}
	}
	return token, nil
}

func (s *MemShared) Renew(_ context.Context, migration string, token uint64, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.claims[migration]
	if held.token != token {
		return &FenceError{Shard: -1, Migration: migration, Token: token, Newest: held.token}
	}
	held.expires = time.Now().Add(lease)
	s.claims[migration] = held
	return nil
}

func (s *MemShared) Release(_ context.Context, migration string, token uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := s.claims[migration]; held.token == token {
		held.expires = time.Time{}
		s.claims[migration] = held
	}
	return nil
}

func (s *MemShared) Finished(_ context.Context, p Placement, finisher uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sv := range s.serves {
		if sv.p == p && !sv.finished && finisher != 0 && sv.finishing != finisher {
			return fmt.Errorf("memshared: shard %d: being finished by %d, not %d: %w", i, sv.finishing, finisher, ErrMoverRunning)
		}
		if sv.p == p {
			s.serves[i].finished, s.serves[i].finishing = true, 0
			s.done[p.Migration] = true
		}
	}
	return nil
}

func (s *MemShared) Finishing(_ context.Context, p Placement, finisher uint64, on bool) error {
	for i := range s.serves {
		s.gates[i].Lock() // waits for the accesses under way
		s.mu.Lock()
		if sv := s.serves[i]; sv.p == p && !sv.finished {
			if on {
				s.serves[i].finishing = finisher
			} else if sv.finishing == finisher {
				s.serves[i].finishing = 0
			}
		}
		s.mu.Unlock()
		s.gates[i].Unlock()
	}
	return nil
}

// fenced checks a mover's write of owners on shard: its token, and that every owner's fence
// there was set by migration to one of states. s.mu is held.
func (s *MemShared) fenced(migration string, token uint64, owners []string, shard int, states ...FenceState) error {
	if err := s.token(migration, token, shard); err != nil {
		return err
	}
	for _, o := range owners {
		if f := s.fences[shard][o]; f.Migration != migration || !slices.Contains(states, f.State) {
			return fmt.Errorf("memshared: shard %d: owner %q is %v, not %v by %q: %w", shard, o, f, states, migration, ErrFenced)
		}
	}
	return nil
}

func (s *MemShared) Access(_ context.Context, p Placement, owner string, shard int, fn func(tx *MemTx) error) error {
	if err := s.check(shard); err != nil {
		return err
	}
	s.gates[shard].RLock()
	defer s.gates[shard].RUnlock()
	l := s.lock(owner, shard)
	l.RLock()
	defer l.RUnlock()
	s.mu.Lock()
	f, sv, done := s.fences[shard][owner].State, s.serves[shard], s.done[p.Migration]
	s.mu.Unlock()
	if !p.Accepts(sv.p, sv.finished) || done && p.Migration != sv.p.Migration {
		return &PlacementError{Shard: shard, Served: sv.p, Wanted: p, Finished: sv.finished}
	}
	if sv.finishing != 0 && p.Leaving && f == Serving {
		return &PlacementError{Shard: shard, Served: sv.p, Wanted: p, Finishing: true}
	}
	if f != Serving && f != Exporting {
		return &FenceError{Owner: owner, Shard: shard, State: f}
	}
	tx := &MemTx{s: s, shard: shard, owner: owner, writes: map[int]string{}, deletes: map[int]bool{}}
	if err := fn(tx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(tx.writes) > 0 && s.rows[shard][owner] == nil {
		s.rows[shard][owner] = map[int]string{}
	}
	maps.Copy(s.rows[shard][owner], tx.writes)
	for k := range tx.deletes {
		delete(s.rows[shard][owner], k)
	}
	// The change capture: the fence read at the start still holds (the owner's lock).
	if s.fences[shard][owner].State == Exporting {
		for _, k := range slices.Sorted(maps.Keys(tx.writes)) {
			s.seq++
			s.logs[shard] = append(s.logs[shard], memChange{s.seq, owner, k})
		}
		for _, k := range slices.Sorted(maps.Keys(tx.deletes)) {
			s.seq++
			s.logs[shard] = append(s.logs[shard], memChange{s.seq, owner, k})
		}
	}
	return nil
}

func (s *MemShared) ClearChanges(_ context.Context, migration string, token uint64, owners []string, shard int) error {
	if err := s.check(shard); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(migration, token, owners, shard, Exporting, Moved); err != nil {
		return err
	}
	s.logs[shard] = slices.DeleteFunc(s.logs[shard], func(c memChange) bool { return slices.Contains(owners, c.owner) })
	return nil
}

func (s *MemShared) Replay(_ context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	if err := cmp.Or(s.check(from), s.check(to)); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := cmp.Or(s.fenced(migration, token, owners, to, Importing), s.fenced(migration, token, owners, from, Exporting, Moved)); err != nil {
		return 0, err
	}
	var taken []int64
	for _, c := range s.logs[from] {
		if len(taken) == limit {
			break
		}
		if !slices.Contains(owners, c.owner) {
			continue
		}
		if row, ok := s.rows[from][c.owner][c.key]; ok {
			if s.rows[to][c.owner] == nil {
				s.rows[to][c.owner] = map[int]string{}
			}
			s.rows[to][c.owner][c.key] = row
		} else {
			delete(s.rows[to][c.owner], c.key)
		}
		taken = append(taken, c.seq)
	}
	s.logs[from] = slices.DeleteFunc(s.logs[from], func(c memChange) bool { return slices.Contains(taken, c.seq) })
	return len(taken), nil
}

func (s *MemShared) Sums(_ context.Context, owners []string, shard int) ([]Sum, error) {
	if err := s.check(shard); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sum, len(owners))
	for i, o := range owners {
		var digest uint64
		for k, row := range s.rows[shard][o] {
			h := fnv.New64a()
			fmt.Fprint(h, k, "/", row)
			digest += h.Sum64()
		}
		out[i] = Sum{Rows: int64(len(s.rows[shard][o])), Digest: strconv.FormatUint(digest, 10)}
	}
	return out, nil
}

func (s *MemShared) FirstDiff(_ context.Context, owner string, a, b int) (string, error) {
	if err := cmp.Or(s.check(a), s.check(b)); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ra, rb := s.rows[a][owner], s.rows[b][owner]
	keys := slices.Sorted(maps.Keys(ra))
	keys = slices.Compact(slices.Sorted(slices.Values(append(keys, slices.Collect(maps.Keys(rb))...))))
	for _, k := range keys {
		x, okx := ra[k]
		y, oky := rb[k]
		if x != y || okx != oky {
			return strconv.Itoa(k), nil
		}
	}
	return "", nil
}

func (s *MemShared) Fences(_ context.Context, owners []string, shard int) ([]Fence, error) {
	if err := s.check(shard); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fence, len(owners))
	for i, o := range owners {
		out[i] = s.fences[shard][o]
	}
	return out, nil
}

func (s *MemShared) SetFence(_ context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error {
	if err := s.check(shard); err != nil {
		return err
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(owners)))
	for _, o := range sorted {
		l := s.lock(o, shard)
		l.Lock()
		defer l.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.token(migration, token, shard); err != nil {
		return err
	}
	if sv := s.serves[shard]; state != Serving && (s.done[migration] || sv.p.Migration == migration && sv.finishing != 0) {
		return fmt.Errorf("memshared: shard %d: migration %q is finished or being finished: %w", shard, migration, ErrMoverRunning)
	}
	for _, o := range sorted {
		if state == Serving {
			delete(s.fences[shard], o)
		} else {
			s.fences[shard][o] = Fence{State: state, Migration: migration}
		}
	}
	return nil
}

func (s *MemShared) CopyChunk(_ context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	if err := cmp.Or(s.check(from), s.check(to)); err != nil {
		return nil, 0, false, err
	}
	if len(after) != len(owners) {
		return nil, 0, false, fmt.Errorf("memshared: %d cursors for %d owners", len(after), len(owners))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(owners)))) != len(owners) {
		// A SQL store would write a row twice in one INSERT, which PostgreSQL refuses.
		return nil, 0, false, fmt.Errorf("memshared: an owner listed twice in %q", owners)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(migration, token, owners, to, Importing); err != nil {
		return nil, 0, false, err
	}
	next := slices.Clone(after)
	rows := 0
	for i, owner := range owners {
		start := math.MinInt
		if after[i] != "" {
			n, err := strconv.Atoi(string(after[i]))
			if err != nil {
				return nil, 0, false, fmt.Errorf("memshared: bad cursor %q", after[i])
			}
			start = n
		}
		var keys []int
		for k := range s.rows[from][owner] {
			if k > start {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		if len(keys) > limit-rows {
			keys = keys[:limit-rows]
		}
		if len(keys) == 0 {
			continue
		}
		if s.rows[to][owner] == nil {
			s.rows[to][owner] = map[int]string{}
		}
		for _, k := range keys {
			s.rows[to][owner][k] = s.rows[from][owner][k]
		}
		next[i] = Cursor(strconv.Itoa(keys[len(keys)-1]))
		if rows += len(keys); rows == limit {
			return next, rows, false, nil
		}
	}
	return next, rows, true, nil
}

func (s *MemShared) Counts(_ context.Context, owners []string, shard int) ([]int64, error) {
	if err := s.check(shard); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, len(owners))
	for i, o := range owners {
		out[i] = int64(len(s.rows[shard][o]))
	}
	return out, nil
}

func (s *MemShared) DeleteChunk(_ context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	if err := s.check(shard); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(migration, token, owners, shard, Importing, Moved); err != nil {
		return 0, err
	}
	n := 0
	for _, owner := range owners {
		for k := range s.rows[shard][owner] {
			if n == limit {
				return n, nil
			}
			delete(s.rows[shard][owner], k)
			n++
		}
	}
	return n, nil
}

func (s *MemShared) Copy(_ context.Context, owner string, from, to int) error {
	if err := cmp.Or(s.check(from), s.check(to)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows[from][owner]) == 0 && len(s.rows[to][owner]) > 0 {
		return fmt.Errorf("memshared: owner %q: shard %d holds none of its rows, shard %d holds %d: %w", owner, from, to, len(s.rows[to][owner]), ErrSourceEmpty)
	}
	s.rows[to][owner] = maps.Clone(s.rows[from][owner])
	return nil
}

func (s *MemShared) Count(_ context.Context, owner string, shard int) (int64, error) {
	if err := s.check(shard); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.rows[shard][owner])), nil
}

func (s *MemShared) Delete(_ context.Context, owner string, shard int) error {
	if err := s.check(shard); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rows[shard], owner)
	return nil
}

func (s *MemShared) Mark(_ context.Context, migration, owner string) (Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[[2]string{migration, owner}], nil
}

func (s *MemShared) SetMark(_ context.Context, migration, owner string, m Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{migration, owner}
	s.marks[k] = max(s.marks[k], m)
	return nil
}

// RecordFinished records a Migration's finish with the Shared ones' (FinishRecorder), as
// the sqlstore module's does in the control database.
func (s *MemShared) RecordFinished(_ context.Context, migration string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done[migration] = true
	return nil
}

func (s *MemShared) IsFinished(_ context.Context, migration string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[migration], nil
}

func (s *MemShared) Marks(_ context.Context, migration string, owners []string) ([]Mark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Mark, len(owners))
	for i, o := range owners {
		out[i] = s.marks[[2]string{migration, o}]
	}
	return out, nil
}

func (s *MemShared) SetMarks(_ context.Context, migration string, owners []string, m Mark, token uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.token(migration, token, len(s.rows)); err != nil {
		return err
	}
	for _, o := range owners {
		k := [2]string{migration, o}
		s.marks[k] = max(s.marks[k], m)
		if m == Done {
			delete(s.kept, k)
		}
	}
	return nil
}

// KeepSums and KeptSums keep the window's sums in the control's memory
// (SumKeeper), as the sqlstore module keeps them in its control database.
func (s *MemShared) KeepSums(_ context.Context, migration string, token uint64, owners []string, shard int, sums []Sum) error {
	if err := s.check(shard); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.token(migration, token, len(s.rows)); err != nil {
		return err
	}
	for i, o := range owners {
		s.kept[[2]string{migration, o}] = sums[i]
	}
	return nil
}

func (s *MemShared) KeptSums(_ context.Context, migration string, owners []string, shard int) ([]Sum, []bool, error) {
	if err := s.check(shard); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sums, found := make([]Sum, len(owners)), make([]bool, len(owners))
	for i, o := range owners {
		sums[i], found[i] = s.kept[[2]string{migration, o}]
	}
	return sums, found, nil
}

// where returns, for each owner with rows, the shards that hold them (a test helper).
func (s *MemShared) where() map[string][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]int{}
	for i, shard := range s.rows {
		for o, rows := range shard {
			if len(rows) > 0 {
				out[o] = append(out[o], i)
			}
		}
	}
	return out
}

// crashShared fails the nth mutating call of a MemShared (SetFence, CopyChunk, DeleteChunk,
// Copy, SetMarks, Claim), after doing it when half is set (a crash after the write, before
// the caller heard of it).
type crashShared struct {
	*MemShared
	mu    sync.Mutex
	n     int
	calls int
	after bool
	at    string
}

func (c *crashShared) hit(op string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls == c.n {
		c.at = op
		return true
	}
	return false
}

func (c *crashShared) do(op string, f func() error) error {
	if !c.hit(op) {
		return f()
	}
	if c.after {
		f()
	}
	return fmt.Errorf("%s: %w", op, errCrash)
}

func (c *crashShared) Claim(ctx context.Context, cl Claim) (token uint64, err error) {
	err = c.do("claim", func() (err error) {
		token, err = c.MemShared.Claim(ctx, cl)
		return err
	})
	return
}

func (c *crashShared) SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error {
	return c.do("fence "+state.String(), func() error { return c.MemShared.SetFence(ctx, migration, owners, shard, state, token) })
}

func (c *crashShared) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) (next []Cursor, n int, done bool, err error) {
	err = c.do("copy chunk", func() (err error) {
		next, n, done, err = c.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
		return err
	})
	return
}

func (c *crashShared) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (n int, err error) {
	err = c.do("delete chunk", func() (err error) {
		n, err = c.MemShared.DeleteChunk(ctx, migration, token, owners, shard, limit)
		return err
	})
	return
}

func (c *crashShared) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (n int, err error) {
	err = c.do("replay", func() (err error) {
		n, err = c.MemShared.Replay(ctx, migration, token, owners, from, to, limit)
		return err
	})
	return
}

func (c *crashShared) KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []Sum) error {
	return c.do("keep sums", func() error { return c.MemShared.KeepSums(ctx, migration, token, owners, shard, sums) })
}

func (c *crashShared) SetMarks(ctx context.Context, migration string, owners []string, m Mark, token uint64) error {
	return c.do("marks", func() error { return c.MemShared.SetMarks(ctx, migration, owners, m, token) })
}

// Shards returns how many shards the store has.
func (s *MemShared) Shards() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// Unsettled returns up to 10 owners fenced Importing or Exporting by migration on shard.
func (s *MemShared) Unsettled(_ context.Context, migration string, shard int) ([]string, int, error) {
	if err := s.check(shard); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var owners []string
	for _, o := range slices.Sorted(maps.Keys(s.fences[shard])) {
		if f := s.fences[shard][o]; f.Migration == migration && (f.State == Importing || f.State == Exporting) {
			owners = append(owners, o)
		}
	}
	return owners[:min(len(owners), 10)], len(owners), nil
}

// Owners yields the owners with rows on shard.
func (s *MemShared) Owners(_ context.Context, shard int) iter.Seq2[string, error] {
	if err := s.check(shard); err != nil {
		return func(yield func(string, error) bool) { yield("", err) }
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return ownersWithRows(s.rows[shard])
}
