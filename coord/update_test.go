package coord_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
)

func jump(n int) coord.Placement {
	return coord.Placement{Layout: coord.Layout{Strategy: "jump", Shards: n}}
}

func TestUpdateCompareAndSwap(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		pfx := prefix(t)
		a := open(t, eps, pfx, coord.Options{Identity: "operator-a"})
		b := open(t, eps, pfx, coord.Options{Identity: "operator-b"})

		if _, _, err := a.Current(); !errors.Is(err, coord.ErrNoRecord) {
			t.Fatalf("Current before any record: %v, want ErrNoRecord", err)
		}
		rev1, err := a.Update(ctx, 0, jump(5))
		if err != nil {
			t.Fatal(err)
		}
		// A second create loses and names the first writer.
		_, err = b.Update(ctx, 0, jump(6))
		var ce *coord.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, coord.ErrConflict) {
			t.Fatalf("second create: %v, want a *ConflictError wrapping ErrConflict", err)
		}
		if ce.Current != rev1 || ce.Writer != "operator-a" || !strings.Contains(err.Error(), "operator-a") {
			t.Errorf("conflict %+v (%q): want current revision %d written by operator-a", ce, err, rev1)
		}
		t.Log(err)

		rev2, err := b.Update(ctx, rev1, jump(7))
		if err != nil {
			t.Fatal(err)
		}
		// A stale revision loses, nothing is written.
		if _, err := a.Update(ctx, rev1, jump(8)); !errors.Is(err, coord.ErrConflict) {
			t.Fatalf("update at stale revision %d: %v, want ErrConflict", rev1, err)
		} else {
			t.Log(err)
		}
		// An invalid placement is refused before anything is sent.
		if _, err := a.Update(ctx, rev2, jump(0)); !errors.Is(err, coord.ErrInput) {
			t.Fatalf("update with 0 shards: %v, want ErrInput", err)
		}
		if _, err := a.Update(ctx, -1, jump(3)); !errors.Is(err, coord.ErrInput) {
			t.Fatalf("update at revision -1: %v, want ErrInput", err)
		}
		p, rev, err := a.Get(ctx)
		if err != nil || rev != rev2 || p.Layout.Shards != 7 || p.Writer != "operator-b" {
			t.Fatalf("Get = %+v at %d, %v; want 7 shards by operator-b at %d", p, rev, err, rev2)
		}
		// Both views follow.
		for _, c := range []*coord.Client{a, b} {
			v, err := c.Wait(ctx, rev2)
			if err != nil {
				t.Fatal(err)
			}
			p, rev, err := v.Current()
			if err != nil || rev != rev2 || p.Layout.Shards != 7 {
				t.Fatalf("%s: view %+v at %d, %v; want 7 shards at %d", c.Identity(), p, rev, err, rev2)
			}
		}
	})
}

// TestUpdateRace races many writers from one revision, round after round: exactly one wins
// each round, and the record is the winner's.
func TestUpdateRace(t *testing.T) {
	const writers, rounds = 8, 10
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		pfx := prefix(t)
		clients := make([]*coord.Client, writers)
		for i := range clients {
			clients[i] = open(t, eps, pfx, coord.Options{Identity: fmt.Sprintf("writer-%d", i)})
		}
		rev, err := clients[0].Update(ctx, 0, jump(1))
		if err != nil {
			t.Fatal(err)
		}
		for round := range rounds {
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []int
				newRev  int64
			)
			start := make(chan struct{})
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := c.Update(ctx, rev, jump(100*round+i+1))
					switch {
					case err == nil:
						mu.Lock()
						winners = append(winners, i)
						newRev = r
						mu.Unlock()
					case !errors.Is(err, coord.ErrConflict):
						t.Errorf("writer %d: %v, want nil or ErrConflict", i, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("round %d: writers %v won, want exactly one", round, winners)
			}
			p, got, err := clients[0].Get(ctx)
			if err != nil || got != newRev || p.Layout.Shards != 100*round+winners[0]+1 || p.Writer != fmt.Sprintf("writer-%d", winners[0]) {
				t.Fatalf("round %d: record %+v at %d, %v; want writer-%d's at %d", round, p, got, err, winners[0], newRev)
			}
			rev = newRev
		}
	})
}

// TestViewIsImmutable: a view taken before an update keeps answering what it saw; the
// client's next view has the update.
func TestViewIsImmutable(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		c := open(t, eps, prefix(t), coord.Options{})
		rev, err := c.Update(ctx, 0, jump(3))
		if err != nil {
			t.Fatal(err)
		}
		old, err := c.Wait(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		rev2, err := c.Update(ctx, rev, jump(4))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, rev2); err != nil {
			t.Fatal(err)
		}
		if p, r, err := old.Current(); err != nil || p.Layout.Shards != 3 || r != rev {
			t.Errorf("old view: %+v at %d, %v; want 3 shards at %d", p, r, err, rev)
		}
		if p, r, err := c.Current(); err != nil || p.Layout.Shards != 4 || r != rev2 {
			t.Errorf("new view: %+v at %d, %v; want 4 shards at %d", p, r, err, rev2)
		}
	})
}

