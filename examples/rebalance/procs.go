package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
	"github.com/shardkit/shard/rebalance"
)

// -procs mode: this process is the parent. It loads the data, starts etcd (unless -etcd
// names a cluster), writes the placement record, starts -procs application processes and one
// mover process (this binary with -role app or -role mover), kills random ones with SIGKILL
// and restarts them under -kill, stops the applications once the mover has migrated
// -shards -> -grow -> -shards, and verifies every row.

// procsDefaults are -users and -messages in -procs mode when not given: a run of about 20 s
// on SQLite or PostgreSQL, kills included.
const (
	procsUsers    = 400
	procsMessages = 100
	procsWriters  = 2 // in each application process
	procsReaders  = 2
)

// roleArgs are the flags that the parent passes to every child: the databases, the sizes,
// the placement record's etcd, its TLS files and user name, and prefix. The etcd password
// goes in the child's environment (childEnv), never on its command line.
func (c config) roleArgs(role string, proc int, endpoints []string, prefix, ackDir string) []string {
	args := []string{"-role", role, "-proc", strconv.Itoa(proc), "-etcd", strings.Join(endpoints, ","),
		"-prefix", prefix, "-ledger", ackDir, "-shards", strconv.Itoa(c.shards), "-grow", strconv.Itoa(c.grow),
		"-users", strconv.Itoa(c.users), "-messages", strconv.Itoa(c.messages),
		"-writers", strconv.Itoa(c.writers), "-readers", strconv.Itoa(c.readers), "-movers", strconv.Itoa(c.movers),
		"-ttl", c.ttl.String(), "-mover-pace", c.moverPace.String(), "-app-pause", c.appPause.String(),
		"-mover-yield", strconv.FormatFloat(c.moverYield, 'g', -1, 64)}
	args = append(args, c.etcdArgs()...)
	if c.pg != "" {
		args = append(args, "-pg", c.pg)
	} else {
		args = append(args, "-data", c.data)
	}
	return args
}

