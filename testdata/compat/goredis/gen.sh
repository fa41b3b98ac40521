#!/usr/bin/env bash
# Regenerates testdata/compat/goredis/: starts 10 redis-server processes on random loopback
# ports, runs gen/ (a real go-redis Ring over them) and stops the servers, even on failure.
# Run by hand from the repository root:  bash testdata/compat/goredis/gen.sh
# Needs redis-server (apt-get install redis-server) and Go; go-redis comes from the Go
# module proxy at the version pinned in gen/go.mod.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v redis-server >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# start_redis starts one redis-server on a random free port in 20000-60000, retrying on a
# taken port, and prints host:port.
start_redis() {
	local port pid
	for _ in $(seq 50); do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		mkdir -p "$work/$port"
		redis-server --bind 127.0.0.1 --port "$port" --dir "$work/$port" --save '' \
			--appendonly no --logfile "$work/$port/log" >/dev/null 2>&1 &
		pid=$!
		for _ in $(seq 50); do
			if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
				pids+=("$pid")
				addr="127.0.0.1:$port"
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
	done
	echo "gen.sh: could not start redis-server" >&2
	return 1
}

addrs=()
for _ in $(seq 10); do
	start_redis
	addrs+=("$addr")
done

rm -f ./*.json ./*.txt
redis=$(redis-server --version | sed 's/ sha=.*//')
redis="$redis (Debian $(dpkg-query -W -f='${Version}' redis-server 2>/dev/null || echo '?'))"
go -C gen run . -keys ../../keys.txt -out .. -addrs "$(IFS=,; echo "${addrs[*]}")" -redis "$redis"
