// Command rebalance runs the rebalancing post's [004] scenario on real databases: a messages
// table sharded by user_id % 5 grows to 10 shards and shrinks back, once in each mode of
// package rebalance, while writers and readers keep working; after each resize it verifies and
// prints that no message was lost, duplicated or left on the wrong shard.
//
// By default the shards are SQLite files in -data; with -pg they are PostgreSQL databases,
// one DSN per shard, and the control tables (marks, ledger, state) live in the first.
// -crash-after N kills the process (SIGKILL) the (N+1)th time it reaches -crash-point;
// running again with the same databases resumes, and the verification must pass.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

const usage = `Usage: rebalance [flags]

Runs the rebalancing post's [004] scenario on real databases: a messages table sharded by
user_id % 5 grows to 10 shards and shrinks back to 5, once with package rebalance's async
mover and once moving each user on its first access (lazy), while writer and reader
goroutines keep working. After each resize it verifies that no message was lost, duplicated
or left on the wrong shard, and prints what it found. Run it again to resume after a crash
or to do another round; it refuses databases that hold data it did not write.

[004] is «Ребалансировка данных при шардинге» ("Rebalancing data when sharding"), a Russian
blog post; the README's Sources section describes it.

The shards are SQLite files in -data (created on the first run), or with -pg one PostgreSQL
database per shard. Progress bars go to stderr when it is a terminal.

With -procs N (or -kill, which means -procs 3) it runs 5 -> 10 -> 5 across processes: N
application processes and one mover process (this program, started again) share only the
databases and a placement record in etcd (run inside this process, or the cluster -etcd
names, reached with TLS and auth by the -etcd-* flags as etcdctl's); -kill kills random
ones with SIGKILL and restarts them. Its data is a chat in three tables
that move together, linked by foreign keys: users (with a balance), their messages and the
reactions to them. It loads fresh data each time (400 users of 100 messages, a reaction to
every 4th, 2 writers and 2 readers a process, unless given; SQLite in a temporary directory
unless -data is given); the writers add to balances, insert, update and delete messages
and reactions (a message's go with it), and keep a ledger of what was acknowledged. It ends with one line that compares every row with
the ledger: the rows lost, duplicated and misplaced, the updates lost, the deletes undone,
the broken foreign keys, and the rows moved per second; then package rebalance's standalone
verification of the last step.

Flags:
`

