package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// children starts and supervises the -procs run's child processes (this same binary with a
// hidden -role flag), prefixes their output with their name, kills them with SIGKILL when
// asked and restarts them. The application processes stop when their stdin closes, so they
// also stop if the parent dies.
type children struct {
	exe string
	env []string // of every child: the etcd password travels here, not in the arguments
	out *lockedWriter
	// onLine sees every stdout line of a child before it is printed; it returns false for
	// lines not to print.
	onLine func(c *child, line string) bool

	mu      sync.Mutex
	all     []*child
	stopped bool
	kills   map[string]int
	peak    map[string]int64 // VmHWM of each role, the highest of all its incarnations
}

// child is one supervised process, started again after each kill.
type child struct {
	name, role string
	args       []string

	cmd      *exec.Cmd // of the incarnation running, nil between two
	stdin    io.WriteCloser
	starts   int
	killing  bool // the parent killed this incarnation: restart it
	ready    bool // this incarnation said it works ("working", "elected"): a kill now cuts work
	finished chan error
}

// lockedWriter serializes the lines of the parent and the children.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

func newChildren(exe string, env []string, out io.Writer) *children {
	return &children{exe: exe, env: env, out: &lockedWriter{w: out}, kills: map[string]int{}, peak: map[string]int64{}}
}

// start starts a supervised child; its finished channel gets nil when it exits with status
// 0 and was not killed by the parent, or the error of an exit the parent did not cause.
func (cs *children) start(name, role string, args ...string) *child {
	c := &child{name: name, role: role, args: args, finished: make(chan error, 1)}
	cs.mu.Lock()
	cs.all = append(cs.all, c)
	cs.mu.Unlock()
	go func() { c.finished <- cs.supervise(c) }()
	return c
}

func (cs *children) supervise(c *child) error {
	for {
		err := cs.runOnce(c)
		cs.mu.Lock()
		killed := c.killing
		c.killing, c.ready, c.cmd, c.stdin = false, false, nil, nil
		cs.mu.Unlock()
		var ee *exec.ExitError
		if c.role == "mover" && errors.As(err, &ee) && ee.ExitCode() == exitLostElection {
			cs.out.printf("[parent] the mover lost its election: starting another\n")
			killed = true
		}
		if !killed {
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			return nil
		}
		time.Sleep(restartDelay)
	}
}

// restartDelay is how long a killed process stays down: a supervisor's restart is not
// instant, and the gap lets the rest of the run see it gone.
const restartDelay = 150 * time.Millisecond

func (cs *children) runOnce(c *child) error {
	cmd := exec.Command(cs.exe, c.args...)
	cmd.Env = cs.env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cs.mu.Lock()
	if err := cmd.Start(); err != nil {
		cs.mu.Unlock()
		return err
	}
	c.cmd, c.stdin = cmd, stdin
	c.starts++
	if cs.stopped && c.role == "app" {
		stdin.Close() // restarted after the stop: it stops at once
	}
	cs.mu.Unlock()
	if c.starts > 1 {
		cs.out.printf("[%s] restarted, pid %d\n", c.name, cmd.Process.Pid)
	}
	go cs.watchMemory(c, cmd.Process.Pid)
	var wg sync.WaitGroup
	wg.Go(func() { cs.copyLines(c, stdout, true) })
	wg.Go(func() { cs.copyLines(c, stderr, false) })
	wg.Wait() // all output read, as cmd.Wait requires
	return cmd.Wait()
}

func (cs *children) copyLines(c *child, r io.Reader, stdout bool) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 16<<20) // a long line is printed whole, not cut
	for s.Scan() {
		line := s.Text()
		if stdout && (strings.HasPrefix(line, "working") || strings.HasPrefix(line, "elected")) {
			cs.mu.Lock()
			c.ready = true
			cs.mu.Unlock()
		}
		if stdout && cs.onLine != nil && !cs.onLine(c, line) {
			continue
		}
		cs.out.printf("[%s] %s\n", c.name, line)
	}
}

// watchMemory samples the child's peak RSS every 100 ms until it exits, so a process killed
// with SIGKILL still counts.
func (cs *children) watchMemory(c *child, pid int) {
	for {
		hwm := vmHWM(pid)
		if hwm == 0 {
			return // gone: a zombie has no VmHWM line
		}
		cs.notePeak(c.role, hwm)
		time.Sleep(100 * time.Millisecond)
	}
}

func (cs *children) notePeak(role string, hwm int64) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.peak[role] = max(cs.peak[role], hwm)
}

// kill sends SIGKILL to a child at work (started and said so: a mover elected, an
// application process working): the mover if mover is true and it is at work, else an
// application process chosen with r. It returns the victim's name, or "" if none is at work.
func (cs *children) kill(r *rand.Rand, mover bool) string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var apps, movers []*child
	for _, c := range cs.all {
		if c.cmd != nil && c.ready && !c.killing && !cs.stopped {
			if c.role == "mover" {
				movers = append(movers, c)
			} else {
				apps = append(apps, c)
			}
		}
	}
	running := apps
	if mover && len(movers) > 0 {
		running = movers
	}
	if len(running) == 0 {
		return ""
	}
	c := running[r.IntN(len(running))]
	c.killing = true
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.killing = false
		return ""
	}
	cs.kills[c.name]++
	return fmt.Sprintf("%s (pid %d)", c.name, c.cmd.Process.Pid)
}

// stopApps closes the stdin of every application process: each stops its workload, writes
// its figures and exits 0.
func (cs *children) stopApps() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	for _, c := range cs.all {
		if c.role == "app" && c.stdin != nil {
			c.stdin.Close()
		}
	}
}

// closeStdin closes the stdin of c's running incarnation, if any: a mover started with
// -wait then resigns and exits.
func (cs *children) closeStdin(c *child) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c.stdin != nil {
		c.stdin.Close()
	}
}

func (cs *children) isStopped() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.stopped
}

// killAll ends every child (after a failure): SIGKILL, no restart.
func (cs *children) killAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	for _, c := range cs.all {
		if c.cmd != nil {
			c.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
}

// starts returns how many children of role there are, and how many times they were
// started in all.
func (cs *children) starts(role string) (children, starts int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.all {
		if c.role == role {
			children++
			starts += c.starts
		}
	}
	return children, starts
}

// killSummary is "app0 2, app1 1, mover 3": how many times each child was killed.
func (cs *children) killSummary() (string, int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var parts []string
	total := 0
	for _, c := range cs.all {
		if n := cs.kills[c.name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.name, n))
			total += n
		}
	}
	if len(parts) == 0 {
		return "none", 0
	}
	return strings.Join(parts, ", "), total
}

// executable is this program's binary, which the children run.
func executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find this program's binary to start the processes: %w", err)
	}
	return exe, nil
}

var errChild = errors.New("a process failed")
