package coord_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestMoverOneAtATime(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		pfx := prefix(t)
		a := open(t, eps, pfx, coord.Options{Identity: "mover-a"})
		b := open(t, eps, pfx, coord.Options{Identity: "mover-b"})
		rev, err := a.Update(ctx, 0, jump(5))
		if err != nil {
			t.Fatal(err)
		}
		ma, err := a.TryMover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.TryMover(ctx)
		var be *coord.BusyError
		if !errors.As(err, &be) || !errors.Is(err, coord.ErrBusy) {
			t.Fatalf("second TryMover: %v, want a *BusyError wrapping ErrBusy", err)
		}
		if be.Holder != "mover-a" || be.Epoch != ma.Epoch() || !strings.Contains(err.Error(), "mover-a") {
			t.Errorf("busy error %q names %q at %d, want mover-a at %d", err, be.Holder, be.Epoch, ma.Epoch())
		}
		t.Log(err)
		if _, err := a.TryMover(ctx); !errors.Is(err, coord.ErrBusy) {
			t.Errorf("a's second TryMover: %v, want ErrBusy", err)
		}

		// b campaigns and waits until a resigns.
		won := make(chan *coord.Mover)
		failed := make(chan error, 1)
		go func() {
			m, err := b.Campaign(ctx)
			if err != nil {
				failed <- err
				return
			}
			won <- m
		}()
		select {
		case m := <-won:
			t.Fatalf("b won with epoch %d while a holds %d", m.Epoch(), ma.Epoch())
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(500 * time.Millisecond):
		}
		if rev, err = ma.Update(ctx, rev, jump(6)); err != nil {
			t.Fatalf("mover's Update: %v", err)
		}
		if err := ma.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ma.Done():
		default:
			t.Error("Done is open after Resign")
		}
		var mb *coord.Mover
		select {
		case mb = <-won:
		case err := <-failed:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("b did not win after a resigned")
		}
		if mb.Epoch() <= ma.Epoch() {
			t.Errorf("b's epoch %d is not above a's %d", mb.Epoch(), ma.Epoch())
		}
		// a's leadership is over: it cannot record anything, even at the right revision.
		if _, err := ma.Update(ctx, rev, jump(7)); !errors.Is(err, coord.ErrNotMover) {
			t.Errorf("resigned mover's Update: %v, want ErrNotMover", err)
		}
		if p, got, err := a.Get(ctx); err != nil || got != rev || p.Layout.Shards != 6 {
			t.Errorf("record %+v at %d, %v: want 6 shards at %d, untouched", p, got, err, rev)
		}
		if _, err := mb.Update(ctx, rev, jump(7)); err != nil {
			t.Errorf("new mover's Update: %v", err)
		}
	})
}

// TestMoverDeposedByKeyDelete: an operator deleting the election key ends the leadership.
func TestMoverDeposedByKeyDelete(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		a := open(t, eps, prefix(t), coord.Options{})
		m, err := a.TryMover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Etcd().Delete(ctx, a.Prefix()+"mover/", clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.Done():
		case <-ctx.Done():
			t.Fatal("Done still open after the election key was deleted")
		}
		if err := m.Err(); !errors.Is(err, coord.ErrNotMover) {
			t.Errorf("Err: %v, want ErrNotMover", err)
		}
	})
}

// TestMoverKilledTakenOver kills a mover process with SIGKILL: its lease expires after the
// TTL and a waiting campaign takes over with a greater epoch.
func TestMoverKilledTakenOver(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		pfx := prefix(t)
		child, epoch, identity := moverChild(t, eps, pfx)
		c := open(t, eps, pfx, coord.Options{TTL: 3 * time.Second})
		_, err := c.TryMover(ctx)
		var be *coord.BusyError
		if !errors.As(err, &be) || be.Holder != identity || be.Epoch != epoch {
			t.Fatalf("TryMover while the child moves: %v, want ErrBusy naming %s at %d", err, identity, epoch)
		}
		t.Log(err)
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		child.Wait()
		m, err := c.Campaign(ctx)
		if err != nil {
			t.Fatalf("campaign after the mover was killed: %v", err)
		}
		if m.Epoch() <= epoch {
			t.Errorf("new epoch %d is not above the killed mover's %d", m.Epoch(), epoch)
		}
		t.Logf("killed mover's epoch %d, the new mover's %d", epoch, m.Epoch())
	})
}

// TestCloseEndsCampaign: closing a client whose campaign waits ends the campaign with
// ErrClosed, and its queued key goes with its lease.
func TestCloseEndsCampaign(t *testing.T) {
	eps := servers[0].endpoints
	ctx := ctxT(t)
	pfx := prefix(t)
	a := open(t, eps, pfx, coord.Options{Identity: "holder"})
	if _, err := a.TryMover(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := coord.Open(ctx, eps, pfx, coord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Campaign(ctx)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it queue (the test holds either way)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, coord.ErrClosed) {
			t.Errorf("campaign of a closed client: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("the campaign still waits after Close")
	}
	r, err := a.Etcd().Get(ctx, a.Prefix()+"mover/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "holder" {
		t.Errorf("election keys after Close: %v, %v; want the holder's alone", r.Kvs, err)
	}
}

// A Resign that etcd does not hear (its context ended first, or the network failed) ends the
// Mover in this process, while its election key lives on with the session's lease. TryMover
// took that key back, with the old epoch: two Movers of one process, one epoch, where every
// later mover's must be greater. It takes the election afresh now.
func TestResignUnheardNextEpochGreater(t *testing.T) {
	forEachServer(t, func(t *testing.T, eps []string) {
		ctx := ctxT(t)
		a := open(t, eps, prefix(t), coord.Options{Identity: "mover-a"})
		m1, err := a.TryMover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if err := m1.Resign(ended); err == nil {
			t.Fatal("Resign with its context ended: nil")
		}
		if m1.Err() == nil {
			t.Fatal("the resigned Mover still holds")
		}
		m2, err := a.TryMover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m2.Epoch() <= m1.Epoch() {
			t.Fatalf("the next Mover's epoch is %d, the resigned one's %d: want greater", m2.Epoch(), m1.Epoch())
		}
	})
}
