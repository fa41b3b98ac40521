// Package coord keeps the placement in force in etcd, shared by every process that routes
// keys, and elects the one process that may move data between shards.
//
// The contract:
//
//   - One placement record, a JSON document under prefix+"placement", says which layout
//     every process routes by (strategy and parameters, pool membership or partition table)
//     and the state of the migration under way, if any. It carries a format version: a
//     record written by a newer format is refused whole with an error wrapping [ErrVersion],
//     never read in part.
//   - The record is versioned by its etcd revision. [Client.Update] is a compare-and-swap on
//     that revision: of two writers that read the same revision, exactly one wins; the other
//     gets an error wrapping [ErrConflict] (a [*ConflictError] naming the current revision and
//     the winner's identity) and writes nothing.
//   - Every [Client] watches the record and publishes an immutable [View] atomically; reads
//     ([Client.Current], [View.Current]) take no lock. The watch survives compaction and
//     server restarts by reading the record again.
//   - Every Client holds a session: an etcd lease kept alive in the background. Once the
//     lease may have expired (no keepalive answered within the TTL, measured on the monotonic
//     clock from the moment the last answered keepalive was sent), Current returns an error
//     wrapping [ErrLeaseExpired] until a new session is made and the record read again: a
//     process cut off from etcd stops routing by a placement it can no longer trust.
//   - At most one [Mover] holds the election under prefix+"mover/" at a time.
//     [Client.TryMover] fails at once with an error wrapping [ErrBusy] (a [*BusyError]
//     naming the holder) while another holds it; [Client.Campaign] waits. [Mover.Epoch], the
//     election key's create revision, is the fencing token: every later mover's is greater.
//     [Mover.Done] is closed when the leadership or the session is lost; when the mover's
//     process dies, its lease expires after the TTL and another mover can take over.
//
// The record only says which placement is in force and how far a migration got; it cannot
// stop a process that lost its session from writing to a shard (a lease is a promise about
// time, and processes pause). The fence that does stop it lives with the data, on each shard
// (see package rebalance): coord's epoch is the token those fences compare.
//
// All errors name the package ("coord: ...") and wrap one of the sentinels below.
package coord

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Sentinels that every error of this package wraps, for errors.Is.
var (
	// ErrInput: a bad argument (no endpoints, empty prefix, negative duration, an invalid
	// placement given to Update).
	ErrInput = errors.New("bad input")
	// ErrUnavailable: etcd did not answer within the dial timeout.
	ErrUnavailable = errors.New("etcd unavailable")
	// ErrNoRecord: there is no placement record under the prefix yet.
	ErrNoRecord = errors.New("no placement record")
	// ErrRecord: the stored record is not a valid placement of this format.
	ErrRecord = errors.New("invalid placement record")
	// ErrVersion: the stored record was written by a newer format than this build reads.
	ErrVersion = errors.New("placement record format too new")
	// ErrConflict: a compare-and-swap lost, the record is no longer at the given revision.
	ErrConflict = errors.New("placement record changed")
	// ErrLeaseExpired: this process's session lease may have expired; its view of the
	// placement is not trusted until the session is made again.
	ErrLeaseExpired = errors.New("session lease expired")
	// ErrBusy: another process holds the mover election.
	ErrBusy = errors.New("another mover holds the election")
	// ErrNotMover: the Mover lost its leadership (lease expired, resigned, key removed).
	ErrNotMover = errors.New("not the mover")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client closed")
)

// Defaults of [Options].
const (
	DefaultTTL         = 5 * time.Second
	DefaultDialTimeout = 5 * time.Second
)

// Options configure [Open]. A zero field means its default.
type Options struct {
	// TTL is the session lease's time to live (DefaultTTL), rounded up to whole seconds as
	// etcd counts them, at least 1 s. A keepalive is sent every TTL/3. A process cut off
	// from etcd refuses to answer Current once TTL has passed since the send of its last
	// answered keepalive; a dead mover is replaced about TTL after it died. etcd may grant
	// a longer TTL than asked (its minimum is 1.5 election timeouts); the client still
	// distrusts itself after the TTL it asked for, which is the safe side.
	TTL time.Duration
	// DialTimeout bounds the first contact with etcd in Open and every later request that
	// has no deadline of its own (DefaultDialTimeout).
	DialTimeout time.Duration
	// TLS, when not nil, is used to connect to the endpoints (https:// in etcd's terms).
	TLS *tls.Config
	// Username and Password authenticate to an etcd cluster with auth enabled.
	Username, Password string
	// Identity names this process in the record it writes and in the mover election
	// ("host/pid/start time" by default, as in "db7/4121/2026-11-23T14:05:09Z").
	Identity string
	// Logger receives the etcd client's logs; nil means none.
	Logger *zap.Logger
}

