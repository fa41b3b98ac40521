package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
)

func small(dir string) config {
	return config{data: dir, shards: 5, grow: 10, users: 30, messages: 3, writers: 2, readers: 2,
		movers: 2, work: 20 * time.Millisecond, crashPoint: pointCopied}
}

// TestRoundAndBadState runs one round on SQLite, then checks that databases in a state the
// example did not leave are refused without being changed.
func TestRoundAndBadState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(ctx, small(dir), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), "  OK\n"); got != len(phases) {
		t.Fatalf("%d verifications passed, want %d:\n%s", got, len(phases), out.String())
	}

	other := small(dir)
	other.users = 31
	if err := run(ctx, other, &out); err == nil || !strings.Contains(err.Error(), "were loaded with -shards 5 -grow 10 -users 30") {
		t.Errorf("run with other flags: %v, want a refusal", err)
	}

	d, err := openSQLite(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.control.Exec("INSERT INTO rebalance_marks (migration, owner, mark) VALUES ('someone-else', '7', 2)")
	d.close()
	if err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, small(dir), &out); err == nil || !strings.Contains(err.Error(), `marks of migration "someone-else", but no migration is under way`) {
		t.Errorf("run with foreign marks: %v, want a refusal", err)
	}
}

// TestForeignData checks that a messages table the example did not load is left alone.
func TestForeignData(t *testing.T) {
	dir := t.TempDir()
	d, err := openSQLite(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.shards[3].Exec("CREATE TABLE messages (id BIGINT); INSERT INTO messages VALUES (1)")
	d.close()
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), small(dir), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "shard 3: table messages has 1 rows but this example has no state there") {
		t.Errorf("run on foreign data: %v, want a refusal", err)
	}
}

// TestMain runs the example's main instead of the tests when REBALANCE_EXAMPLE_MAIN is set:
// the tests start it in a child process that can be killed for real.
func TestMain(m *testing.M) {
	if os.Getenv("REBALANCE_EXAMPLE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// smallArgs are the flags of small(dir).
func smallArgs(dir string, more ...string) []string {
	return append([]string{"-data", dir, "-users", "30", "-messages", "3", "-writers", "2", "-readers", "2",
		"-movers", "2", "-work", "20ms"}, more...)
}

// runKilled runs the example with args in a child process and requires that SIGKILL ended
// it; it returns the child's output.
func runKilled(t *testing.T, args ...string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the crash points kill with SIGKILL")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "REBALANCE_EXAMPLE_MAIN=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the example with %q ended with %v, want killed:\n%s", args, err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the example with %q ended with %v, want SIGKILL:\n%s", args, err, out)
	}
	return string(out)
}

// onDisk is what the SQLite files of dir hold, read directly.
type onDisk struct {
	ledger map[int64]int64           // messages per user in the ledger
	shards []map[int64]int64         // messages per user on each shard
	marks  map[string]rebalance.Mark // of every migration, by owner
	phase  int
}

func readDisk(t *testing.T, dir string) onDisk {
	t.Helper()
	var opened []*sql.DB
	defer func() { // before the test damages a file
		for _, db := range opened {
			db.Close()
		}
	}()
	open := func(name string) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, name)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, db)
		return db
	}
	// counts runs a query of pairs of numbers; nil if it fails, as on a truncated shard.
	counts := func(db *sql.DB, q string) map[int64]int64 {
		rows, err := db.Query(q)
		if err != nil {
			return nil
		}
		defer rows.Close()
		m := map[int64]int64{}
		for rows.Next() {
			var k, n int64
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			m[k] = n
		}
		return m
	}
	control := open("control.db")
	d := onDisk{ledger: counts(control, "SELECT user_id, count FROM example_ledger"), marks: map[string]rebalance.Mark{}}
	for i := range 10 {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("shard%d.db", i))); err != nil {
			d.shards = append(d.shards, nil)
			continue
		}
		d.shards = append(d.shards, counts(open(fmt.Sprintf("shard%d.db", i)), "SELECT user_id, COUNT(*) FROM messages GROUP BY user_id"))
	}
	for owner, mark := range counts(control, "SELECT CAST(owner AS INTEGER), mark FROM rebalance_marks") {
		d.marks[strconv.FormatInt(owner, 10)] = rebalance.Mark(mark)
	}
	if err := control.QueryRow("SELECT phase FROM example_state").Scan(&d.phase); err != nil {
		t.Fatal(err)
	}
	return d
}

