package coord

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// session is one etcd lease of this process and the deadline until which the process
// trusts it. A session, once lost, stays lost: the next one has a new generation, and
// views and movers of the old one are refused.
type session struct {
	gen   uint64
	lease clientv3.LeaseID
	s     *concurrency.Session
	// until is the trust deadline in nanoseconds since Client.base (monotonic): the send
	// time of the last keepalive that etcd answered, plus the TTL. etcd received that
	// keepalive after it was sent, so its own deadline is no earlier.
	until    atomic.Int64
	lost     chan struct{}
	lostOnce sync.Once
}

func (s *session) markLost() { s.lostOnce.Do(func() { close(s.lost) }) }

// trusted reports whether the session's lease is certainly alive at now (since base).
func (s *session) trusted(now time.Duration) bool {
	select {
	case <-s.lost:
		return false
	default:
	}
	return int64(now) < s.until.Load()
}

func (c *Client) now() time.Duration { return time.Since(c.base) }

// startSession grants a lease and starts the etcd concurrency session on it.
func (c *Client) startSession(ctx context.Context, gen uint64) (*session, error) {
	sent := c.now()
	g, err := c.etcd.Grant(ctx, int64(c.ttl/time.Second))
	if err != nil {
		return nil, err
	}
	cs, err := concurrency.NewSession(c.etcd, concurrency.WithLease(g.ID), concurrency.WithContext(c.ctx))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		c.etcd.Revoke(rctx, g.ID)
		cancel()
		return nil, err
	}
	s := &session{gen: gen, lease: g.ID, s: cs, lost: make(chan struct{})}
	s.until.Store(int64(sent + c.ttl))
	return s, nil
}

// endSession marks s lost and revokes its lease (best effort: an unreachable etcd lets it
// expire by itself).
func (c *Client) endSession(s *session) {
	s.markLost()
	s.s.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	c.etcd.Revoke(ctx, s.lease)
	cancel()
}

// run keeps a session alive and the view current until Close: it renews the lease every
// TTL/3, watches the record, and when the lease may have expired it ends the session, makes
// a new one and reads the record again.
func (c *Client) run(s *session) {
	defer c.wg.Done()
	for {
		c.sess.Store(s)
		wctx, stopWatch := context.WithCancel(c.ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			c.watch(wctx, s)
		}()
		c.keepAlive(s)
		stopWatch()
		<-watched
		if c.ctx.Err() != nil {
			return
		}
		c.endSession(s)
		s = c.reconnect(s.gen + 1)
		if s == nil {
			return
		}
	}
}

// keepAlive renews s until it is lost or the client closes. It returns when the lease may
// have expired: etcd said so, or no renewal was answered within the TTL.
func (c *Client) keepAlive(s *session) {
	tick := time.NewTicker(c.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-s.lost:
			return
		case <-s.s.Done():
			// the etcd client gave up the lease (it saw it expire); so do we
			s.markLost()
			return
		case <-tick.C:
		}
		sent := c.now()
		if !s.trusted(sent) {
			s.markLost()
			return
		}
		// A slow answer still helps while the lease is trusted: on a loaded machine a
		// round trip can take longer than the interval between keepalives.
		wait := max(c.ttl/3, time.Duration(s.until.Load())-sent)
		ctx, cancel := context.WithTimeout(c.ctx, wait)
		_, err := c.etcd.KeepAliveOnce(ctx, s.lease)
		cancel()
		switch {
		case err == nil:
			if u := int64(sent + c.ttl); u > s.until.Load() {
				s.until.Store(u)
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.markLost()
			return
		}
	}
}

// reconnect makes a new session and reads the record, retrying every TTL/3 until it works
// or the client closes (then it returns nil).
func (c *Client) reconnect(gen uint64) *session {
	for {
		ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
		s, err := c.startSession(ctx, gen)
		if err == nil {
			c.sess.Store(s)
			if err = c.reread(ctx, s); err != nil {
				c.endSession(s)
			}
		}
		cancel()
		if err == nil {
			return s
		}
		select {
		case <-c.ctx.Done():
			return nil
		case <-time.After(c.ttl / 3):
		}
	}
}
