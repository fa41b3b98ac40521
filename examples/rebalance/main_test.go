package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
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
