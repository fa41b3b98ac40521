package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// View is one immutable snapshot of the placement record as a Client saw it. Views are
// published atomically as the watch delivers changes; reading one takes no lock.
type View struct {
	c          *Client
	gen        uint64 // the session that read it
	placement  Placement
	err        error // ErrNoRecord, ErrRecord or ErrVersion when the record is not usable
	modRev     int64 // the record's ModRevision: what Update compares; 0 when absent
	observedAt int64 // the etcd revision at which this view was current
}

// Current returns the snapshot's placement and the record's revision (its etcd
// ModRevision, the revision to pass to Update). It fails with an error wrapping
// ErrLeaseExpired while the client's session may have expired, or when the view was read by
// an earlier session (take a new one from Client.View); with ErrNoRecord when no record
// exists, ErrVersion or ErrRecord when the stored record cannot be read (with its revision,
// so an operator can overwrite it); ErrClosed after Close.
func (v *View) Current() (Placement, int64, error) {
	c := v.c
	if c.closed.Load() {
		return Placement{}, 0, fmt.Errorf("coord: %w", ErrClosed)
	}
	s := c.sess.Load()
	if s == nil || s.gen != v.gen || !s.trusted(c.now()) {
		return Placement{}, 0, fmt.Errorf("coord: placement not trusted: no keepalive of this process's lease was answered within its TTL of %v (etcd %v unreachable?), or the view is from an expired session: %w", c.ttl, c.endpoints, ErrLeaseExpired)
	}
	if v.err != nil {
		return Placement{}, v.modRev, v.err
	}
	return v.placement, v.modRev, nil
}

// Revision returns the etcd revision at which the view was current: every change of the
// record up to it is in the view.
func (v *View) Revision() int64 { return v.observedAt }

// View returns the newest published view, without a lock.
func (c *Client) View() *View { return c.view.Load() }

// Current is c.View().Current(): the placement in force, as this process last saw it.
func (c *Client) Current() (Placement, int64, error) { return c.View().Current() }

// Wait returns the first view whose Revision is at least rev (as Update returns it), once
// the watch delivers it, or ctx's error.
func (c *Client) Wait(ctx context.Context, rev int64) (*View, error) {
	for {
		c.notifyM.Lock()
		ch := c.notify
		c.notifyM.Unlock()
		if c.closed.Load() {
			return nil, fmt.Errorf("coord: wait for revision %d: %w", rev, ErrClosed)
		}
		if v := c.view.Load(); v.observedAt >= rev {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("coord: wait for revision %d (view at %d): %w", rev, c.view.Load().observedAt, ctx.Err())
		case <-ch:
		}
	}
}

func (c *Client) publishNotify() {
	c.notifyM.Lock()
	close(c.notify)
	c.notify = make(chan struct{})
	c.notifyM.Unlock()
}

// publish stores a view made from the record kv as of revision at, unless a newer view of the
// same session is already published. A record that is absent has modRev 0; one that is
// present may have an empty value (etcd gives nil for it), which is a bad record, as Get says.
func (c *Client) publish(s *session, kv []byte, modRev, at int64) {
	v := &View{c: c, gen: s.gen, modRev: modRev, observedAt: at}
	if modRev == 0 {
		v.err = fmt.Errorf("coord: no placement record at %s: %w", c.key, ErrNoRecord)
	} else if p, err := Decode(kv); err != nil {
		v.err = err
	} else {
		v.placement = p
	}
	for {
		old := c.view.Load()
		if old != nil && old.gen == v.gen && old.observedAt >= at {
			return
		}
		if c.view.CompareAndSwap(old, v) {
			break
		}
	}
	c.publishNotify()
}

// reread reads the record with a linearizable get and publishes it; it returns the etcd
// revision of the read.
func (c *Client) reread(ctx context.Context, s *session) error {
	r, err := c.etcd.Get(ctx, c.key)
	if err != nil {
		return err
	}
	if len(r.Kvs) == 0 {
		c.publish(s, nil, 0, r.Header.Revision)
	} else {
		c.publish(s, r.Kvs[0].Value, r.Kvs[0].ModRevision, r.Header.Revision)
	}
	return nil
}

// watch follows the record from the published view's revision until ctx ends, reading it
// again whenever the watch cannot continue (compaction, a lost leader, a restart).
func (c *Client) watch(ctx context.Context, s *session) {
	for ctx.Err() == nil {
		from := c.view.Load().observedAt + 1
		wch := c.etcd.Watch(clientv3.WithRequireLeader(ctx), c.key, clientv3.WithRev(from))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
					// history before our revision is gone: the current record is all we need
					c.retryReread(ctx, s)
				}
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					c.publish(s, nil, 0, ev.Kv.ModRevision)
				} else {
					c.publish(s, ev.Kv.Value, ev.Kv.ModRevision, ev.Kv.ModRevision)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.ttl / 10):
		}
	}
}

func (c *Client) retryReread(ctx context.Context, s *session) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		err := c.reread(rctx, s)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.ttl / 10):
		}
	}
}

// Get reads the record from etcd now (a linearizable read, not the view) and returns it
// with its revision. It fails with ErrNoRecord, ErrRecord or ErrVersion as Current does, and
// ErrUnavailable when etcd does not answer in time.
func (c *Client) Get(ctx context.Context) (Placement, int64, error) {
	ctx, cancel := c.requestCtx(ctx)
	defer cancel()
	r, err := c.etcd.Get(ctx, c.key)
	if err != nil {
		return Placement{}, 0, c.unavailable("get "+c.key, err)
	}
	if len(r.Kvs) == 0 {
		return Placement{}, 0, fmt.Errorf("coord: no placement record at %s: %w", c.key, ErrNoRecord)
	}
	p, err := Decode(r.Kvs[0].Value)
	return p, r.Kvs[0].ModRevision, err
}
