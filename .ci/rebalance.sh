#!/usr/bin/env bash
# Runs examples/rebalance end to end: on SQLite (a full round, a kill -9 at every crash point
# and a resume, a lost shard file, bad input), then on PostgreSQL from Debian's packages,
# started here on 127.0.0.1 and stopped on exit. Needs Go, gcc and apt-get (for PostgreSQL,
# when not installed yet).
set -euo pipefail
cd "$(dirname "$0")/.."
ex=examples/rebalance
work=$(mktemp -d /tmp/rebalance-ci.XXXXXX)
chmod 755 "$work"
pgdata=""
pgctl=""
cleanup() {
	if [[ -n $pgctl && -f $pgdata/postmaster.pid ]]; then
		as_pg "$pgctl" -D "$pgdata" -m fast -w stop >/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n### %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect STATUS CMD...: runs CMD, shows its output, and fails unless it exits with STATUS.
expect() {
	local want=$1 got=0
	shift
	"$@" >"$work/out" 2>&1 || got=$?
	cat "$work/out"
	[[ $got == "$want" ]] || fail "exit status $got, want $want: $*"
}

# oks FILE: how many verifications passed in that output.
oks() { grep -c '^  OK$' "$1" || true; }

# A crash point kills the example with SIGKILL: the shell reports status 128+9.
killed=137

step "build, vet and test the example module"
go -C "$ex" vet ./...
go -C "$ex" test -count=1 ./...
go -C "$ex" build -o "$work/rebalance" .
bin=$work/rebalance

step "SQLite: load 200 users on 5 shards, grow to 10 and shrink to 5 in both modes"
expect 0 "$bin" -data "$work/sqlite"
[[ $(oks "$work/out") == 4 ]] || fail "want 4 passed verifications"
echo "verified: 4 resizes, every user's count and checksum, no user on two shards, nothing misplaced"

step "SQLite: kill -9 at every point of a move and of a write, resume each time"
db=$work/sqlite-crash
expect $killed "$bin" -data "$db" -crash-after 30 -crash-point copied  # async grow
expect $killed "$bin" -data "$db" -crash-after 20 -crash-point marked  # async grow, resumed
expect $killed "$bin" -data "$db" -crash-after 70 -crash-point deleted # lazy shrink
expect $killed "$bin" -data "$db" -crash-after 10 -crash-point copy    # lazy shrink, resumed
expect $killed "$bin" -data "$db" -crash-after 20 -crash-point written # inserted, not in the ledger
expect 0 "$bin" -data "$db"
grep -q 'resuming after a stop' "$work/out" || fail "the last run did not resume"
grep -q 'ledger: recorded [1-9][0-9]* messages written on their shard' "$work/out" || fail "the unrecorded write was not recorded"
grep -q 'round [0-9]* done' "$work/out" || fail "the last run did not finish the round"
[[ $(oks "$work/out") -ge 1 && $(grep -c FAILED "$work/out" || true) == 0 ]] || fail "verification"
echo "verified: after 5 kills (copy, copied, marked, deleted, written) the resumed runs lost and duplicated nothing"

step "SQLite: a shard file lost between runs is refused, not recreated empty"
db=$work/sqlite-lost
expect $killed "$bin" -data "$db" -crash-after 5 -crash-point marked # async grow 5 -> 10
rm -f "$db/shard7.db" "$db/shard7.db-wal" "$db/shard7.db-shm"
expect 1 "$bin" -data "$db"
grep -q "shard 7 ($db/shard7.db): .*refusing to create it empty" "$work/out" || fail "the lost shard was not named"
[[ ! -e $db/shard7.db ]] || fail "the lost shard file was recreated"
echo "verified: the run stopped before touching anything, naming the lost shard"

step "bad input is refused before any data is touched"
# On the databases of the clean run (a crashed one would legitimately fold its SQLite WAL in).
sum=$(cat "$work/sqlite"/* | cksum)
expect 1 "$bin" -data "$work/sqlite" -users 100
[[ $(cat "$work/sqlite"/* | cksum) == "$sum" ]] || fail "a refused run changed the databases"
expect 2 "$bin" -grow 0
expect 2 "$bin" -shards 5 -grow 5
expect 2 "$bin" -pg 'postgres://x@127.0.0.1:1/a,postgres://x@127.0.0.1:1/b'
expect 1 "$bin" -shards 1 -grow 2 -pg 'postgres://nobody@127.0.0.1:1/a?sslmode=disable&connect_timeout=2,postgres://nobody@127.0.0.1:1/b?sslmode=disable'

step "SQLite, -procs 3 -kill -rogue-mover: 3 application processes and a mover process, kill -9 at random, etcd embedded"
start=$SECONDS
expect 0 "$bin" -procs 3 -kill -rogue-mover
grep -q '^verify: 0 lost, 0 duplicated, 0 misplaced, 0 lost updates, 0 resurrected deletes; .*acknowledged [0-9]* inserts, [1-9][0-9]* updates, [1-9][0-9]* deletes; .* OK$' "$work/out" || fail "verification"
grep -q '^second mover: refused, exit status 1: .*coord: a mover already runs' "$work/out" || fail "a second mover was not refused"
grep -q '^rogue mover (same epoch [0-9]*, no election): refused: .*a mover already runs it: ' "$work/out" || fail "the rogue mover was not refused"
grep -q '^\[parent\] SIGKILL' "$work/out" || fail "nothing was killed"
echo "verified in $((SECONDS - start)) s: a second mover refused by the election and a rogue one by the store, nothing lost, duplicated or misplaced, no update lost and no delete undone after the kills above"

step "-procs: unreachable etcd and a wrong DSN are refused before any data is touched"
expect 1 "$bin" -procs 2 -etcd 127.0.0.1:1 -data "$work/procs-refused"
grep -q 'coord: open: etcd at \[127.0.0.1:1\] did not answer' "$work/out" || fail "the etcd error"
[[ ! -e $work/procs-refused ]] || fail "the refused run created its databases"
expect 1 "$bin" -procs 2 -shards 1 -grow 2 -pg 'postgres://nobody@127.0.0.1:1/a?sslmode=disable&connect_timeout=2,postgres://nobody@127.0.0.1:1/b?sslmode=disable'
grep -q 'shard 0 (DSN #1): does not connect' "$work/out" || fail "the DSN error"

step "PostgreSQL: install, init and start on 127.0.0.1"
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
pgbin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
pgctl=$pgbin/pg_ctl
if [[ $(id -u) == 0 ]]; then # initdb refuses root: run the server as the package's user
	id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi
pgdata=$work/pg
mkdir -p "$pgdata"
[[ $(id -u) == 0 ]] && chown postgres "$pgdata"
as_pg "$pgbin/initdb" -D "$pgdata" -U postgres -A trust >/dev/null
port=0
for p in $(shuf -i 20000-60000 -n 100); do # a free random port: nothing answers on it
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[[ $port != 0 ]] || fail "no free port among 100 random ones in 20000-60000"
as_pg "$pgctl" -D "$pgdata" -l "$pgdata/log" -w \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $pgdata -c fsync=off -c max_connections=300" start >/dev/null
echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
dsns=""
procsdsns="" # databases of their own for -procs, which refuses the one-process mode's
for i in $(seq 0 9); do
	as_pg "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres "shard$i"
	as_pg "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres "procs$i"
	dsns+="${dsns:+,}postgres://postgres@127.0.0.1:$port/shard$i?sslmode=disable"
	procsdsns+="${procsdsns:+,}postgres://postgres@127.0.0.1:$port/procs$i?sslmode=disable"
done

step "PostgreSQL: the same round on 10 databases"
expect 0 "$bin" -pg "$dsns"
[[ $(oks "$work/out") == 4 ]] || fail "want 4 passed verifications"
echo "verified on PostgreSQL: 4 resizes, every user's count and checksum, no user on two shards, nothing misplaced"

step "PostgreSQL: crash, refuse marks in an unexpected state, resume"
expect $killed "$bin" -pg "$dsns" -crash-after 40 -crash-point marked
psql=("$pgbin/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d shard0 -v ON_ERROR_STOP=1)
"${psql[@]}" -c "INSERT INTO rebalance_marks VALUES ('someone-else', '7', 2)"
expect 1 "$bin" -pg "$dsns"
grep -q 'marks of migration "someone-else"' "$work/out" || fail "the foreign mark was not named"
"${psql[@]}" -c "DELETE FROM rebalance_marks WHERE migration = 'someone-else'"
expect 0 "$bin" -pg "$dsns"
grep -q 'resuming after a stop' "$work/out" || fail "the run did not resume"
[[ $(grep -c FAILED "$work/out" || true) == 0 ]] || fail "verification"
echo "verified on PostgreSQL: a full round, a crash resumed, foreign marks refused"

step "PostgreSQL, -procs 3 -kill -rogue-mover: the same with the shards in PostgreSQL, etcd embedded"
start=$SECONDS
expect 0 "$bin" -procs 3 -kill -rogue-mover -pg "$procsdsns"
grep -q '^verify: 0 lost, 0 duplicated, 0 misplaced, 0 lost updates, 0 resurrected deletes; .*acknowledged [0-9]* inserts, [1-9][0-9]* updates, [1-9][0-9]* deletes; .* OK$' "$work/out" || fail "verification"
grep -q '^second mover: refused, exit status 1: .*coord: a mover already runs' "$work/out" || fail "a second mover was not refused"
grep -q '^rogue mover (same epoch [0-9]*, no election): refused: .*a mover already runs it: ' "$work/out" || fail "the rogue mover was not refused"
grep -q '^\[parent\] SIGKILL' "$work/out" || fail "nothing was killed"
echo "verified on PostgreSQL in $((SECONDS - start)) s: a second mover refused by the election and a rogue one by the store, nothing lost, duplicated or misplaced, no update lost and no delete undone"

step "rebalance example: all checks passed"
