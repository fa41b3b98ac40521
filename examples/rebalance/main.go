// Command rebalance runs document 004's scenario on real databases: a messages table sharded
// by user_id % 5 grows to 10 shards and shrinks back, once in each mode of package
// rebalance, while writers and readers keep working; after each resize it verifies and
// prints that no message was lost, duplicated or left on the wrong shard.
//
// By default the shards are SQLite files in -data; with -pg they are PostgreSQL databases,
// one DSN per shard, and the control tables (marks, ledger, state) live in the first.
// -crash-after N stops the process abruptly during move N+1; running again with the same
// databases resumes the migration, and the verification must pass.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard"
)

type config struct {
	data, pg            string
	shards, grow, users int
	messages            int
	writers, readers    int
	movers              int
	work                time.Duration
	crashAfter          int64
	crashPoint          string
}

func main() {
	var c config
	flag.StringVar(&c.data, "data", "data", "directory of the SQLite shard files (ignored with -pg)")
	flag.StringVar(&c.pg, "pg", "", "comma-separated PostgreSQL DSNs, one per shard, max(-shards, -grow) of them; the control tables go to the first")
	flag.IntVar(&c.shards, "shards", 5, "shards before growing (document 004: 5)")
	flag.IntVar(&c.grow, "grow", 10, "shards after growing (document 004: 10)")
	flag.IntVar(&c.users, "users", 200, "users, with IDs 1..users, loaded on the first run")
	flag.IntVar(&c.messages, "messages", 10, "messages per user loaded on the first run")
	flag.IntVar(&c.writers, "writers", 4, "goroutines writing messages during each resize")
	flag.IntVar(&c.readers, "readers", 4, "goroutines reading users during each resize")
	flag.IntVar(&c.movers, "movers", 4, "users moved at once by the mover")
	flag.DurationVar(&c.work, "work", 300*time.Millisecond, "in lazy mode, how long the workload runs (moving users on first access) before the mover sweeps the rest")
	flag.Int64Var(&c.crashAfter, "crash-after", 0, "if > 0, exit with status 3 during move number crash-after+1 of this run, with no cleanup")
	flag.StringVar(&c.crashPoint, "crash-point", pointCopied, "where that move stops: copy, copied, marked or deleted")
	flag.Parse()

	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "rebalance example:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rebalance example:", err)
		os.Exit(1)
	}
}

// check validates the flags before any database is opened.
func (c config) check() error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
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
	if c.writers < 0 || c.readers < 0 || c.movers < 1 || c.crashAfter < 0 {
		return fmt.Errorf("-writers %d -readers %d -movers %d -crash-after %d: want >= 0, >= 0, >= 1, >= 0",
			c.writers, c.readers, c.movers, c.crashAfter)
	}
	switch c.crashPoint {
	case pointCopy, pointCopied, pointMarked, pointDeleted:
	default:
		return fmt.Errorf("-crash-point %q: want copy, copied, marked or deleted", c.crashPoint)
	}
	if c.work < 0 {
		return fmt.Errorf("-work %v: want >= 0", c.work)
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

// userSharder routes a user as document 004 does, by user_id % n (Modulo.LocateID); the
// owners of package rebalance are strings, so it parses the decimal ID first. The example's
// owners are always user IDs; anything else is hashed, as Modulo.Locate does.
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
