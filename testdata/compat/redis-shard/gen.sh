#!/usr/bin/env bash
# Regenerates testdata/compat/redis-shard from scratch, from the repository root, as root:
#   REDIS_SHARD_SRC=/path/to/redis-shard bash testdata/compat/redis-shard/gen.sh
# REDIS_SHARD_SRC is a git checkout of github.com/zhihu/redis-shard (the vectors were made at
# 113fbebbc2fd94bad8a7d49044d654b075d8ce4d, version 0.3.7); redis-shard is on PyPI only, and
# its code is not copied into this repository. Installs Debian's python3-redis and
# redis-server, re-executes itself in a private network namespace (unshare -n), starts 10
# redis-server processes at 127.0.0.1:22101-22110 and runs gen/redisshard.py under Debian's
# /usr/bin/python3 with the checkout on PYTHONPATH. A trap stops the servers on any exit.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${REDIS_SHARD_SRC:?set REDIS_SHARD_SRC to a checkout of github.com/zhihu/redis-shard}"

if [[ "${1:-}" != --inside ]]; then
	if ! dpkg -s python3-redis redis-server >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-redis redis-server >/dev/null
	fi
	exec unshare --net "$BASH" "${BASH_SOURCE[0]}" --inside
fi

ip link set lo up
work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

for p in $(seq 22101 22110); do
	mkdir -p "$work/$p"
	redis-server --bind 127.0.0.1 --port "$p" --dir "$work/$p" --save '' --appendonly no \
		--logfile "$work/$p/log" >/dev/null 2>&1 &
	pids+=($!)
done
for p in $(seq 22101 22110); do
	for _ in $(seq 50); do
		redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && break
		sleep 0.1
	done
done

rm -f "$dir"/*.json "$dir"/*.txt
PYTHONPATH="$REDIS_SHARD_SRC" /usr/bin/python3 "$dir/gen/redisshard.py" "$dir" "$dir/../keys.txt"