// copied returns a user of the first phase (5 -> 10 shards) marked Copied whose old copy is
// still there: the one the kill stopped, and not one whose old copy another mover had
// deleted when the kill landed.
func (d onDisk) copied(t *testing.T) int64 {
	t.Helper()
	for owner, mark := range d.marks {
		id, _ := strconv.ParseInt(owner, 10, 64)
		if mark == rebalance.Copied && d.shards[id%5][id] > 0 {
			return id
		}
	}
	t.Fatalf("no user marked copied with its old copy: %v", d.marks)
	return 0
}

// TestKillBetweenInsertAndLedger kills the example (SIGKILL) right after a writer committed a
// message on its shard and before it recorded it in the ledger; the next run records that
// message and finishes the round, every verification passing.
func TestKillBetweenInsertAndLedger(t *testing.T) {
	dir := t.TempDir()
	out := runKilled(t, smallArgs(dir, "-crash-after", "3", "-crash-point", "written")...)
	if !strings.Contains(out, `killing the process at crash point "written", time 4`) {
		t.Fatalf("not killed at the written point:\n%s", out)
	}
	d := readDisk(t, dir)
	unrecorded := 0
	for user, n := range d.ledger {
		most := int64(0)
		for _, s := range d.shards {
			most = max(most, s[user])
		}
		switch {
		case most == n+1:
			unrecorded++
		case most != n:
			t.Fatalf("user %d: %d messages in the ledger, up to %d on a shard: want one more at most", user, n, most)
		}
	}
	if unrecorded == 0 {
		t.Fatal("the kill left no message written but unrecorded")
	}

	var log bytes.Buffer
	if err := run(context.Background(), small(dir), &log); err != nil {
		t.Fatalf("resume: %v\n%s", err, log.String())
	}
	if want := fmt.Sprintf("ledger: recorded %d messages", unrecorded); !strings.Contains(log.String(), want) {
		t.Errorf("want %q in:\n%s", want, log.String())
	}
	// The kill may have landed in any phase: every phase run since must pass.
	ran := strings.Count(log.String(), "\n== round1-")
	if got := strings.Count(log.String(), "  OK\n"); got != ran || !strings.Contains(log.String(), "round 1 done") {
		t.Errorf("%d verifications passed of %d phases, want all and the round done:\n%s", got, ran, log.String())
	}
}

// TestUnrecordedWriteAdopted: a message a kill left on its shard but not in the ledger (put
// there by hand here) is recorded by the next run, which then passes every verification.
func TestUnrecordedWriteAdopted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var log bytes.Buffer
	if err := run(ctx, small(dir), &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	n := readDisk(t, dir).ledger[7]
	d, err := openSQLite(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	msg := message{ID: messageID(7, n+1), UserID: 7, Time: 1, Message: "written, then killed", Sender: 1}
	err = insertMessages(ctx, d.shards[7%5], []message{msg})
	d.close()
	if err != nil {
		t.Fatal(err)
	}
	log.Reset()
	if err := run(ctx, small(dir), &log); err != nil {
		t.Fatalf("run after an unrecorded write: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "ledger: recorded 1 messages") || strings.Count(log.String(), "  OK\n") != len(phases) {
		t.Errorf("want the message recorded and every verification passed:\n%s", log.String())
	}
}

// TestLostShardIsRefused kills a move after it marked a user copied, then damages the
// user's new shard as a storage fault would: the next run stops with an error that names
// the shard, recreates nothing, and the user's old copy is intact.
func TestLostShardIsRefused(t *testing.T) {
	shardFile := func(dir string, i int64) string { return filepath.Join(dir, fmt.Sprintf("shard%d.db", i)) }
	removeWAL := func(t *testing.T, path string) {
		for _, f := range []string{path + "-wal", path + "-shm"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, user, to int64)
		want   string
		is     error
	}{
		{"file deleted", func(t *testing.T, dir string, _, to int64) {
			if err := os.Remove(shardFile(dir, to)); err != nil {
				t.Fatal(err)
			}
			removeWAL(t, shardFile(dir, to))
		}, "refusing to create it empty", errState},
		{"file truncated", func(t *testing.T, dir string, _, to int64) {
			if err := os.Truncate(shardFile(dir, to), 0); err != nil {
				t.Fatal(err)
			}
			removeWAL(t, shardFile(dir, to))
		}, "not the database this example loaded", errState},
		{"copy lost", func(t *testing.T, dir string, user, to int64) {
			db, err := sql.Open("sqlite", "file:"+shardFile(dir, to)+"?mode=rw")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("DELETE FROM messages WHERE user_id = $1", user); err != nil {
				t.Fatal(err)
			}
		}, "lost rows since the copy: the old copy is kept", rebalance.ErrCopyLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runKilled(t, smallArgs(dir, "-crash-after", "3", "-crash-point", "marked")...)
			disk := readDisk(t, dir)
			user := disk.copied(t)
			from, to := user%5, user%10 // the first phase grows 5 -> 10
			want := disk.shards[from][user]
			if want == 0 || want < disk.ledger[user] {
				t.Fatalf("user %d: %d messages on shard %d, %d in the ledger", user, want, from, disk.ledger[user])
			}
			tc.damage(t, dir, user, to)

			var log bytes.Buffer
			err := run(context.Background(), small(dir), &log)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), fmt.Sprintf("shard %d", to)) {
				t.Fatalf("run: %v, want an error wrapping %v that names shard %d and says %q\n%s", err, tc.is, to, tc.want, log.String())
			}
			if got := readDisk(t, dir).shards[from][user]; got != want {
				t.Errorf("user %d: %d messages left on its old shard %d, want %d", user, got, from, want)
			}
			if tc.name == "file deleted" {
				if _, err := os.Stat(shardFile(dir, to)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the lost shard file was recreated: %v", err)
				}
			}
		})
	}
}

