// Package redisproc starts and stops redis-server processes on 127.0.0.1 for the tests and
// the example program of this module.
package redisproc

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedis reports that redis-server is not installed.
var ErrNoRedis = errors.New("redis-server is not installed (apt-get install redis-server)")

// Server is a redis-server process on 127.0.0.1, without persistence.
type Server struct {
	Addr   string // 127.0.0.1:port
	bin    string
	dir    string
	port   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
}

// Start starts a redis-server at a random free port in 20000-60000, with dir as its working
// directory, and waits until it answers PING. It tries other ports when one is taken. On
// error nothing it started is left running.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for range 20 {
		port := strconv.Itoa(20000 + rand.IntN(40000))
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			continue // taken
		}
		l.Close()
		s := &Server{Addr: "127.0.0.1:" + port, bin: bin, dir: dir, port: port}
		switch err := s.Restart(ctx); {
		case err == nil:
			return s, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		// it could not listen there (taken since we looked): another port
	}
	return nil, errors.New("could not start redis-server on a free port in 20000-60000")
}

// Restart starts the server again at its port, after Stop (an empty server: nothing is
// saved), and waits until it answers PING.
func (s *Server) Restart(ctx context.Context) error {
	s.cmd = exec.Command(s.bin, "--bind", "127.0.0.1", "--port", s.port, "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(s.dir, "log"))
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { cmd.Wait(); close(exited) }(s.cmd, s.exited)
	if err := waitForPing(ctx, s.Addr, s.exited); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Stop kills the process and waits for it; a stopped server's Stop does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// waitForPing waits up to five seconds for the server at addr to answer PING, and gives up
// early if the process exits or ctx ends.
func waitForPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	for range 50 {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("redis-server did not answer")
}
