#!/usr/bin/env bash
# Tests the sqlstore module (rebalance.Shared over database/sql) on SQLite and PostgreSQL.
# The tests start PostgreSQL themselves (TestMain: Debian's package, initdb as the postgres
# user, a random port on 127.0.0.1, fsync off, stopped at the end); this script installs the
# package when missing and makes its absence a failure (SQLSTORE_REQUIRE_PG=1) rather than a
# skip. Then the concurrency tests again under the race detector, and the benchmarks once at
# 200k rows. Needs Go and apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n### %s\n' "$*"; }

step "PostgreSQL: install when missing"
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
export SQLSTORE_REQUIRE_PG=1

step "vet and test, SQLite and PostgreSQL"
go -C sqlstore vet ./...
go -C sqlstore test -count=1 -timeout 30m ./...

step "the concurrency tests under the race detector"
go -C sqlstore test -count=1 -race -timeout 40m -run 'TestWriteThatSpansTheWindow|TestMoveUnderConcurrentWriters|TestFenceWaitsForAccessInFlight|TestStaleViewIsFenced|TestKilledWriterProcess|TestTwoMoversAtOnce|TestReplacedMoverChangesNothing|TestTwoMigrationsAtOnce|TestUpdatesAndDeletesDuringTheMove|TestChangeCommittedOutOfOrder|TestManyTablesPerOwner|TestNewOwnerDuringFinish' ./...

step "benchmarks once: the move at 200k rows (the 1M-row ones: -bench Move/.*/rows=1000k), the foreground latency with one mover in a process of its own, the sum of a 200k-row owner, a write with the change capture"
go -C sqlstore test -count=1 -run '^$' -bench 'Move/.*/rows=200k' -benchtime 1x ./...
go -C sqlstore test -count=1 -run '^$' -bench 'Latency/.*/mover=process/movers=1$' -benchtime 1x ./...
go -C sqlstore test -count=1 -run '^$' -bench 'Sums|Capture' -benchtime 1x ./...

step "sqlstore: all checks passed"