// Client is one process's connection to the placement record: its etcd client, its session
// lease and its watched view. All methods are safe for concurrent use.
type Client struct {
	etcd      *clientv3.Client
	endpoints []string
	prefix    string // ends in "/"
	key       string // prefix + "placement"
	identity  string
	ttl       time.Duration
	timeout   time.Duration

	base time.Time // monotonic origin of session deadlines

	view    atomic.Pointer[View]
	sess    atomic.Pointer[session]
	notifyM sync.Mutex
	notify  chan struct{} // closed and replaced on every published view

	moverMu     sync.Mutex
	mover       *Mover // the live Mover of this client, if any
	campaigning bool   // a Campaign of this client waits

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

// Open connects to etcd at endpoints, makes this process's session and reads the placement
// record under prefix (a "/" is appended when missing), then keeps the session alive and the
// view current in the background until Close. It fails with an error wrapping ErrInput for
// bad arguments and ErrUnavailable, naming the endpoints, when etcd does not answer within
// opts.DialTimeout or ctx. A missing record is not an error: Current then reports
// ErrNoRecord until one is written.
func Open(ctx context.Context, endpoints []string, prefix string, opts Options) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("coord: no etcd endpoints: %w", ErrInput)
	}
	for _, e := range endpoints {
		if strings.TrimSpace(e) == "" {
			return nil, fmt.Errorf("coord: empty etcd endpoint in %q: %w", endpoints, ErrInput)
		}
	}
	if prefix == "" {
		return nil, fmt.Errorf("coord: empty key prefix: the placement record needs a prefix of its own, such as \"/shard/app/\": %w", ErrInput)
	}
	if opts.TTL < 0 || opts.DialTimeout < 0 {
		return nil, fmt.Errorf("coord: negative TTL %v or dial timeout %v: %w", opts.TTL, opts.DialTimeout, ErrInput)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	ttl = (ttl + time.Second - 1) / time.Second * time.Second // whole seconds, rounded up
	timeout := opts.DialTimeout
	if timeout == 0 {
		timeout = DefaultDialTimeout
	}
	identity := opts.Identity
	if identity == "" {
		identity = defaultIdentity()
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: timeout,
		// gRPC pings find a connection that died silently, so that the client dials again
		// after a partition; etcd refuses pings more often than every 5 s by default.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		// Dial again soon after etcd comes back: gRPC's default backoff grows to 120 s,
		// far longer than a session lives.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: max(time.Second, ttl/3)},
			MinConnectTimeout: timeout,
		})},
		TLS:      opts.TLS,
		Username: opts.Username,
		Password: opts.Password,
		Logger:   logger,
	})
	if err != nil {
		return nil, fmt.Errorf("coord: connect to etcd %v: %v: %w", endpoints, err, ErrUnavailable)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		etcd: cli, endpoints: endpoints, prefix: prefix, key: prefix + "placement",
		identity: identity, ttl: ttl, timeout: timeout, base: time.Now(),
		notify: make(chan struct{}), ctx: cctx, cancel: cancel,
	}
	// The first session and read happen here, so that Open either fails clearly or returns a
	// client whose Current answers.
	octx, ocancel := context.WithTimeout(ctx, timeout)
	defer ocancel()
	s, err := c.startSession(octx, 1)
	if err == nil {
		c.sess.Store(s)
		err = c.reread(octx, s)
	}
	if err != nil {
		if s != nil {
			c.endSession(s)
		}
		cancel()
		cli.Close()
		return nil, c.unavailable("open", err)
	}
	c.wg.Add(1)
	go c.run(s)
	return c, nil
}

// unavailable wraps an etcd failure: ErrUnavailable when the cluster did not answer in time.
func (c *Client) unavailable(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("coord: %s: etcd at %v did not answer within %v: %v: %w", op, c.endpoints, c.timeout, err, ErrUnavailable)
	}
	return fmt.Errorf("coord: %s: etcd at %v: %v: %w", op, c.endpoints, err, ErrUnavailable)
}

// Close resigns the mover, if any, revokes the session lease and closes the connection.
// Current fails with ErrClosed afterwards.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.moverMu.Lock()
	m := c.mover
	c.moverMu.Unlock()
	if m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		m.Resign(ctx)
		cancel()
	}
	c.cancel()
	c.wg.Wait()
	if s := c.sess.Load(); s != nil {
		c.endSession(s)
	}
	c.publishNotify()
	return c.etcd.Close()
}

// Identity returns the name this process writes into the record and the election.
func (c *Client) Identity() string { return c.identity }

// Prefix returns the key prefix, ending in "/".
func (c *Client) Prefix() string { return c.prefix }

// TTL returns the session lease's time to live.
func (c *Client) TTL() time.Duration { return c.ttl }

// Etcd returns the underlying etcd client, for keys of the application's own. Closing it
// is Close's job.
func (c *Client) Etcd() *clientv3.Client { return c.etcd }

// defaultIdentity is "host/pid/start time", unique enough to tell processes apart in logs.
func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
}

// requestCtx bounds a request by the dial timeout when ctx has no deadline of its own.
func (c *Client) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}
