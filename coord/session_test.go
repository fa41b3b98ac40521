package coord_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
)

// TestPartitionExpiresLease cuts a client off from etcd with a real network partition (a
// proxy that drops every byte): once its lease may have expired it refuses to answer, it
// loses the mover election, another process becomes the mover, and after the partition
// heals it makes a new session, reads the record written meanwhile, and answers again.
func TestPartitionExpiresLease(t *testing.T) {
	const ttl = 3 * time.Second
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		pfx := prefix(t)
		px := proxy(t, eps)
		cut := open(t, px.endpoints(), pfx, coord.Options{TTL: ttl, DialTimeout: 2 * time.Second, Identity: "partitioned"})
		other := open(t, eps, pfx, coord.Options{TTL: ttl, Identity: "other"})
		rev, err := other.Update(ctx, 0, jump(5))
		if err != nil {
			t.Fatal(err)
		}
		before, err := cut.Wait(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cut.TryMover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Trusted while connected: through several keepalive rounds.
		for range 3 {
			if _, _, err := cut.Current(); err != nil {
				t.Fatalf("connected client: %v", err)
			}
			time.Sleep(ttl / 2)
		}

		px.Cut()
		eventually(t, 5*ttl, "partitioned client refuses its view", func() error {
			_, _, err := cut.Current()
			if errors.Is(err, coord.ErrLeaseExpired) {
				t.Log(err)
				return nil
			}
			return fmt.Errorf("Current: %v", err)
		})
		select {
		case <-m.Done():
		case <-time.After(5 * ttl):
			t.Fatal("the partitioned mover's Done is still open")
		}
		if err := m.Err(); !errors.Is(err, coord.ErrNotMover) {
			t.Errorf("partitioned mover's Err: %v, want ErrNotMover", err)
		}
		if _, err := cut.TryMover(ctx); !errors.Is(err, coord.ErrLeaseExpired) {
			t.Errorf("TryMover while partitioned: %v, want ErrLeaseExpired", err)
		}

		// The other process takes over once etcd expired the lease, and changes the record.
		var m2 *coord.Mover
		eventually(t, 10*ttl, "the other process becomes the mover", func() error {
			m2, err = other.TryMover(ctx)
			return err
		})
		if m2.Epoch() <= m.Epoch() {
			t.Errorf("new epoch %d, not above the old %d", m2.Epoch(), m.Epoch())
		}
		rev, err = m2.Update(ctx, rev, jump(6))
		if err != nil {
			t.Fatal(err)
		}
		// The stale mover cannot record anything, even with the right record revision.
		if _, err := m.Update(ctx, rev, jump(7)); !errors.Is(err, coord.ErrNotMover) {
			t.Errorf("stale mover's Update: %v, want ErrNotMover", err)
		}
		// Still partitioned: still refused, never the old placement.
		if p, _, err := cut.Current(); !errors.Is(err, coord.ErrLeaseExpired) {
			t.Fatalf("still partitioned: %+v, %v; want ErrLeaseExpired", p, err)
		}

		px.Heal()
		eventually(t, 30*time.Second, "healed client answers with the new record", func() error {
			p, got, err := cut.Current()
			if err != nil {
				return err
			}
			if got != rev || p.Layout.Shards != 6 {
				return fmt.Errorf("view %+v at %d, want 6 shards at %d", p, got, rev)
			}
			return nil
		})
		// A view of the expired session stays refused.
		if _, _, err := before.Current(); !errors.Is(err, coord.ErrLeaseExpired) {
			t.Errorf("a view from before the partition: %v, want ErrLeaseExpired", err)
		}
		// The healed client is no mover and cannot become one while m2 holds.
		_, err = cut.TryMover(ctx)
		var be *coord.BusyError
		if !errors.As(err, &be) || be.Holder != "other" || be.Epoch != m2.Epoch() {
			t.Errorf("healed client's TryMover: %v, want ErrBusy naming other at epoch %d", err, m2.Epoch())
		}
	})
}

// TestLongPartitionRecovers cuts a client off for longer than gRPC's keepalive needs to
// give up its connection (10 s without an answer, then 5 s for the ping), so that the
// client dials again into a network that is still cut: once it heals, the client makes a
// new session and follows the record again. Against the embedded server only, for time.
func TestLongPartitionRecovers(t *testing.T) {
	const ttl = 3 * time.Second
	eps := servers[0].endpoints
	ctx := ctxT(t)
	pfx := prefix(t)
	px := proxy(t, eps)
	cut := open(t, px.endpoints(), pfx, coord.Options{TTL: ttl, DialTimeout: 2 * time.Second})
	other := open(t, eps, pfx, coord.Options{TTL: ttl})
	rev, err := other.Update(ctx, 0, jump(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cut.Wait(ctx, rev); err != nil {
		t.Fatal(err)
	}
	px.Cut()
	if rev, err = other.Update(ctx, rev, jump(6)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(17 * time.Second)
	if _, _, err := cut.Current(); !errors.Is(err, coord.ErrLeaseExpired) {
		t.Fatalf("after 17 s cut off: %v, want ErrLeaseExpired", err)
	}
	px.Heal()
	start := time.Now()
	eventually(t, 30*time.Second, "the healed client follows the record", func() error {
		p, got, err := cut.Current()
		if err != nil {
			return err
		}
		if got != rev || p.Layout.Shards != 6 {
			return fmt.Errorf("view %+v at %d, want 6 shards at %d", p.Layout, got, rev)
		}
		return nil
	})
	t.Logf("answered again %v after the network healed", time.Since(start).Round(time.Millisecond))
}
