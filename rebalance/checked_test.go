package rebalance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shardkit/shard"
)

// checkedStore is a memStore that is a Summer and a CheckedDeleter, logging its calls.
type checkedStore struct {
	*memStore
	mu        sync.Mutex
	kept      map[[2]string]Sum
	log       []string
	afterMark func(Mark) // called after each SetMark, if not nil
	failOnce  error      // returned by the next DeleteChecked, which then deletes nothing
}

func (c *checkedStore) logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

// sum is the owner's rows on shard as a count and a digest of them in order.
func (c *checkedStore) sum(owner string, shard int) Sum {
	c.memStore.mu.Lock()
	defer c.memStore.mu.Unlock()
	rows := c.shards[shard][owner]
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		fmt.Fprintf(&b, "%d=%s;", id, rows[id])
	}
	return Sum{Rows: int64(len(rows)), Digest: b.String()}
}

func (c *checkedStore) Sums(_ context.Context, owners []string, shard int) ([]Sum, error) {
	out := make([]Sum, len(owners))
	for i, o := range owners {
		out[i] = c.sum(o, shard)
	}
	return out, nil
}

func (c *checkedStore) FirstDiff(context.Context, string, int, int) (string, error) {
	return "", errors.New("not kept")
}

func (c *checkedStore) SetMark(ctx context.Context, migration, owner string, m Mark) error {
	c.logf("mark %v", m)
	err := c.memStore.SetMark(ctx, migration, owner, m)
	if c.afterMark != nil {
		c.afterMark(m)
	}
	return err
}

func (c *checkedStore) KeepOldSum(_ context.Context, migration, owner string, shard int, sum Sum) error {
	c.logf("keep %d rows", sum.Rows)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept[[2]string{migration, owner}] = sum
	return nil
}

func (c *checkedStore) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	c.logf("delete checked")
	c.mu.Lock()
	kept, found := c.kept[[2]string{migration, owner}]
	fail := c.failOnce
	c.failOnce = nil
	c.mu.Unlock()
	if fail != nil {
		return fail
	}
	if got := c.sum(owner, shard); found && got.Rows > 0 && got != kept {
		return fmt.Errorf("old copy of %q: %d rows, %d kept: %w", owner, got.Rows, kept.Rows, ErrCopyMismatch)
	}
	if err := c.memStore.Delete(ctx, owner, shard); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.kept, [2]string{migration, owner})
	return nil
}

// TestMigrationDeletesTheOldCopyChecked: over a CheckedDeleter, the Migration keeps the old
// copy's sum before it marks the owner Copied (a crash between them must not leave a Copied
// owner with nothing kept), and deletes through DeleteChecked, in the Run that copied and in
// one resumed after a crash at the deletion. A write on the old copy after the comparison
// stops the move with ErrCopyMismatch, in every Run, and stays.
func TestMigrationDeletesTheOldCopyChecked(t *testing.T) {
	ctx := context.Background()
	before, _ := shard.NewJump(1)
	after, _ := shard.NewJump(2)
	owner := ""
	for u := 0; owner == ""; u++ {
		if o := fmt.Sprint("user", u); after.Locate(o) == 1 {
			owner = o
		}
	}
	setup := func() *checkedStore {
		c := &checkedStore{memStore: newMemStore(2), kept: map[[2]string]Sum{}}
		c.put(0, owner, 1, "hello")
		c.put(0, owner, 2, "world")
		return c
	}
	run := func(c *checkedStore) error {
		m, err := New("grow", before, after, c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Run(ctx, slices.Values([]string{owner}))
	}

	c := setup()
	c.failOnce = errCrash
	if err := run(c); !errors.Is(err, errCrash) {
		t.Fatalf("Run that dies at the deletion: %v", err)
	}
	if err := run(c); err != nil {
		t.Fatalf("Run resumed after the crash: %v", err)
	}
	want := []string{"keep 2 rows", "mark copied", "delete checked", "delete checked", "mark done"}
	if !slices.Equal(c.log, want) {
		t.Errorf("calls %q, want %q", c.log, want)
	}
	if c.count(0, owner) != 0 || c.count(1, owner) != 2 || len(c.kept) != 0 {
		t.Errorf("after the move: %d rows on the old shard, %d on the new, %d sums kept; want 0, 2, 0", c.count(0, owner), c.count(1, owner), len(c.kept))
	}

	c = setup()
	c.afterMark = func(m Mark) {
		if m == Copied {
			c.put(0, owner, 1, "changed by another process")
		}
	}
	for i := range 2 {
		if err := run(c); !errors.Is(err, ErrCopyMismatch) {
			t.Fatalf("Run %d after a write on the compared old copy: %v, want ErrCopyMismatch", i+1, err)
		}
	}
	if c.count(0, owner) != 2 {
		t.Errorf("the old copy holds %d rows, want both kept, the changed one among them", c.count(0, owner))
	}
}
