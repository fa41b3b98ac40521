package coord

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// BusyError is the error of TryMover while another process holds the election. It wraps
// ErrBusy.
type BusyError struct {
	Holder string // the holder's Identity ("host/pid/start time" by default)
	Epoch  uint64 // the holder's epoch
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("coord: a mover already runs: %s holds the election with epoch %d; wait for it or stop it", e.Holder, e.Epoch)
}

// Unwrap makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Unwrap() error { return ErrBusy }

// Mover is this process's leadership of the mover election: while Done is open, no other
// process holds it. A Client has at most one Mover at a time.
type Mover struct {
	c        *Client
	s        *session
	e        *concurrency.Election
	key      string
	epoch    uint64
	done     chan struct{}
	doneOnce sync.Once
	mu       sync.Mutex
	err      error
	stop     context.CancelFunc
}

func (c *Client) moverPrefix() string { return c.prefix + "mover" } // keys under moverPrefix()+"/"

// TryMover takes the mover election if nobody holds it, and fails at once otherwise with a
// *BusyError (wrapping ErrBusy) naming the holder; also with ErrLeaseExpired while the
// session is not trusted, ErrUnavailable when etcd does not answer.
func (c *Client) TryMover(ctx context.Context) (*Mover, error) {
	s, err := c.moverSession()
	if err != nil {
		return nil, err
	}
	c.moverMu.Lock()
	defer c.moverMu.Unlock()
	if err := c.moverInUse(); err != nil {
		return nil, err
	}
	ctx, cancel := c.requestCtx(ctx)
	defer cancel()
	pfx := c.moverPrefix() + "/"
	key := fmt.Sprintf("%s%x", pfx, s.lease)
	first := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
	var owner *mvccpb.KeyValue
	for {
		r, err := c.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, c.identity, clientv3.WithLease(s.lease)), first).
			Else(first).
			Commit()
		if err != nil {
			return nil, c.unavailable("mover election", err)
		}
		kvs := r.Responses[len(r.Responses)-1].GetResponseRange().Kvs
		if len(kvs) == 0 { // cannot happen: our key is there, put or found, in the same transaction
			return nil, fmt.Errorf("coord: mover election: no key under %s after the transaction: %w", pfx, ErrUnavailable)
		}
		owner = kvs[0]
		if r.Succeeded || string(owner.Key) != key {
			break
		}
		// Our key was there already, first: left by a leadership that ended in this
		// process without etcd hearing (a Resign cut off from it). Resumed, it would give
		// a second Mover that one's epoch: delete it, and take the election afresh.
		if _, err := c.etcd.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", owner.CreateRevision)).
			Then(clientv3.OpDelete(key)).Commit(); err != nil {
			return nil, c.unavailable("mover election", err)
		}
	}
	if string(owner.Key) != key {
		// Our key waits behind the holder's: take it back (no campaign of this client
		// runs, so a key left over from an abandoned one goes too).
		dctx, dcancel := context.WithTimeout(context.Background(), c.timeout)
		c.etcd.Delete(dctx, key)
		dcancel()
		return nil, &BusyError{Holder: string(owner.Value), Epoch: uint64(owner.CreateRevision)}
	}
	e := concurrency.ResumeElection(s.s, c.moverPrefix(), key, owner.CreateRevision)
	return c.startMover(s, e, key, owner.CreateRevision), nil
}

// Campaign waits until this process holds the mover election, or ctx ends, or the session
// is lost (ErrLeaseExpired).
func (c *Client) Campaign(ctx context.Context) (*Mover, error) {
	s, err := c.moverSession()
	if err != nil {
		return nil, err
	}
	c.moverMu.Lock()
	if err := c.moverInUse(); err != nil {
		c.moverMu.Unlock()
		return nil, err
	}
	c.campaigning = true
	c.moverMu.Unlock()
	defer func() {
		c.moverMu.Lock()
		c.campaigning = false
		c.moverMu.Unlock()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.lost:
		case <-c.ctx.Done():
		case <-ctx.Done():
		}
		cancel()
	}()
	e := concurrency.NewElection(s.s, c.moverPrefix())
	if err := e.Campaign(ctx, c.identity); err != nil {
		if c.ctx.Err() != nil { // before the session: Close also ends the session
			return nil, fmt.Errorf("coord: campaign for mover: %w", ErrClosed)
		}
		select {
		case <-s.lost:
			return nil, fmt.Errorf("coord: campaign for mover: session lost: %w", ErrLeaseExpired)
		default:
		}
		return nil, fmt.Errorf("coord: campaign for mover: %w", err)
	}
	c.moverMu.Lock()
	defer c.moverMu.Unlock()
	return c.startMover(s, e, e.Key(), e.Rev()), nil
}

// moverInUse fails when this client already holds or seeks the election. Called with
// moverMu held.
func (c *Client) moverInUse() error {
	if c.mover != nil {
		return &BusyError{Holder: c.identity + " (this client)", Epoch: c.mover.epoch}
	}
	if c.campaigning {
		return &BusyError{Holder: c.identity + " (this client, campaigning)"}
	}
	return nil
}

