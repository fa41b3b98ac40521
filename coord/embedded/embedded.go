// Package embedded starts a single-member etcd server for tests, examples and one-machine
// deployments: in this process (Start, with go.etcd.io/etcd/server/v3/embed) or as a child
// process of an etcd binary such as Debian's /usr/bin/etcd (StartProcess). Both listen on
// 127.0.0.1 only, on free ports, keep their data in the given directory, and log errors only.
package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ErrStart is wrapped by every error of this package.
var ErrStart = errors.New("etcd did not start")

// StartTimeout bounds how long Start and StartProcess wait for the server to serve.
const StartTimeout = 30 * time.Second

// attempts is how often a start is retried when another process took a port between the
// moment it was found free and the moment etcd bound it.
const attempts = 5

// Start runs an etcd server in this process with its data in dir (created if missing) and
// returns its client endpoints ("http://127.0.0.1:PORT") and a stop function that shuts it
// down and waits for it. Stop does not remove dir.
func Start(dir string) (endpoints []string, stop func(), err error) {
	for range attempts {
		endpoints, stop, err = start(dir, "")
		if err == nil || !isAddrInUse(err) {
			return endpoints, stop, err
		}
	}
	return nil, nil, err
}

// StartAt is Start with the client endpoint on a given address, "127.0.0.1:PORT": to
// restart a server stopped a moment ago on the endpoint its clients know.
func StartAt(dir, clientAddr string) (endpoints []string, stop func(), err error) {
	host, _, err := net.SplitHostPort(clientAddr)
	if err != nil || host != "127.0.0.1" {
		return nil, nil, fmt.Errorf("embedded: client address %q is not 127.0.0.1:PORT: %w", clientAddr, ErrStart)
	}
	for range attempts {
		endpoints, stop, err = start(dir, clientAddr)
		if err == nil || !isAddrInUse(err) {
			return endpoints, stop, err
		}
		time.Sleep(100 * time.Millisecond) // the port may still be held by the old server
	}
	return nil, nil, err
}

func start(dir, clientAddr string) ([]string, func(), error) {
	cu, pu, err := freeURLs()
	if err != nil {
		return nil, nil, err
	}
	if clientAddr != "" {
		cu.Host = clientAddr
	}
	cfg := embed.NewConfig()
	cfg.Name = "coord"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.ListenMetricsUrls = nil
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded: start etcd in %s on %s: %w: %w", dir, cu.Host, err, ErrStart)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, nil, fmt.Errorf("embedded: etcd in %s on %s: %w: %w", dir, cu.Host, err, ErrStart)
	case <-time.After(StartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, nil, fmt.Errorf("embedded: etcd in %s on %s not ready after %v: %w", dir, cu.Host, StartTimeout, ErrStart)
	}
	return []string{cu.String()}, e.Close, nil
}

// StartProcess runs the etcd binary (Debian's /usr/bin/etcd, say) as a child process with
// its data in dir, and returns its client endpoints and a stop function that kills it and
// waits. It fails if the server does not answer within StartTimeout; the error then holds
// the end of the server's output.
func StartProcess(binary, dir string) (endpoints []string, stop func(), err error) {
	for range attempts {
		endpoints, stop, err = startProcess(binary, dir)
		if err == nil || !isAddrInUse(err) {
			return endpoints, stop, err
		}
	}
	return nil, nil, err
}

func startProcess(binary, dir string) ([]string, func(), error) {
	cu, pu, err := freeURLs()
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("embedded: %w: %w", err, ErrStart)
	}
	var out lockedBuffer
	cmd := exec.Command(binary,
		"--name", "coord",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", cu.String(), "--advertise-client-urls", cu.String(),
		"--listen-peer-urls", pu.String(), "--initial-advertise-peer-urls", pu.String(),
		"--initial-cluster", "coord="+pu.String(),
		"--log-level", "error",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("embedded: run %s: %w: %w", binary, err, ErrStart)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	endpoints := []string{cu.String()}
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case err := <-exited:
			exited <- err
			return nil, nil, fmt.Errorf("embedded: %s exited: %v: %s: %w", binary, err, tail(out.bytes()), ErrStart)
		default:
		}
		if ping(endpoints) == nil {
			return endpoints, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("embedded: %s on %s not ready after %v: %s: %w", binary, cu.Host, StartTimeout, tail(out.bytes()), ErrStart)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ping asks the server for a key, which needs a leader.
func ping(endpoints []string) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c.Get(ctx, "health")
	return err
}

// freeURLs returns a client and a peer URL on 127.0.0.1 with ports that were free a moment
// ago (the callers retry when one was taken since).
func freeURLs() (client, peer url.URL, err error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, fmt.Errorf("embedded: find a free port: %w: %w", err, ErrStart)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	mk := func(p int) url.URL {
		return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))}
	}
	return mk(ports[0]), mk(ports[1]), nil
}

func isAddrInUse(err error) bool {
	return bytes.Contains([]byte(err.Error()), []byte("address already in use"))
}

// lockedBuffer collects the child's output, written by exec's copying goroutines while
// the start loop may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}