// parent runs the -procs scenario and prints its figures.
func parent(ctx context.Context, c config, out io.Writer) error {
	exe, err := executable()
	if err != nil {
		return err
	}
	seed := c.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r := rand.New(rand.NewPCG(seed, 0))
	fmt.Fprintf(out, "-procs %d -kill=%v -seed %d (the kills' schedule; pass -seed %d to replay it)\n", c.procs, c.kill, seed, seed)

	work, err := os.MkdirTemp("", "rebalance-procs-")
	if err != nil {
		return err
	}
	keep := false // the work directory is kept after a failure once loaded, for the ledgers
	defer func() {
		if keep {
			fmt.Fprintf(out, "kept %s (the ledgers, and the SQLite files unless -data) for a look\n", work)
		} else {
			os.RemoveAll(work)
		}
	}()
	if c.pg == "" && !c.dataSet {
		c.data = filepath.Join(work, "data")
	}
	ackDir := filepath.Join(work, "ledger")
	if err := os.Mkdir(ackDir, 0o755); err != nil {
		return err
	}

	endpoints := c.endpoints()
	parentRole := "parent"
	if len(endpoints) > 0 {
		fmt.Fprintf(out, "etcd: %s (-etcd)\n", strings.Join(endpoints, ","))
	} else {
		parentRole = "parent with etcd"
		eps, stop, err := embedded.Start(filepath.Join(work, "etcd"))
		if err != nil {
			return fmt.Errorf("embedded etcd: %w", err)
		}
		defer stop()
		endpoints = eps
		fmt.Fprintf(out, "etcd: embedded in this process at %s\n", strings.Join(endpoints, ","))
	}
	prefix := fmt.Sprintf("/shardkit/examples/rebalance/%d/", time.Now().UnixNano())
	cl, err := coord.Open(ctx, endpoints, prefix, c.access.options(coord.Options{TTL: c.ttl, Identity: "parent"}))
	if err != nil {
		return err
	}
	defer cl.Close()
	// etcd answers: only now are the databases touched.
	d, err := prepareProcs(ctx, c, out)
	if err != nil {
		return err
	}
	defer d.close()
	keep = true
	initial := coord.Placement{Layout: userLayout(c.shards)}
	if _, err := cl.Update(ctx, 0, initial); err != nil {
		return fmt.Errorf("write the placement record: %w", err)
	}
	fmt.Fprintf(out, "placement record %splacement: user_id %% %d\n", prefix, c.shards)

	cs := newChildren(exe, c.childEnv(), out)
	steps := &stepClock{}
	elected := make(chan struct{}, 1)
	allDone := make(chan struct{}, 1) // a mover incarnation found every step done
	rogue := newRogueTrial()
	gate := filepath.Join(work, "rogue-gate") // -rogue-mover: the held mover goes on once it exists
	cs.onLine = func(ch *child, line string) bool {
		signal := func(ch chan struct{}) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		if strings.HasPrefix(line, "elected") {
			signal(elected)
		}
		if ch.role == "mover" && line == "all steps done" {
			signal(allDone)
		}
		if h, ok := parseHold(line); ok && c.rogueMover && ch.role == "mover" {
			rogue.start(h, exe, c.childEnv(), c.roleArgs("rogue", 0, endpoints, prefix, ackDir), gate, cs.out)
		}
		steps.see(line)
		return true
	}
	var apps []*child
	for i := range c.procs {
		apps = append(apps, cs.start(fmt.Sprintf("app%d", i), "app", c.roleArgs("app", i, endpoints, prefix, ackDir)...))
	}
	// An application process ends only when asked to: before that, its end is a failure.
	appDone := make(chan error, c.procs)
	for _, a := range apps {
		go func() {
			err := <-a.finished
			if err == nil && !cs.isStopped() {
				err = fmt.Errorf("%s: exited with status 0 before it was asked to stop", a.name)
			}
			appDone <- err
		}()
	}
	failed := func(err error) error {
		return fmt.Errorf("an application process ended during the run: %w", err)
	}
	time.Sleep(c.idle) // idle latencies: no migration yet
	moverArgs := append(c.roleArgs("mover", 0, endpoints, prefix, ackDir), "-wait")
	if c.rogueMover {
		moverArgs = append(moverArgs, "-rogue-gate", gate)
	}
	mover := cs.start("mover", "mover", moverArgs...)

	// A second mover while the first holds the election must be refused.
	var refused bool
	select {
	case <-elected:
		var second string
		second, refused = secondMover(exe, c.childEnv(), c.roleArgs("mover", 1, endpoints, prefix, ackDir))
		fmt.Fprintln(out, second)
		// A mover that is done holds the election until told (its stdin closes): only now,
		// with the second mover tried, may it resign.
		hold, release := context.WithCancel(ctx)
		defer release()
		go func() {
			for {
				select {
				case <-allDone:
					cs.closeStdin(mover)
				case <-hold.Done():
					return
				}
			}
		}()
	case err := <-mover.finished:
		cs.killAll()
		return fmt.Errorf("the mover stopped before it was elected: %w", err)
	case err := <-appDone:
		cs.killAll()
		return failed(err)
	}

	stopKills := make(chan struct{})
	killsDone := make(chan struct{})
	moverKills := map[int]int{} // by step
	go func() {
		defer close(killsDone)
		if !c.kill {
			return
		}
		between := func() time.Duration { return c.killEvery/2 + time.Duration(r.Int64N(int64(c.killEvery))) }
		next, seen := time.Now().Add(between()), 0
		for {
			select {
			case <-stopKills:
				return
			case <-time.After(10 * time.Millisecond):
			}
			// The first kill of each step is the mover's, at a random moment of the step's
			// first firstKillWithin: every run then kills it in the middle of both migrations,
			// however fast they are. After maxMoverKills in a step only application
			// processes die, so that a slow machine's mover, killed again and again before
			// it gets far, still finishes.
			n, running := steps.current()
			if running && n > seen {
				seen, next = n, time.Now().Add(time.Duration(r.Int64N(int64(firstKillWithin))))
			}
			if time.Now().Before(next) {
				continue
			}
			next = time.Now().Add(between())
			var mover bool
			switch {
			case running && moverKills[n] == 0:
				mover = true
			case moverKills[n] < maxMoverKills:
				mover = r.IntN(3) == 0
			}
			victim := cs.kill(r, mover)
			if strings.HasPrefix(victim, "mover") {
				moverKills[n]++
			}
			if victim != "" {
				cs.out.printf("[parent] SIGKILL %s\n", victim)
			}
		}
	}()
	var runErr error
	appsLeft := len(apps)
	select {
	case runErr = <-mover.finished:
	case err := <-appDone:
		runErr, appsLeft = failed(err), appsLeft-1
	}
	close(stopKills)
	<-killsDone
	if runErr != nil {
		cs.killAll()
		if c.rogueMover {
			runErr = errors.Join(runErr, rogue.err(5*time.Second))
		}
		return runErr
	}
	time.Sleep(c.idle) // idle latencies again, on the final placement
	cs.stopApps()
	for range appsLeft {
		runErr = errors.Join(runErr, <-appDone)
	}
	if runErr != nil {
		return runErr
	}
	stats, err := readStats(ackDir) // every incarnation's figures
	if err != nil {
		return err
	}
	fig, err := mergeFigures(stats)
	if err != nil {
		return err
	}

	final, _, err := cl.Current()
	if err != nil {
		return err
	}
	if m := final.Migration; final.Layout.Shards != c.shards || m == nil || m.Phase != coord.PhaseDone {
		return fmt.Errorf("the mover exited 0 but the placement record says %d shards, migration %+v: %w", final.Layout.Shards, m, errState)
	}
	v, err := verifyProcs(ctx, d, newUserSharder(final.Layout.Shards), c.users, c.messages, ackDir)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	report, reportErr := standaloneVerify(ctx, c, d)
	kills, nkills := cs.killSummary()
	rows, took := steps.total()
	verdict := "OK"
	if !v.ok() || reportErr != nil || !report.clean() {
		verdict = "FAILED"
	}
	fmt.Fprintf(out, "\nverify: %d lost, %d duplicated, %d misplaced, %d lost updates, %d resurrected deletes; %d orphans; %d rows moved at %.0f rows/s; %d rows checked (%d users, %d messages, %d reactions; %d loaded; acknowledged %d inserts, %d updates, %d deletes; %d committed without an ack: %d inserts, %d updates, %d deletes; %d unknown); %d kills; %s\n",
		v.lost, v.duplicate, v.misplaced, v.lostUpdates, v.resurrected, v.orphans, rows, float64(rows)/max(took.Seconds(), 1e-9),
		v.rows, v.users, v.messages, v.reactions, v.loaded, v.acked, v.updates, v.deletes, v.unacked, v.unackedIns, v.unackedUpd, v.unackedDel, v.unknown, nkills, verdict)
	printReport(out, report, reportErr)
	fmt.Fprintf(out, "kills: %s\n", kills)
	printFigures(out, fig, cs, steps, parentRole, c.appPause)
	if !v.ok() {
		return errVerify
	}
	if reportErr != nil {
		return fmt.Errorf("standalone verification: %w", reportErr)
	}
	if !report.clean() {
		return fmt.Errorf("standalone verification: %d problems, %d stray rows: %w", len(report.Problems)+int(report.More), report.Stray, errVerify)
	}
	if err := checkApps(stats); err != nil {
		return err
	}
	if !refused {
		return fmt.Errorf("a second mover was not refused while the first held the election: %w", errChild)
	}
	if c.rogueMover {
		if err := rogue.err(rogueHoldMax); err != nil {
			return err
		}
	}
	keep = false
	return nil
}

