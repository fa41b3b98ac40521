#!/usr/bin/env bash
# gen.sh regenerates the Redis Cluster reference data in this directory from a real
# redis-server and redis-cli (Debian packages redis-server and redis-tools):
#
#   cluster-create.txt  the slot ranges a real cluster ends up with after
#                       redis-cli --cluster create with 3..8 masters, read back from CLUSTER NODES;
#   cli-plan.txt        the split redis-cli prints ("Master[i] -> Slots a - b") for more master
#                       counts; the plan is answered "no", so one server listed m times suffices.
#
# keyslot.txt is written by TestRedisSlotLive with -redis-golden instead. Run from anywhere:
#   testdata/redis/gen.sh
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
base=${BASE_PORT:-27100}
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

start() { # start PORT: a fresh, empty cluster-mode server on 127.0.0.1:PORT
	mkdir -p "$tmp/$1"
	redis-server --port "$1" --bind 127.0.0.1 --cluster-enabled yes \
		--cluster-config-file "$tmp/$1/nodes.conf" --dir "$tmp/$1" \
		--save '' --appendonly no --loglevel warning >"$tmp/$1/log" 2>&1 &
	pids+=($!)
	until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.05; done
}

version=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')

{
	echo "# masters first last master: slots owned by the master given at that position to"
	echo "# redis-cli --cluster create (CLUSTER NODES afterwards), redis $version"
	for n in 3 4 5 6 7 8; do
		addrs=()
		for i in $(seq 0 $((n - 1))); do
			port=$((base + n * 10 + i))
			start "$port"
			addrs+=("127.0.0.1:$port")
		done
		redis-cli --cluster create "${addrs[@]}" --cluster-yes >"$tmp/create-$n.log" 2>&1
		first=$((base + n * 10))
		redis-cli -p "$first" cluster nodes | awk -v n="$n" -v first="$first" '
			{
				split($2, a, "[:@]"); idx = a[2] - first
				for (f = 9; f <= NF; f++) { split($f, r, "-"); if (r[2] == "") r[2] = r[1]; print n, r[1], r[2], idx }
			}' | sort -n -k2
		for i in $(seq 0 $((n - 1))); do redis-cli -p $((base + n * 10 + i)) shutdown nosave >/dev/null 2>&1 || true; done
	done
} >"$out/cluster-create.txt"

start "$base"
{
	echo "# masters index first last: the split redis-cli --cluster create prints, redis $version"
	for m in $(seq 3 64) 77 78 79 100 128 200 500 1000; do
		args=()
		for _ in $(seq "$m"); do args+=("127.0.0.1:$base"); done
		echo no | redis-cli --cluster create "${args[@]}" 2>&1 |
			sed -n 's/.*Master\[\([0-9]*\)\] -> Slots \([0-9]*\) - \([0-9]*\).*/\1 \2 \3/p' |
			awk -v m="$m" '{ print m, $1, $2, $3 }'
	done
} >"$out/cli-plan.txt"
redis-cli -p "$base" shutdown nosave >/dev/null 2>&1 || true