type config struct {
	data, pg            string
	shards, grow, users int
	messages            int
	writers, readers    int
	movers              int
	work                time.Duration
	crashAfter          int64
	crashPoint          string
	dataSet             bool // -data was given: -procs keeps its SQLite files there

	// -procs mode (procs.go) and its children's hidden flags (roles.go).
	procs                int
	kill                 bool
	seed                 uint64
	etcd                 string
	rows                 int
	killEvery, idle, ttl time.Duration
	moverPace            time.Duration
	appPause             time.Duration
	moverYield           float64
	role, prefix, ledger string
	proc                 int
	wait                 bool
	rogueMover           bool   // -rogue-mover (rogue.go)
	rogueGate            string // hidden: the real mover holds step 1 until this file exists

	// -etcd-cacert, -etcd-cert, -etcd-key, -etcd-user (etcdauth.go), and what they resolve to.
	etcdCACert, etcdCert, etcdKey, etcdUser string
	access                                  etcdAccess

	// progress, if not nil, is where progress bars are drawn: stderr when it is a terminal.
	progress io.Writer
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage): // the flag package has printed it, and the usage
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "rebalance example:", err)
		os.Exit(2)
	}
	if isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd()) {
		c.progress = os.Stderr
	}
	run := run
	switch {
	case c.role != "":
		run = runRole
	case c.procs > 0:
		run = parent
	}
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rebalance example:", err)
		if errors.Is(err, errLostElection) {
			os.Exit(exitLostElection)
		}
		if errors.Is(err, errRogueRefused) {
			os.Exit(exitRogueRefused)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("bad usage")

// parseFlags parses the command line; -h prints the usage to output and returns flag.ErrHelp.
func parseFlags(args []string, output io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("rebalance", flag.ContinueOnError)
	fs.SetOutput(output)
	hidden := map[string]bool{"role": true, "proc": true, "prefix": true, "ledger": true, "wait": true, "rogue-gate": true}
	fs.Usage = func() {
		fmt.Fprint(output, usage)
		all := flag.NewFlagSet("rebalance", flag.ContinueOnError) // the flags without the hidden ones
		all.SetOutput(output)
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden[f.Name] {
				all.Var(f.Value, f.Name, f.Usage)
			}
		})
		all.PrintDefaults()
	}
	fs.StringVar(&c.data, "data", "data", "directory of the SQLite shard files (ignored with -pg); its parent must exist")
	fs.StringVar(&c.pg, "pg", "", "comma-separated PostgreSQL DSNs, one per shard, max(-shards, -grow) of them; the control tables go to the first")
	fs.IntVar(&c.shards, "shards", 5, "shards before growing (the rebalancing post [004]: 5)")
	fs.IntVar(&c.grow, "grow", 10, "shards after growing (the rebalancing post [004]: 10)")
	fs.IntVar(&c.users, "users", 200, "users, with IDs 1..users, loaded on the first run")
	fs.IntVar(&c.messages, "messages", 10, "messages per user loaded on the first run")
	fs.IntVar(&c.writers, "writers", 4, "goroutines writing messages during each resize")
	fs.IntVar(&c.readers, "readers", 4, "goroutines reading users during each resize")
	fs.IntVar(&c.movers, "movers", 4, fmt.Sprintf("users moved at once by the mover, at most %d", rebalance.MaxConcurrency))
	fs.DurationVar(&c.work, "work", 300*time.Millisecond, "in lazy mode, how long the workload runs (moving users on first access) before the mover sweeps the rest")
	fs.Int64Var(&c.crashAfter, "crash-after", 0, "if N > 0, kill this process (SIGKILL, no cleanup) the (N+1)th time this run reaches -crash-point")
	fs.StringVar(&c.crashPoint, "crash-point", pointCopied, "where to kill: a move's copy, copied, marked or deleted point, or written: a message inserted on its shard, not yet in the ledger")
	fs.IntVar(&c.procs, "procs", 0, "if N > 0, run N application processes and a mover process (this program, started again) that share the databases through etcd; -kill alone means -procs 3")
	fs.BoolVar(&c.kill, "kill", false, "with -procs: kill random processes, the mover included, with SIGKILL at random moments and restart them")
	fs.Uint64Var(&c.seed, "seed", 0, "with -kill: the seed of the kills' schedule (0: from the clock; the run prints it)")
	fs.DurationVar(&c.killEvery, "kill-every", time.Second, "with -kill: the mean time between two kills (uniform in [d/2, 3d/2])")
	fs.StringVar(&c.etcd, "etcd", "", "with -procs: comma-separated endpoints of an etcd cluster for the placement record (default: an etcd embedded in this process on 127.0.0.1)")
	fs.StringVar(&c.etcdCACert, "etcd-cacert", "", "with -etcd: verify the etcd servers' certificates with this CA bundle (PEM), as etcdctl --cacert")
	fs.StringVar(&c.etcdCert, "etcd-cert", "", "with -etcd: identify this program to etcd with this TLS client certificate (PEM), as etcdctl --cert")
	fs.StringVar(&c.etcdKey, "etcd-key", "", "with -etcd: the key of -etcd-cert (PEM), as etcdctl --key")
	fs.StringVar(&c.etcdUser, "etcd-user", "", "with -etcd: name:password for etcd auth, as etcdctl --user; a name alone takes the password from $"+passwordEnv)
	fs.IntVar(&c.rows, "rows", 0, fmt.Sprintf("with -procs: messages loaded in all, -messages = rows / -users (default %d users x %d messages)", procsUsers, procsMessages))
	fs.DurationVar(&c.idle, "idle", time.Second, "with -procs: how long the application processes run before the mover starts and after it ends (the idle latencies)")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "with -procs: the etcd session lease of each process; a killed mover is replaced about this long after its death")
	fs.DurationVar(&c.appPause, "app-pause", defaultAppPause, "with -procs: each writer and reader of an application process pauses this long between two accesses (the foreground's rate)")
	fs.Float64Var(&c.moverYield, "mover-yield", 0, fmt.Sprintf("with -procs: after each chunk the mover copies or deletes, it idles this many times as long as the chunk took (rebalance.SharedOptions.Yield, at most %d): on SQLite it leaves the files' write lock to the application", rebalance.MaxYield))
	fs.DurationVar(&c.moverPace, "mover-pace", 0, "with -procs: the mover pauses this long after each user it moves, so that the kills of a small run land in the middle of its moves")
	fs.BoolVar(&c.rogueMover, "rogue-mover", false, "with -procs: in the middle of the first migration, start a second mover that bypasses the election with the mover's options and election epoch (an operator's mistake), and fail unless the store refuses it (rebalance.ErrMoverRunning); the mover holds step 1 until it was tried, which counts in its rows/s")
	fs.StringVar(&c.role, "role", "", "hidden: app, mover or rogue, a child process of -procs")
	fs.IntVar(&c.proc, "proc", 0, "hidden: the number of an application process")
	fs.StringVar(&c.prefix, "prefix", "", "hidden: the placement record's etcd key prefix")
	fs.StringVar(&c.ledger, "ledger", "", "hidden: the directory of the application processes' ledgers")
	fs.BoolVar(&c.wait, "wait", false, "hidden: a mover started by the -procs parent: it waits for the election instead of failing with ErrBusy, and stops when its stdin ends")
	fs.StringVar(&c.rogueGate, "rogue-gate", "", "hidden: with -rogue-mover, the mover holds step 1 at its first user until this file exists")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.dataSet = set["data"]
	if c.kill && c.procs == 0 {
		c.procs = 3
	}
	if c.procs > 0 && c.role == "" {
		if !set["users"] {
			c.users = procsUsers
		}
		if !set["messages"] {
			c.messages = procsMessages
		}
		if !set["writers"] {
			c.writers = procsWriters
		}
		if !set["readers"] {
			c.readers = procsReaders
		}
		if c.rows > 0 {
			c.messages = c.rows / c.users
		}
	}
	if err := c.check(); err != nil {
		return c, err
	}
	var err error
	c.access, err = loadEtcdAccess(c, os.Getenv)
	return c, err
}