// TestPhaseDoneOnlyAfterVerification: a phase whose verification fails is not recorded done
// and keeps its marks.
func TestPhaseDoneOnlyAfterVerification(t *testing.T) {
	dir := t.TempDir()
	runKilled(t, smallArgs(dir, "-crash-after", "1", "-crash-point", "copy")...)
	// A storage fault takes a message of user 1, which stays on shard 1 (1 % 5 == 1 % 10).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shard1.db")+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("DELETE FROM messages WHERE id = $1", messageID(1, 1))
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := run(context.Background(), small(dir), &log); !errors.Is(err, errVerify) {
		t.Fatalf("run: %v, want %v\n%s", err, errVerify, log.String())
	}
	disk := readDisk(t, dir)
	if disk.phase != 0 || len(disk.marks) == 0 {
		t.Errorf("after a failed verification: phase %d with %d marks, want phase 0 and its marks kept", disk.phase, len(disk.marks))
	}
}

// TestErrorsNameTheShard: a shard that refuses writes (read-only here) is named in the error,
// with its file.
func TestErrorsNameTheShard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := run(ctx, small(dir), new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	d, err := openSQLite(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	path := filepath.Join(dir, "shard8.db")
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	d.shards[8].Close()
	d.shards[8] = ro
	err = (&store{db: d}).Copy(ctx, "8", 3, 8)
	if want := fmt.Sprintf("shard 8 (%s): ", path); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Copy to a read-only shard: %v, want an error naming %q", err, want)
	}
}

func TestUsage(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if !strings.HasPrefix(out.String(), "Usage: rebalance [flags]\n\nRuns the rebalancing post's [004] scenario on real databases") ||
		!strings.Contains(out.String(), "-crash-point") {
		t.Errorf("-h prints:\n%s", out.String())
	}
	for _, args := range [][]string{{"-movers", "1025"}, {"-crash-point", "nowhere"}, {"extra"},
		{"-procs", "2", "-mover-yield", "-1"}, {"-procs", "2", "-mover-yield", "NaN"}, {"-procs", "2", "-app-pause", "-1ms"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestDataDir: a -data directory that cannot be used is refused with its path.
func TestDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unwritable := t.TempDir()
	if err := os.Chmod(unwritable, 0o555); err != nil {
		t.Fatal(err)
	}
	if f, err := os.CreateTemp(unwritable, "probe"); err == nil { // root ignores the mode
		f.Close()
		unwritable = "/sys" // where even root cannot create files, on Linux
		if _, err := os.Stat(unwritable); err != nil {
			unwritable = ""
		}
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing", "data"), file, unwritable} {
		if dir == "" {
			continue
		}
		err := run(context.Background(), small(dir), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), "-data "+dir+": ") {
			t.Errorf("-data %s: %v, want an error naming the path", dir, err)
		}
	}
}

// TestProgress: loading, moving and verifying draw progress bars when given a terminal.
func TestProgress(t *testing.T) {
	c := small(t.TempDir())
	var bars bytes.Buffer
	c.progress = &bars
	if err := run(context.Background(), c, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\rloading [########################################] 30/30 users\n",
		"] 30/30 users\n", // moving: a Run sweeps whatever the workload left
		"\rverifying [########################################] ",
	} {
		if !strings.Contains(bars.String(), want) {
			t.Errorf("no %q in the progress output:\n%q", want, bars.String())
		}
	}
	if !strings.Contains(bars.String(), "\rmoving [") {
		t.Errorf("no moving bar:\n%q", bars.String())
	}
}
