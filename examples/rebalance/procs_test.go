package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
	"github.com/shardkit/shard/rebalance"
)

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.percentile(c.q)
		// An upper bound of the bucket: never below, at most 1/32 above.
		if got < c.want || float64(got) > float64(c.want)*(1+1.0/subBuckets)+1 {
			t.Errorf("percentile(%v) = %v, want %v to %v", c.q, got, c.want, time.Duration(float64(c.want)*(1+1.0/subBuckets)))
		}
	}
	back, err := decodeHistogram(h.encode())
	if err != nil || back.n != h.n || back.percentile(0.99) != h.percentile(0.99) {
		t.Errorf("decode(encode) = %d samples, p99 %v, %v; want %d, %v", back.n, back.percentile(0.99), err, h.n, h.percentile(0.99))
	}
	for b := 1; b < 64*subBuckets-1; b++ {
		if lowest(b) >= lowest(b+1) || bucketOf(lowest(b)) != b {
			t.Fatalf("bucket %d: lowest %v, next %v, bucketOf(lowest) %d", b, lowest(b), lowest(b+1), bucketOf(lowest(b)))
		}
		if lowest(b+1) > 1<<62 {
			break
		}
	}
}

func TestAckLogs(t *testing.T) {
	dir := t.TempDir()
	l, err := createAckLog(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	acked := message{ID: 5 << 40, UserID: 7, Message: "a"}
	pending := message{ID: 6 << 40, UserID: 8, Message: "b"}
	liked := reaction{ID: 7 << 40, UserID: 7, MessageID: acked.ID, Emoji: "+1"}
	for _, err := range []error{l.intend(acked), l.ack('m', acked.ID), l.intend(pending), l.intendReaction(liked), l.ack('r', liked.ID),
		l.intendCredit(7, 10), l.intendCredit(7, 3), l.ackCredit(7, 10), l.intendCredit(8, 4), l.close()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A torn last line (no newline) acknowledges nothing.
	f, _ := os.OpenFile(ackName(dir, 2, os.Getpid()), os.O_WRONLY|os.O_APPEND, 0)
	fmt.Fprintf(f, "A m %d", pending.ID)
	f.Close()
	got, err := readAckLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, p, r := got.rows[rowKey{'m', acked.ID}], got.rows[rowKey{'m', pending.ID}], got.rows[rowKey{'r', liked.ID}]
	if len(got.rows) != 3 || !a.acked || p.acked || a.user != 7 || a.sum != checksum(acked) || !r.acked || r.message != acked.ID || r.sum != reactionSum(liked) {
		t.Errorf("read %+v %+v %+v, want message %d acked, %d pending, reaction %d acked", a, p, r, acked.ID, pending.ID, liked.ID)
	}
	if b7, b8 := got.balances[7], got.balances[8]; b7 == nil || b8 == nil || b7.acked != 10 || b7.n != 1 || fmt.Sprint(b7.pending) != "[3]" || b8.acked != 0 || fmt.Sprint(b8.pending) != "[4]" {
		t.Errorf("balances: %+v %+v, want user 7 +10 acked and 3 in flight, user 8 4 in flight", got.balances[7], got.balances[8])
	}
	for _, line := range []string{"A m 12345", "A b 7 10", "U r 99 1", "X m 1"} {
		os.WriteFile(filepath.Join(dir, "app9-pid1.log"), []byte(line+"\n"), 0o644)
		if _, err := readAckLogs(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line 1 %q", line)) {
			t.Errorf("%q without its intent: %v, want an error naming the line", line, err)
		}
	}
}

func TestIDClock(t *testing.T) {
	a, b := &idClock{slot: 3}, &idClock{slot: 4}
	seen := map[int64]bool{}
	last := int64(0)
	for range 10000 {
		for _, c := range []*idClock{a, b} {
			id := c.next()
			if seen[id] || id <= messageID(1_000_000, 999_999) {
				t.Fatalf("id %d repeated or in the loaded range", id)
			}
			seen[id] = true
		}
		if a.last <= last {
			t.Fatalf("ids of one writer do not grow: %d after %d", a.last, last)
		}
		last = a.last
	}
}

// procsConfig is a small -procs run on SQLite files in dir.
func procsConfig(dir string) config {
	c, err := parseFlags([]string{"-procs", "2", "-data", dir, "-users", "40", "-messages", "5", "-writers", "2", "-readers", "2",
		"-idle", "300ms", "-kill-every", "500ms", "-movers", "1", "-mover-pace", "60ms"}, new(bytes.Buffer))
	if err != nil {
		panic(err)
	}
	return c
}

// TestVerifyProcs checks that the verifier counts every kind of damage, in each of the chat
// tables: it must be able to fail.
func TestVerifyProcs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := procsConfig(filepath.Join(dir, "data"))
	d, err := prepareProcs(ctx, c, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	ledgers := filepath.Join(dir, "ledger")
	os.Mkdir(ledgers, 0o755)
	l, err := createAckLog(ledgers, 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := &idClock{slot: 1}
	exec := func(shard int, q string, args ...any) {
		t.Helper()
		if _, err := d.shards[shard].Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	write := func(user int64, ack bool) message {
		m := message{ID: clock.next(), UserID: user, Time: 1, Message: "m", Sender: 2}
		l.intend(m)
		if err := insertMessages(ctx, d.shards[user%5], []message{m}); err != nil {
			t.Fatal(err)
		}
		if ack {
			l.ack('m', m.ID)
		}
		return m
	}
	react := func(m message, ack bool) reaction {
		r := reaction{ID: clock.next(), UserID: m.UserID, MessageID: m.ID, Sender: 3, Emoji: "like"}
		l.intendReaction(r)
		if err := insertRows(ctx, d.shards[m.UserID%5], "reactions", chatTables[2].Columns, [][]any{reactionRow(r)}); err != nil {
			t.Fatal(err)
		}
		if ack {
			l.ack('r', r.ID)
		}
		return r
	}
	// update writes version v of m (when apply) after its intent, and acks it (when ack).
	update := func(m message, v int, apply, ack bool) message {
		m.Message, m.Sender = fmt.Sprintf("m, version %d", v), m.Sender+1
		l.intendUpdate(m)
		if apply {
			exec(int(m.UserID%5), "UPDATE messages SET message = $1, sender = sender + 1 WHERE id = $2", m.Message, m.ID)
		}
		if ack {
			l.ack('m', m.ID)
		}
		return m
	}
	updateReaction := func(r reaction, v int) reaction {
		r.Emoji, r.Sender = fmt.Sprintf("like, version %d", v), r.Sender+1
		l.intendReactionUpdate(r)
		exec(int(r.UserID%5), "UPDATE reactions SET emoji = $1, sender = sender + 1 WHERE id = $2", r.Emoji, r.ID)
		l.ack('r', r.ID)
		return r
	}
	remove := func(t byte, user, id int64, apply, ack bool) {
		l.intendDelete(t, id)
		if apply {
			exec(int(user%5), fmt.Sprintf("DELETE FROM %s WHERE id = $1", map[byte]string{'m': "messages", 'r': "reactions"}[t]), id)
		}
		if ack {
			l.ack(t, id)
		}
	}
	credit := func(user, amount int64, apply, ack bool) {
		l.intendCredit(user, amount)
		if apply {
			exec(int(user%5), "UPDATE users SET balance = balance + $1 WHERE id = $2", amount, user)
		}
		if ack {
			l.ackCredit(user, amount)
		}
	}
	acked := write(7, true)
	write(8, false) // committed, its ack lost to a kill: allowed
	l.intend(message{ID: clock.next(), UserID: 9, Message: "never committed"})
	updated := write(10, true)
	first := update(updated, 1, true, true)
	updated = update(first, 2, true, true)
	update(write(11, true), 1, true, false)  // committed, its ack lost: allowed
	update(write(13, true), 1, false, false) // in flight, not committed: allowed
	deleted := write(14, true)
	deletedReaction := react(deleted, true) // deleted with its message
	remove('m', 14, deleted.ID, true, true)
	remove('m', 15, write(15, true).ID, true, false) // committed, its ack lost: allowed
	notDeleted := write(16, true)
	remove('m', 16, notDeleted.ID, false, false) // in flight, not committed: allowed
	liked := react(acked, true)
	firstLike := updateReaction(liked, 1)
	liked = updateReaction(firstLike, 2)
	react(acked, false) // committed, its ack lost: allowed
	unliked := react(acked, true)
	remove('r', 7, unliked.ID, true, true)
	credit(3, 10, true, true)
	credit(3, 20, true, true)
	credit(3, 7, true, false)  // committed, its ack lost: allowed
	credit(4, 5, false, false) // in flight, not committed: allowed
	l.close()

	check := func(what string, want procsVerification) {
		t.Helper()
		v, err := verifyProcs(ctx, d, newUserSharder(5), c.users, c.messages, ledgers)
		if err != nil {
			t.Fatal(err)
		}
		got := procsVerification{lost: v.lost, duplicate: v.duplicate, misplaced: v.misplaced, unknown: v.unknown, orphans: v.orphans,
			lostUpdates: v.lostUpdates, resurrected: v.resurrected, unackedIns: v.unackedIns, unackedUpd: v.unackedUpd, unackedDel: v.unackedDel}
		if got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
		if v.acked != 10 || v.updates != 6 || v.credits != 2 || v.deletes != 2 || v.loaded != 40*7 {
			t.Errorf("%s: acknowledged %d inserts, %d updates (%d credits), %d deletes, %d loaded; want 10, 6 (2), 2, 280", what, v.acked, v.updates, v.credits, v.deletes, v.loaded)
		}
	}
	want := procsVerification{unackedIns: 2, unackedUpd: 2, unackedDel: 1}
	check("intact", want)
	exec(2, "DELETE FROM messages WHERE id = $1", messageID(2, 3)) // user 2 lives on shard 2
	want.lost++
	check("a loaded message deleted", want)
	exec(2, "DELETE FROM reactions WHERE id = $1", messageID(2, 4))
	want.lost++
	check("a loaded reaction deleted", want)
	exec(2, "DELETE FROM messages WHERE id = $1", acked.ID) // user 7 lives on shard 2; its reactions go too
	want.lost += 2
	want.unackedIns--
	check("an acknowledged message (with its reactions) deleted", want)
	msgs, err := readMessages(ctx, d.shards[2], 12)
	if err != nil || len(msgs) != c.messages {
		t.Fatalf("user 12 on shard 2: %d messages, %v", len(msgs), err)
	}
	// User 12 and two of its messages on shard 7 too.
	if err := insertRows(ctx, d.shards[7], "users", chatTables[0].Columns, [][]any{userRow(loadedUser(12))}); err != nil {
		t.Fatal(err)
	}
	if err := insertMessages(ctx, d.shards[7], msgs[:2]); err != nil {
		t.Fatal(err)
	}
	want.duplicate, want.misplaced = 3, 3
	check("a user and two of its messages copied to a wrong shard", want)
	exec(4, "UPDATE messages SET message = 'changed' WHERE id = $1", messageID(4, 1))
	want.lost++
	want.unknown++
	check("a loaded row changed", want)
	exec(0, "UPDATE messages SET message = $1, sender = $2 WHERE id = $3", first.Message, first.Sender, updated.ID) // user 10: shard 0
	want.lostUpdates++
	check("an acknowledged update undone", want)
	exec(0, "UPDATE messages SET message = $1 WHERE id = $2", updated.Message, updated.ID)
	check("the last update's text back, an earlier update's increment lost", want)
	if err := insertMessages(ctx, d.shards[4], []message{deleted}); err != nil { // user 14: shard 4
		t.Fatal(err)
	}
	want.resurrected++
	check("a message back after its acknowledged delete", want)
	if err := insertRows(ctx, d.shards[4], "reactions", chatTables[2].Columns, [][]any{reactionRow(deletedReaction)}); err != nil {
		t.Fatal(err)
	}
	want.resurrected++
	check("a reaction back after its message's acknowledged delete", want)
	exec(0, "DELETE FROM messages WHERE id = $1", updated.ID)
	want.lostUpdates--
	want.lost++
	check("an updated row deleted", want)
	exec(1, "UPDATE messages SET message = 'changed' WHERE id = $1", notDeleted.ID) // user 16: shard 1
	want.lost++
	want.unknown++
	check("an acknowledged insert, never updated, changed", want)
	exec(3, "UPDATE users SET balance = balance - 20 WHERE id = 3") // user 3: shard 3
	want.lostUpdates++
	want.unackedUpd--
	check("an acknowledged addition to a balance lost", want)
	exec(3, "UPDATE users SET balance = balance + 20 WHERE id = 3")
	want.unackedUpd++ // 1000 + 10 + 20 + 7 again: the acknowledged additions and one in flight
	want.lostUpdates--
	check("the balance back", want)
	exec(3, "UPDATE users SET balance = balance + 1 WHERE id = 3")
	want.unackedUpd--
	want.lostUpdates++
	check("a balance above the acknowledged additions and those in flight", want)
	exec(1, "DELETE FROM users WHERE id = 1") // user 1: shard 1; its messages and reactions cascade
	want.lost += 1 + int64(c.messages) + int64(c.messages/reactionEvery)
	check("a user deleted with all its rows", want)
	exec(1, "PRAGMA foreign_keys = OFF")                           // the shards have one connection each
	exec(1, "DELETE FROM messages WHERE id = $1", messageID(6, 4)) // user 6: shard 1, the message of a loaded reaction
	exec(1, "PRAGMA foreign_keys = ON")
	want.lost++
	want.orphans++
	check("a reaction left without its message", want)
}

// TestProcs runs the -procs scenario with kills on SQLite, end to end: the parent, two
// application processes and the mover (this test binary, as main), embedded etcd; with
// -rogue-mover, the store must refuse a mover that bypasses the election.
func TestProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for about 20 s")
	}
	t.Setenv("REBALANCE_EXAMPLE_MAIN", "1") // the children run main (TestMain)
	dir := t.TempDir()
	c := procsConfig(filepath.Join(dir, "data"))
	c.kill, c.rogueMover = true, true
	var out bytes.Buffer
	if err := parent(context.Background(), c, &out); err != nil {
		t.Fatalf("parent: %v\n%s", err, out.String())
	}
	for _, want := range []string{`verify: 0 lost, 0 duplicated, 0 misplaced, 0 lost updates, 0 resurrected deletes; 0 orphans; \d+ rows moved at \d+ rows/s; \d+ rows checked \([1-9]\d* users, [1-9]\d* messages, [1-9]\d* reactions; \d+ loaded; acknowledged \d+ inserts, [1-9]\d* updates, [1-9]\d* deletes;.* OK`,
		`(?m)^standalone verification \(rebalance Shared.Verify of the last step\): [1-9]\d* users moved, [1-9]\d* rows on the shards that serve them, \d+ compared, 0 stray, 0 problems; OK$`,
		`second mover: refused, exit status 1: rebalance example: coord: a mover already runs`,
		`(?m)^\[mover\] step 1: holding for the rogue mover: pid (\d+), epoch (\d+)\n(?s:.*)^rogue mover \(same epoch \d+, no election\): refused: rebalance: migration "procs-step1-5-to-10": a mover already runs it: [^ ]*/pid \d+/`,
		`peak RSS .*app \d+\.\d MiB, mover \d+\.\d MiB, parent( with etcd)? \d+\.\d MiB`,
		`migrating, owner moving: +reads p50 .* p99 `,
		`(?m)^kills: .*mover [1-9]`, // the first kill of each step is the mover's
		`(?m)^\[mover\] step [12]: resuming migration procs-step[12]`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matches %q in:\n%s", want, out.String())
		}
	}
	// Every incarnation of the application processes counts in the latencies: the two
	// first ones and one more for each kill.
	appKills := 0
	if m := regexp.MustCompile(`(?m)^kills: (.*)$`).FindStringSubmatch(out.String()); m != nil {
		for _, k := range regexp.MustCompile(`app\d+ (\d+)`).FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(k[1])
			appKills += n
		}
	}
	if want := fmt.Sprintf("foreground (all %d incarnations of the 2 application processes; one killed loses its last 1s at most)", 2+appKills); !strings.Contains(out.String(), want) {
		t.Errorf("want %q (%d application processes killed) in:\n%s", want, appKills, out.String())
	}
}

