package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// -procs -rogue-mover: in the middle of the first step, the parent starts a second mover that
// bypasses the election, as an operator who starts the mover by hand by mistake would: it
// reads the migration under way from the placement record and runs it with the same options
// as the real mover, its election epoch included. The etcd election cannot refuse it (it never
// campaigns); the store must (rebalance.ErrMoverRunning), since the real mover's lease runs.
//
// So that the second mover comes while the first holds the migration, however fast the step,
// the real mover started with -rogue-gate holds step 1 at its first Progress call (its claim
// taken, some users moved, none in the middle of a move) until the parent has tried the rogue
// mover and created the gate file.

// exitRogueRefused is the exit status of a rogue mover that the store refused because
// another mover holds the migration: a *rebalance.MoverError naming it.
const exitRogueRefused = 4

// errRogueRefused ends a rogue mover that was refused; it exits with exitRogueRefused.
var errRogueRefused = errors.New("rogue mover refused")

// rogueHoldMax bounds how long the real mover holds step 1 for the rogue mover, should the
// parent never create the gate; rogueRunMax bounds a rogue mover that was not refused.
const (
	rogueHoldMax = time.Minute
	rogueRunMax  = 2 * time.Minute
)

// moverOptions are the options of the mover's Shared migration, with epoch as its election
// epoch: the real mover's, and the rogue mover's.
func moverOptions(c config, epoch uint64) rebalance.SharedOptions {
	return rebalance.SharedOptions{Token: epoch, Concurrency: c.movers, ChunkRows: 1000, Yield: c.moverYield, Progress: pace(c.moverPace)}
}

// holdForRogue wraps the real mover's Progress callback for step 1 when -rogue-gate is
// given: the first call says so ("step 1: holding for the rogue mover: pid P, epoch E") and
// waits until the gate file exists (ctx ends, or rogueHoldMax passes), then every call goes
// to next. Run makes its Progress calls one at a time, after a group's move: while it waits,
// the claim is held and renewed, and no user is between its shards.
func holdForRogue(ctx context.Context, gate string, epoch uint64, out io.Writer, next func(rebalance.Progress)) func(rebalance.Progress) {
	held := false
	return func(p rebalance.Progress) {
		if !held {
			held = true
			if _, err := os.Stat(gate); err != nil {
				start := time.Now()
				fmt.Fprintf(out, "step 1: holding for the rogue mover: pid %d, epoch %d\n", os.Getpid(), epoch)
				for ctx.Err() == nil && time.Since(start) < rogueHoldMax {
					if _, err := os.Stat(gate); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				fmt.Fprintf(out, "step 1: held %v for the rogue mover\n", time.Since(start).Round(time.Millisecond))
			}
		}
		if next != nil {
			next(p)
		}
	}
}

// rogueLine starts the one line a rogue mover prints on stdout.
func rogueLine(epoch uint64) string {
	return fmt.Sprintf("rogue mover (same epoch %d, no election): ", epoch)
}

// runRogue is the rogue mover (-role rogue): no election, the migration under way in the
// record, the same options and election epoch as the mover that runs it. It prints one
// line, and returns an error wrapping errRogueRefused if the store refused it as it must.
func runRogue(ctx context.Context, c config, cl *coord.Client, store *sqlstore.Store, out io.Writer) error {
	p, _, err := cl.Current()
	if err != nil {
		return err
	}
	m := p.Migration
	if m == nil || m.Phase != coord.PhaseMoving {
		return fmt.Errorf("rogue mover: the placement record holds no migration under way (%+v): %w", m, errState)
	}
	from, err := layoutShards(m.Before, c)
	if err != nil {
		return err
	}
	to, err := layoutShards(m.After, c)
	if err != nil {
		return err
	}
	sh, err := rebalance.NewShared(m.ID, newUserSharder(from), newUserSharder(to), store, moverOptions(c, m.Epoch))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rogueRunMax)
	defer cancel()
	start := time.Now()
	err = sh.Run(ctx, owners(c.users))
	var me *rebalance.MoverError
	if errors.Is(err, rebalance.ErrMoverRunning) && errors.As(err, &me) && me.Holder != "" {
		fmt.Fprintf(out, "%srefused: %v\n", rogueLine(m.Epoch), err)
		return fmt.Errorf("%w: %w", errRogueRefused, err)
	}
	st := sh.Stats()
	fmt.Fprintf(out, "%sNOT refused by the lease of the mover that runs it: Run of migration %s returned %v after %v, having moved %d users, %d rows\n",
		rogueLine(m.Epoch), m.ID, err, time.Since(start).Round(time.Millisecond), st.Moved, st.Rows)
	return err
}

// heldMover is the real mover that holds step 1 for the rogue mover, from its line.
type heldMover struct {
	pid   int
	epoch uint64
}

func parseHold(line string) (heldMover, bool) {
	var h heldMover
	n, err := fmt.Sscanf(line, "step 1: holding for the rogue mover: pid %d, epoch %d", &h.pid, &h.epoch)
	return h, err == nil && n == 2
}

// rogueTrial is the parent's side of -rogue-mover: it starts the rogue mover once, when the
// real mover first says it holds step 1, prints its verdict and opens the gate.
type rogueTrial struct {
	once    sync.Once
	done    chan struct{}
	line    string
	refused bool
}

func newRogueTrial() *rogueTrial { return &rogueTrial{done: make(chan struct{})} }

// start runs the rogue mover (exe with args and env) in the background, the first time only.
func (r *rogueTrial) start(h heldMover, exe string, env, args []string, gate string, out *lockedWriter) {
	r.once.Do(func() {
		go func() {
			defer close(r.done)
			r.line, r.refused = rogueMover(exe, env, args, h)
			out.printf("%s\n", r.line)
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				out.printf("[parent] cannot open the gate of the held mover (it goes on in %v): %v\n", rogueHoldMax, err)
			}
		}()
	})
}

// err says why the trial failed: the rogue mover never started, or was not refused. It waits
// up to wait for a rogue mover still running.
func (r *rogueTrial) err(wait time.Duration) error {
	select {
	case <-r.done:
	case <-time.After(wait):
		select {
		case <-r.done:
		default:
			return fmt.Errorf("-rogue-mover: no rogue mover was tried (the mover never held step 1 for it, or it still runs): %w", errChild)
		}
	}
	if !r.refused {
		return fmt.Errorf("-rogue-mover: the rogue mover was not refused by the store: %w", errChild)
	}
	return nil
}

// rogueMover runs the rogue mover while h holds step 1 and says what happened: it must exit
// with exitRogueRefused, its line saying the store refused it because a mover of its epoch
// runs the migration.
func rogueMover(exe string, env, args []string, h heldMover) (string, bool) {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var line string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(l, "rogue mover (") {
			line = l
		}
	}
	// Refused by the mover that holds the migration: h, or its successor if the kills took
	// h before the rogue read the record (then both carry the successor's epoch).
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == exitRogueRefused && strings.HasPrefix(line, "rogue mover (same epoch ") &&
		strings.Contains(line, "): refused: ") && strings.Contains(line, "a mover already runs it: ") {
		return line, true
	}
	all := strings.TrimSpace(stdout.String() + "\n" + stderr.String())
	return fmt.Sprintf("rogue mover: NOT refused as it should be while mover pid %d (epoch %d) held step 1 (%v): %s", h.pid, h.epoch, err, all), false
}