func (c *Client) moverSession() (*session, error) {
	if c.closed.Load() {
		return nil, fmt.Errorf("coord: mover: %w", ErrClosed)
	}
	s := c.sess.Load()
	if !s.trusted(c.now()) {
		return nil, fmt.Errorf("coord: mover: this process's lease is not trusted (no keepalive answered within %v): %w", c.ttl, ErrLeaseExpired)
	}
	return s, nil
}

// startMover records m as the client's mover and closes its Done when the session is lost
// or its election key disappears. Called with moverMu held.
func (c *Client) startMover(s *session, e *concurrency.Election, key string, rev int64) *Mover {
	ctx, stop := context.WithCancel(c.ctx)
	m := &Mover{c: c, s: s, e: e, key: key, epoch: uint64(rev), done: make(chan struct{}), stop: stop}
	c.mover = m
	go m.watch(ctx)
	return m
}

// watch closes Done when the session is lost, the mover stops, or its election key is
// deleted or replaced.
func (m *Mover) watch(ctx context.Context) {
	c, key := m.c, m.key
	from := int64(m.epoch)
	for {
		wch := c.etcd.Watch(ctx, key, clientv3.WithRev(from))
	events:
		for {
			select {
			case <-m.s.lost:
				m.lose(fmt.Errorf("coord: mover epoch %d: this process's lease expired: %w", m.epoch, ErrNotMover))
				return
			case <-ctx.Done():
				m.lose(fmt.Errorf("coord: mover epoch %d: resigned or client closed: %w", m.epoch, ErrNotMover))
				return
			case r, ok := <-wch:
				if !ok || r.Err() != nil {
					break events // compacted, canceled: look at the key itself, then watch on
				}
				for _, ev := range r.Events {
					if ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != int64(m.epoch) {
						m.lose(fmt.Errorf("coord: mover epoch %d: election key %s was deleted: %w", m.epoch, key, ErrNotMover))
						return
					}
				}
			}
		}
		gctx, cancel := context.WithTimeout(ctx, c.timeout)
		r, err := c.etcd.Get(gctx, key)
		cancel()
		switch {
		case err != nil:
			select { // etcd unreachable: the session's deadline decides
			case <-ctx.Done():
			case <-time.After(c.ttl / 10):
			}
		case len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != int64(m.epoch):
			m.lose(fmt.Errorf("coord: mover epoch %d: election key %s is gone: %w", m.epoch, key, ErrNotMover))
			return
		default:
			from = r.Header.Revision + 1
		}
	}
}

func (m *Mover) lose(err error) {
	m.doneOnce.Do(func() {
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		close(m.done)
		m.stop()
		m.c.moverMu.Lock()
		if m.c.mover == m {
			m.c.mover = nil
		}
		m.c.moverMu.Unlock()
	})
}

// Epoch returns the fencing token of this leadership: the election key's etcd create
// revision, greater for every later mover.
func (m *Mover) Epoch() uint64 { return m.epoch }

// Done is closed when the leadership is lost: the session's lease may have expired, the
// mover resigned, the client closed, or the election key was removed.
func (m *Mover) Done() <-chan struct{} { return m.done }

// Err returns nil while the leadership holds, and why it was lost afterwards (wrapping
// ErrNotMover). It also fails, wrapping ErrLeaseExpired, as soon as the session is no
// longer trusted, before the background check notices.
func (m *Mover) Err() error {
	select {
	case <-m.done:
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.err
	default:
	}
	if !m.s.trusted(m.c.now()) {
		return fmt.Errorf("coord: mover epoch %d: lease not trusted: %w (%w)", m.epoch, ErrLeaseExpired, ErrNotMover)
	}
	return nil
}

// Update is Client.Update that also requires this leadership to hold in etcd when the
// write commits: a mover that lost the election writes nothing and gets ErrNotMover.
func (m *Mover) Update(ctx context.Context, rev int64, p Placement) (int64, error) {
	if err := m.Err(); err != nil {
		return 0, err
	}
	guard := clientv3.Compare(clientv3.CreateRevision(m.key), "=", int64(m.epoch))
	return m.c.update(ctx, rev, p, []clientv3.Cmp{guard}, func() error {
		return fmt.Errorf("coord: mover epoch %d: election key %s is gone: %w", m.epoch, m.key, ErrNotMover)
	})
}

// Resign gives up the leadership so that another mover can take it at once; Done closes.
func (m *Mover) Resign(ctx context.Context) error {
	ctx, cancel := m.c.requestCtx(ctx)
	defer cancel()
	err := m.e.Resign(ctx)
	m.lose(fmt.Errorf("coord: mover epoch %d resigned: %w", m.epoch, ErrNotMover))
	if err != nil {
		return m.c.unavailable("resign mover", err)
	}
	return nil
}