// TestFigures checks that the figures files of several incarnations add up exactly, that a
// rewrite replaces a file whole, and that a file that is not figures is refused.
func TestFigures(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i, d := range []time.Duration{time.Millisecond, 3 * time.Millisecond} {
		a := &appWorkload{}
		for range 10 * (i + 1) {
			a.lat.reads[classMoving].record(d)
			a.lat.writes[classIdle].record(d)
		}
		a.writes.Add(int64(10 * (i + 1)))
		name := statsName(dir, i, 100+i)
		if err := writeStats(name, "STATS role=app writes=1"); err != nil { // an earlier interval's
			t.Fatal(err)
		}
		lines = append(lines, a.stats())
		if err := writeStats(name, a.stats()); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := readStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mergeFigures(stats)
	if err != nil {
		t.Fatal(err)
	}
	if f.incarnations != 2 || f.writes != 30 || f.lat.reads[classMoving].n != 30 || f.lat.writes[classIdle].n != 30 || f.lat.reads[classIdle].n != 0 {
		t.Errorf("merged %d incarnations, %d writes, %d moving reads, %d idle writes, %d idle reads; want 2, 30, 30, 30, 0",
			f.incarnations, f.writes, f.lat.reads[classMoving].n, f.lat.writes[classIdle].n, f.lat.reads[classIdle].n)
	}
	// p50 of 10 at 1 ms and 20 at 3 ms is in the 3 ms bucket; the minimum in the 1 ms one.
	if p := f.lat.reads[classMoving].percentile(0.5); p < 3*time.Millisecond || p > 3*time.Millisecond*33/32 {
		t.Errorf("merged p50 %v, want 3ms to 3ms+1/32", p)
	}
	if p := f.lat.reads[classMoving].percentile(0); p < time.Millisecond || p > time.Millisecond*33/32 {
		t.Errorf("merged p0 %v, want 1ms to 1ms+1/32", p)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	os.WriteFile(statsName(dir, 9, 1), []byte("working\n"), 0o644)
	if _, err := readStats(dir); err == nil || !strings.Contains(err.Error(), "not a STATS line") {
		t.Errorf("a file that is not figures: %v, want a refusal", err)
	}
	bad := parseStats("app", "r0=12:x")
	if _, err := mergeFigures([]map[string]string{bad}); err == nil || !strings.Contains(err.Error(), "bad histogram bucket") {
		t.Errorf("a bad histogram: %v, want a refusal", err)
	}
}

// TestProcsBadRecord checks that a mover and an application process refuse a placement
// record of a newer format, or one this run did not write, and change nothing.
func TestProcsBadRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	eps, stop, err := embedded.Start(filepath.Join(dir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := procsConfig(filepath.Join(dir, "data"))
	d, err := prepareProcs(ctx, c, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	cl, err := coord.Open(ctx, eps, "/t/", coord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c.etcd, c.prefix, c.ledger = strings.Join(eps, ","), "/t/", t.TempDir()
	for _, tc := range []struct {
		name, record string
		want         error
		text         string
	}{
		{"newer format", `{"format":99,"layout":{"strategy":"modulo","shards":5},"later":"field"}`, coord.ErrVersion, "format"},
		{"other layout", `{"format":1,"layout":{"strategy":"jump","shards":5}}`, errState, "not this run's record"},
		{"other migration", `{"format":1,"layout":{"strategy":"modulo","shards":5},"migration":{"id":"someone-else","before":{"strategy":"modulo","shards":5},"after":{"strategy":"modulo","shards":7},"phase":"moving"}}`, errState, `"someone-else"`},
	} {
		if _, err := cl.Etcd().Put(ctx, "/t/placement", tc.record); err != nil {
			t.Fatal(err)
		}
		for _, role := range []string{"mover", "app"} {
			if role == "app" && tc.want == errState {
				continue // an application process refuses such a record on its first access, not at start
			}
			rc := c
			rc.role = role
			if _, err := cl.Wait(ctx, 0); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the watch delivers the record
			errc := make(chan error, 1)
			go func() { errc <- runRole(ctx, rc, new(bytes.Buffer)) }()
			var err error
			select {
			case err = <-errc:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s, %s: still running after 20 s", tc.name, role)
			}
			t.Logf("%s, %s: %v", tc.name, role, err)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("%s, %s: %v, want an error wrapping %v that says %q", tc.name, role, err, tc.want, tc.text)
			}
		}
		var fences int
		for i, db := range d.shards {
			if err := db.QueryRow("SELECT COUNT(*) FROM rebalance_fence").Scan(&fences); err != nil || fences != 0 {
				t.Errorf("%s: shard %d has %d fences (%v): something moved", tc.name, i, fences, err)
			}
		}
	}
}

// TestStepClock checks that a step counts in rows/s even when the mover that finished it was
// killed before printing so.
func TestStepClock(t *testing.T) {
	var s stepClock
	for _, line := range []string{"elected mover, epoch 3", "step 1: plan 100 rows of 10 users, 5 -> 10 shards",
		"step 1: resuming migration procs-step1-5-to-10", "step 2: plan 50 rows of 10 users, 10 -> 5 shards",
		"step 2: plan 70 rows of 10 users, 10 -> 5 shards", "step 2 done: ..."} {
		s.see(line)
		time.Sleep(time.Millisecond)
	}
	if rows, took := s.total(); rows != 150 || took <= 0 {
		t.Errorf("total() = %d rows in %v, want 150 rows (the first plan of each step) in > 0", rows, took)
	}
	if n, running := s.current(); n != 2 || running {
		t.Errorf("current() = %d, %v; want step 2, ended", n, running)
	}
}

// TestPrepareProcsAgain checks that a -procs run on an earlier run's databases starts afresh:
// the earlier mover's claim (a higher election epoch than the new run's embedded etcd gives)
// and the placement the shards served are gone, so the new mover may claim.
func TestPrepareProcsAgain(t *testing.T) {
	ctx := context.Background()
	c := procsConfig(filepath.Join(t.TempDir(), "data"))
	before, after := newUserSharder(c.shards), newUserSharder(c.grow)
	claim := rebalance.Claim{Migration: stepID(0, procsSteps(c)[0]), Mover: "m", Lease: time.Minute,
		Placement: rebalance.PlacementOf(stepID(0, procsSteps(c)[0]), before, after)}
	for run, election := range []uint64{7, 3} {
		d, err := prepareProcs(ctx, c, new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		s, err := openStore(ctx, d)
		if err == nil {
			claim.Election = election
			_, err = s.Claim(ctx, claim)
		}
		if err != nil {
			d.close()
			t.Fatalf("run %d: claim with election epoch %d: %v", run+1, election, err)
		}
		// A fresh load: the earlier run's rows and captured changes are gone, every table
		// holds what load wrote, and the capture's triggers were made anew.
		counts := map[string]int{}
		for _, db := range d.shards {
			for _, q := range []string{"users", "messages", "reactions", "rebalance_changes_users", "rebalance_changes_messages", "rebalance_changes_reactions"} {
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM " + q).Scan(&n); err != nil {
					t.Fatal(err)
				}
				counts[q] += n
			}
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rebalance_changes_%'").Scan(&n); err != nil || n != 9 {
				t.Errorf("run %d: %d capture triggers on a shard (%v), want 9", run+1, n, err)
			}
		}
		if want := fmt.Sprint(map[string]int{"users": c.users, "messages": c.users * c.messages, "reactions": c.users * (c.messages / reactionEvery),
			"rebalance_changes_users": 0, "rebalance_changes_messages": 0, "rebalance_changes_reactions": 0}); fmt.Sprint(counts) != want {
			t.Errorf("run %d: %v, want %v", run+1, counts, want)
		}
		// Leftovers for the next run to drop: a row of an unknown user, a captured change.
		for _, q := range []string{"INSERT INTO users VALUES (999, 'stray', 0)", "INSERT INTO rebalance_changes_messages (owner, row_key) VALUES ('3', 5)"} {
			if _, err := d.shards[3].Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		d.close()
	}
}

// TestRogueVerdict checks that the parent counts a rogue mover as refused only when it exits
// with exitRogueRefused, saying the store refused it with the held mover's epoch and naming
// that mover.
func TestRogueVerdict(t *testing.T) {
	refused := `rogue mover (same epoch 3, no election): refused: rebalance: migration "m": a mover already runs it: host/pid 7/ab12 (election epoch 3); ...`
	held := heldMover{pid: 7, epoch: 3}
	for _, tc := range []struct {
		name, line string
		status     int
		h          heldMover
		want       bool
	}{
		{"refused", refused, exitRogueRefused, held, true},
		{"exit 0", refused, 0, held, false},
		{"exit 1", refused, 1, held, false},
		{"the held mover's successor", refused, exitRogueRefused, heldMover{pid: 8, epoch: 2}, true},
		{"refused for another reason", strings.Replace(refused, "a mover already runs it", "stale mover epoch", 1), exitRogueRefused, held, false},
		{"ran", "rogue mover (same epoch 3, no election): NOT refused by the lease of the mover that runs it: Run of migration m returned <nil>", 0, held, false},
	} {
		script := fmt.Sprintf("echo '%s'; exit %d", strings.ReplaceAll(tc.line, "'", `'\''`), tc.status)
		line, ok := rogueMover("/bin/sh", nil, []string{"-c", script}, tc.h)
		if ok != tc.want {
			t.Errorf("%s: refused %v, want %v: %s", tc.name, ok, tc.want, line)
		}
	}
	if h, ok := parseHold("step 1: holding for the rogue mover: pid 7, epoch 3"); !ok || h != held {
		t.Errorf("parseHold: %+v, %v", h, ok)
	}
}