// TestStoredRecordRefused: a record this build cannot read (a newer format, broken JSON,
// written by hand with etcdctl, say) is refused whole with its revision, and an operator can
// replace it by that revision.
func TestStoredRecordRefused(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		c := open(t, eps, prefix(t), coord.Options{})
		for _, bad := range []struct {
			record string
			want   error
		}{
			{`{"format":2,"writer":"v2-operator","layout":{"strategy":"jump","shards":3,"zone":"b"}}`, coord.ErrVersion},
			{`{"format":1,"layout":{"strategy":"jump","shards":3`, coord.ErrRecord},
			{``, coord.ErrRecord}, // an empty value is a record, and a bad one, for the view as for Get
		} {
			r, err := c.Etcd().Put(ctx, c.Prefix()+"placement", bad.record)
			if err != nil {
				t.Fatal(err)
			}
			rev := r.Header.Revision
			v, err := c.Wait(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			if p, got, err := v.Current(); !errors.Is(err, bad.want) || got != rev || p.Layout.Strategy != "" {
				t.Fatalf("view of %s: %+v at %d, %v; want %v at %d", bad.record, p, got, err, bad.want, rev)
			} else {
				t.Log(err)
			}
			if _, _, err := c.Get(ctx); !errors.Is(err, bad.want) {
				t.Fatalf("Get of %s: %v, want %v", bad.record, err, bad.want)
			}
			// A stale writer still loses, and the conflict names the writer even of a record it cannot read.
			_, err = c.Update(ctx, rev-1, jump(3))
			var ce *coord.ConflictError
			if !errors.As(err, &ce) || ce.Current != rev {
				t.Fatalf("update at stale %d over %s: %v", rev-1, bad.record, err)
			}
			if bad.want == coord.ErrVersion && ce.Writer != "v2-operator" {
				t.Errorf("conflict names writer %q, want v2-operator", ce.Writer)
			}
		}
		_, rev, _ := c.Get(ctx)
		rev, err := c.Update(ctx, rev, jump(3))
		if err != nil {
			t.Fatalf("replace the broken record at its revision: %v", err)
		}
		if _, err := c.Wait(ctx, rev); err != nil {
			t.Fatal(err)
		}
		if p, _, err := c.Current(); err != nil || p.Layout.Shards != 3 {
			t.Fatalf("after the repair: %+v, %v", p, err)
		}
	})
}

// TestWatchAfterCompaction cuts a client off for less than its TTL while the record changes
// and etcd compacts its history, then drops its connections, as a server restart does: the
// client's watch cannot resume where it stopped, reads the record again, and goes on
// following it.
func TestWatchAfterCompaction(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		pfx := prefix(t)
		px := proxy(t, eps)
		follower := open(t, px.endpoints(), pfx, coord.Options{TTL: 10 * time.Second, DialTimeout: 2 * time.Second})
		writer := open(t, eps, pfx, coord.Options{})
		rev, err := writer.Update(ctx, 0, jump(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.Wait(ctx, rev); err != nil {
			t.Fatal(err)
		}
		px.Cut()
		for i := 2; i <= 5; i++ {
			if rev, err = writer.Update(ctx, rev, jump(i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := writer.Etcd().Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
		px.Reset()
		v, err := follower.Wait(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		if p, got, err := v.Current(); err != nil || got != rev || p.Layout.Shards != 5 {
			t.Fatalf("after compaction: %+v at %d, %v; want 5 shards at %d", p, got, err, rev)
		}
		// and the watch goes on
		if rev, err = writer.Update(ctx, rev, jump(6)); err != nil {
			t.Fatal(err)
		}
		if _, err := follower.Wait(ctx, rev); err != nil {
			t.Fatal(err)
		}
	})
}

// TestServerRestart stops the etcd server and starts it again on the same endpoint and
// data: the clients reconnect, the view follows the record again, and a change made after
// the restart reaches it.
func TestServerRestart(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	eps, stop, err := embedded.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop() }) // after the clients close: a server with clients takes 7 s to stop
	pfx := prefix(t)
	follower := open(t, eps, pfx, coord.Options{TTL: 2 * time.Second, DialTimeout: 2 * time.Second})
	writer := open(t, eps, pfx, coord.Options{TTL: 2 * time.Second, DialTimeout: 2 * time.Second})
	rev, err := writer.Update(ctx, 0, jump(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.Wait(ctx, rev); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	stop()
	t.Logf("stopped %v", time.Since(t0))
	u, _ := url.Parse(eps[0])
	if _, stop, err = embedded.StartAt(dir, u.Host); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted %v", time.Since(t0))
	var rev2 int64
	eventually(t, 30*time.Second, "the writer updates after the restart", func() error {
		_, r, err := writer.Get(ctx)
		if err != nil {
			return err
		}
		rev2, err = writer.Update(ctx, r, jump(4))
		return err
	})
	t.Logf("updated %v", time.Since(t0))
	eventually(t, 30*time.Second, "the follower sees the update", func() error {
		p, got, err := follower.Current()
		if err != nil {
			return err
		}
		if got != rev2 || p.Layout.Shards != 4 {
			return fmt.Errorf("view %+v at %d, want 4 shards at %d", p.Layout, got, rev2)
		}
		return nil
	})
	t.Logf("seen %v", time.Since(t0))
}