// firstKillWithin is how soon after a step starts the mover is first killed, at random: a
// step on SQLite can take under 200 ms, and a later kill often found it over.
const firstKillWithin = 100 * time.Millisecond

// maxMoverKills bounds the kills of the mover in one step of a -kill run.
const maxMoverKills = 3

// secondMover starts a mover without -wait while one holds the election, and says what
// happened: it must exit 1 with coord's ErrBusy error.
func secondMover(exe string, env, args []string) (string, bool) {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	msg := strings.TrimSpace(string(b))
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Contains(msg, "a mover already runs") {
		return "second mover: refused, exit status 1: " + msg, true
	}
	return fmt.Sprintf("second mover: NOT refused as it should be (%v): %s", err, msg), false
}

// stepClock follows the mover's "step N: ..." and "step N done" lines across its
// incarnations: the rows each step planned, and the wall time from a step's first start to
// its end, kills and restarts included.
type stepClock struct {
	mu    sync.Mutex
	start map[int]time.Time
	end   map[int]time.Time
	rows  map[int]int64
	lines []string
}

func (s *stepClock) see(line string) {
	var n int
	var rows int64
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start == nil {
		s.start, s.end, s.rows = map[int]time.Time{}, map[int]time.Time{}, map[int]int64{}
	}
	now := time.Now()
	// A step ends with its "done" line, or, when the mover that recorded it done was killed
	// before it could print the line, when the next step starts or all are done.
	closeBefore := func(n int) {
		for k := range s.start {
			if _, ok := s.end[k]; !ok && k < n {
				s.end[k] = now
			}
		}
	}
	if k, err := fmt.Sscanf(line, "step %d: plan %d rows", &n, &rows); err == nil && k == 2 {
		if _, ok := s.start[n]; !ok {
			s.start[n], s.rows[n] = now, rows
		}
		closeBefore(n)
	}
	if k, err := fmt.Sscanf(line, "step %d done", &n); err == nil && k == 1 {
		if _, ok := s.end[n]; !ok {
			s.end[n] = now
		}
		s.lines = append(s.lines, line)
	}
	if line == "all steps done" {
		closeBefore(math.MaxInt)
	}
}

// current returns the last step started, and whether it is under way.
func (s *stepClock) current() (n int, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.start {
		n = max(n, k)
	}
	_, ended := s.end[n]
	return n, n > 0 && !ended
}

func (s *stepClock) total() (rows int64, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, t := range s.start {
		if e, ok := s.end[n]; ok {
			rows += s.rows[n]
			took += e.Sub(t)
		}
	}
	return rows, took
}

