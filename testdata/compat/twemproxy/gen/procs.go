package main

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// procs starts the servers and stops every one of them, whatever happens. gen.sh also runs
// this program as the first process of a private PID namespace, so the kernel kills anything
// left behind when it exits.
type procs struct {
	mu   sync.Mutex
	live map[*exec.Cmd]chan struct{} // closed when the process has exited
}

// start runs name with args in directory dir ("" = this one), output to logPath.
func (p *procs) start(dir, logPath string, name string, args ...string) (*exec.Cmd, chan struct{}, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// Pdeathsig: if this program dies, so do its servers (main locks its OS thread).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(done) }()
	p.mu.Lock()
	if p.live == nil {
		p.live = map[*exec.Cmd]chan struct{}{}
	}
	p.live[cmd] = done
	p.mu.Unlock()
	return cmd, done, nil
}

// stop ends one process: SIGTERM, then SIGKILL if it has not gone after 5 seconds.
func (p *procs) stop(cmd *exec.Cmd) {
	p.mu.Lock()
	done, ok := p.live[cmd]
	delete(p.live, cmd)
	p.mu.Unlock()
	if !ok {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (p *procs) stopAll() {
	p.mu.Lock()
	var cmds []*exec.Cmd
	for c := range p.live {
		cmds = append(cmds, c)
	}
	p.mu.Unlock()
	for _, c := range cmds {
		p.stop(c)
	}
}

// waitReady polls addr until it answers PING (or, for nutcracker, accepts a connection),
// failing early if the process exits.
func waitReady(addr string, done chan struct{}, ping bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("%s: the process exited before it was ready", addr)
		default:
		}
		if c, err := dial(addr); err == nil {
			if !ping {
				c.Close()
				return nil
			}
			r, err := c.do("PING")
			c.Close()
			if err == nil && r.status == "PONG" {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: not ready after 10s", addr)
}