// check validates the flags before any database is opened.
func (c config) check() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"-shards", c.shards}, {"-grow", c.grow}} {
		if _, err := shard.NewModulo(f.n); err != nil {
			return fmt.Errorf("%s %d: %w", f.name, f.n, err)
		}
	}
	if c.shards == c.grow {
		return fmt.Errorf("-shards and -grow are both %d: nothing would move", c.shards)
	}
	if max(c.shards, c.grow) > 64 {
		return fmt.Errorf("-shards %d -grow %d: this example opens one database per shard and stops at 64", c.shards, c.grow)
	}
	if c.users < 1 || c.users > 1_000_000 || c.messages < 0 || c.messages > 100_000 {
		return fmt.Errorf("-users %d -messages %d: want users in [1, 1000000] and messages in [0, 100000]", c.users, c.messages)
	}
	if c.writers < 0 || c.readers < 0 || c.movers < 1 || c.movers > rebalance.MaxConcurrency || c.crashAfter < 0 {
		return fmt.Errorf("-writers %d -readers %d -movers %d -crash-after %d: want >= 0, >= 0, in [1, %d], >= 0",
			c.writers, c.readers, c.movers, c.crashAfter, rebalance.MaxConcurrency)
	}
	switch c.crashPoint {
	case pointCopy, pointCopied, pointMarked, pointDeleted, pointWritten:
	default:
		return fmt.Errorf("-crash-point %q: want copy, copied, marked, deleted or written", c.crashPoint)
	}
	if c.work < 0 {
		return fmt.Errorf("-work %v: want >= 0", c.work)
	}
	if err := c.checkProcs(); err != nil {
		return err
	}
	if c.pg != "" {
		if n := len(c.dsns()); n != max(c.shards, c.grow) {
			return fmt.Errorf("-pg has %d DSNs, -shards %d -grow %d needs %d: one database per shard", n, c.shards, c.grow, max(c.shards, c.grow))
		}
	}
	return nil
}

func (c config) dsns() []string {
	var out []string
	for _, d := range strings.Split(c.pg, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// userSharder routes a user as the rebalancing post [004] does, by user_id % n
// (Modulo.LocateID); the owners of package rebalance are strings, so it parses the decimal ID
// first. The example's owners are always user IDs; anything else is hashed, as Modulo.Locate
// does.
type userSharder struct{ *shard.Modulo }

func (u userSharder) Locate(owner string) int {
	id, err := strconv.ParseUint(owner, 10, 64)
	if err != nil {
		return u.Modulo.Locate(owner)
	}
	return u.LocateID(id)
}

func newUserSharder(n int) userSharder {
	m, err := shard.NewModulo(n)
	if err != nil {
		panic(err) // unreachable: config.check validated n
	}
	return userSharder{m}
}

var errVerify = errors.New("verification failed")