// parseStats parses "key=value ..." of a STATS line (an application process's figures file).
func parseStats(role, s string) map[string]string {
	m := map[string]string{"role": role}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// printFigures prints the foreground latencies of every incarnation of the application
// processes, by class, and the peak RSS of each role.
func printFigures(out io.Writer, f *figures, cs *children, steps *stepClock, parentRole string, pause time.Duration) {
	all, writes, reads, retries := &f.lat, f.writes, f.reads, f.retries
	apps, starts := cs.starts("app")
	missing := ""
	if n := starts - f.incarnations; n != 0 {
		missing = fmt.Sprintf(", %d of them without figures", n)
	}
	fmt.Fprintf(out, "foreground (all %d incarnations of the %d application processes%s; one killed loses its last %v at most): %d writes (%d updates, %d deletes), %d reads, %d retries after a fence\n",
		starts, apps, missing, statsInterval, writes, f.updates, f.deletes, reads, retries)
	if _, took := steps.total(); took > 0 {
		var during uint64
		for c := range classes {
			if c != classIdle {
				during += all.reads[c].n + all.writes[c].n
			}
		}
		fmt.Fprintf(out, "  during the migration: %.0f accesses/s (-app-pause %v)\n", float64(during)/took.Seconds(), pause)
	}
	for c := range classes {
		fmt.Fprintf(out, "  %-28s reads p50 %8v p99 %8v (%d)   writes p50 %8v p99 %8v (%d)\n", classNames[c]+":",
			round(all.reads[c].percentile(0.5)), round(all.reads[c].percentile(0.99)), all.reads[c].n,
			round(all.writes[c].percentile(0.5)), round(all.writes[c].percentile(0.99)), all.writes[c].n)
	}
	cs.notePeak(parentRole, vmHWM(os.Getpid()))
	cs.mu.Lock()
	var roles []string
	for role, b := range cs.peak {
		roles = append(roles, fmt.Sprintf("%s %.1f MiB", role, float64(b)/(1<<20)))
	}
	cs.mu.Unlock()
	slices.Sort(roles)
	fmt.Fprintf(out, "peak RSS (VmHWM, the highest incarnation of each role; the parent verifies): %s\n", strings.Join(roles, ", "))
	steps.mu.Lock()
	for _, l := range steps.lines {
		fmt.Fprintf(out, "mover: %s\n", l)
	}
	steps.mu.Unlock()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// checkApps fails the run if an application process saw an error or an anomaly.
func checkApps(stats []map[string]string) error {
	var errs, anomalies int64
	for _, s := range stats {
		errs += atoi(s["errors"])
		anomalies += atoi(s["anomalies"])
	}
	if anomalies > 0 {
		return fmt.Errorf("%d accesses saw less than their process had acknowledged (fewer messages, a message gone or with other content; printed above): %w", anomalies, errAnomaly)
	}
	if errs > 0 {
		return fmt.Errorf("the application processes met %d errors (printed above): %w", errs, errChild)
	}
	return nil
}

// verifyReport is rebalance's standalone verification report.
type verifyReport struct{ *rebalance.Report }

// clean says the migration left nothing wrong: no problem, and no stray row (the old copies
// are deleted once the migration has finished).
func (r verifyReport) clean() bool { return len(r.Problems) == 0 && r.More == 0 && r.Stray == 0 }

// standaloneVerify runs rebalance's standalone verification (Shared.Verify) of the last step
// over every user, as an operator would after the migration: the fences and the content sums
// of each moved user's rows, in the three tables, on both of its shards.
func standaloneVerify(ctx context.Context, c config, d *dbs) (verifyReport, error) {
	steps := procsSteps(c)
	last := len(steps) - 1
	store, err := openStore(ctx, d)
	if err != nil {
		return verifyReport{}, err
	}
	m, err := rebalance.NewShared(stepID(last, steps[last]), newUserSharder(steps[last][0]), newUserSharder(steps[last][1]), store, rebalance.SharedOptions{})
	if err != nil {
		return verifyReport{}, err
	}
	r, err := m.Verify(ctx, owners(c.users))
	return verifyReport{r}, err
}

// printReport prints what the standalone verification found.
func printReport(out io.Writer, r verifyReport, err error) {
	if err != nil {
		fmt.Fprintf(out, "standalone verification (rebalance Shared.Verify of the last step): FAILED: %v\n", err)
		return
	}
	verdict := "OK"
	if !r.clean() {
		verdict = "FAILED"
	}
	fmt.Fprintf(out, "standalone verification (rebalance Shared.Verify of the last step): %d users moved, %d rows on the shards that serve them, %d compared, %d stray, %d problems; %s\n",
		r.Owners, r.Rows, r.Compared, r.Stray, len(r.Problems)+int(r.More), verdict)
	for _, p := range r.Problems {
		fmt.Fprintf(out, "  user %s, shard %d, key %q: %s\n", p.Owner, p.Shard, p.Key, p.What)
	}
}
