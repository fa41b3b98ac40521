package coord

import (
	"context"
	"fmt"
	"sync"

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
	if c.mover != nil {
		return nil, &BusyError{Holder: c.identity + " (this client)", Epoch: c.mover.epoch}
	}
	ctx, cancel := c.requestCtx(ctx)
	defer cancel()
	pfx := c.moverPrefix() + "/"
	key := fmt.Sprintf("%s%x", pfx, s.lease)
	first := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
	r, err := c.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, c.identity, clientv3.WithLease(s.lease)), first).
		Else(first).
		Commit()
	if err != nil {
		return nil, c.unavailable("mover election", err)
	}
	owner := r.Responses[len(r.Responses)-1].GetResponseRange().Kvs[0]
	if string(owner.Key) != key {
		if r.Succeeded {
			dctx, dcancel := context.WithTimeout(context.Background(), c.timeout)
			c.etcd.Delete(dctx, key)
			dcancel()
		}
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
	defer c.moverMu.Unlock()
	if c.mover != nil {
		return nil, &BusyError{Holder: c.identity + " (this client)", Epoch: c.mover.epoch}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	e := concurrency.NewElection(s.s, c.moverPrefix())
	if err := e.Campaign(ctx, c.identity); err != nil {
		select {
		case <-s.lost:
			return nil, fmt.Errorf("coord: campaign for mover: session lost: %w", ErrLeaseExpired)
		default:
		}
		return nil, fmt.Errorf("coord: campaign for mover: %w", err)
	}
	return c.startMover(s, e, e.Key(), e.Rev()), nil
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
	wch := c.etcd.Watch(ctx, key, clientv3.WithRev(rev))
	go func() {
		for {
			select {
			case <-s.lost:
				m.lose(fmt.Errorf("coord: mover epoch %d: this process's lease expired: %w", m.epoch, ErrNotMover))
				return
			case <-ctx.Done():
				m.lose(fmt.Errorf("coord: mover epoch %d: resigned or client closed: %w", m.epoch, ErrNotMover))
				return
			case r, ok := <-wch:
				if !ok {
					wch = c.etcd.Watch(ctx, key, clientv3.WithRev(rev))
					continue
				}
				for _, ev := range r.Events {
					if ev.Type == clientv3.EventTypeDelete {
						m.lose(fmt.Errorf("coord: mover epoch %d: election key %s was deleted: %w", m.epoch, key, ErrNotMover))
						return
					}
				}
			}
		}
	}()
	return m
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
