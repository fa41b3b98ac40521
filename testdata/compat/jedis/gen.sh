#!/usr/bin/env bash
# Regenerates testdata/compat/jedis/: compiles two Jedis releases from a Jedis source
# checkout, starts 10 redis-server processes on random loopback ports, runs gen/JedisGen.java
# (a real ShardedJedis over them) with each release, and stops the servers, even on failure.
#
# Run by hand from the repository root:
#
#   bash testdata/compat/jedis/gen.sh /path/to/jedis
#
# /path/to/jedis is a git clone of github.com/redis/jedis with its tags (Jedis is not in
# Debian and this project does not reach Maven Central; nothing of Jedis is committed here).
# Compiled from it: v3.10.0 (the 2.10+ naming of named shards, the last release with
# ShardedJedis) and jedis-2.9.3 (the last release with the older naming). Also needs a JDK
# (17 or later), redis-server, and Debian's libcommons-pool2-java and libslf4j-java.
set -euo pipefail
cd "$(dirname "$0")"

jedis=${1:?usage: gen.sh /path/to/jedis-git-checkout}
new=v3.10.0
old=jedis-2.9.3
for t in "$new" "$old"; do
	git -C "$jedis" rev-parse -q --verify "$t^{commit}" >/dev/null ||
		{ echo "gen.sh: $jedis has no tag $t" >&2; exit 1; }
done
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v javac >/dev/null || need+=(default-jdk-headless)
[ -f /usr/share/java/commons-pool2.jar ] || need+=(libcommons-pool2-java)
[ -f /usr/share/java/slf4j-api.jar ] || need+=(libslf4j-java)
if [ ${#need[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
deps=/usr/share/java/commons-pool2.jar:/usr/share/java/slf4j-api.jar
nop=/usr/share/java/slf4j-nop.jar # silences SLF4J's no-binder warning

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# build TAG: compiles Jedis's main sources at TAG and our generator against them into $work/TAG.
build() {
	mkdir -p "$work/$1/src" "$work/$1/classes"
	git -C "$jedis" archive "$1" src/main/java | tar -x -C "$work/$1/src"
	find "$work/$1/src" -name '*.java' >"$work/$1/files"
	javac -nowarn -encoding UTF-8 -d "$work/$1/classes" -cp "$deps" @"$work/$1/files" 2>&1 | grep -v '^Note:' || true
	javac -nowarn -encoding UTF-8 -d "$work/$1/classes" -cp "$work/$1/classes:$deps" gen/JedisGen.java 2>&1 | grep -v '^Note:' || true
	[ -f "$work/$1/classes/JedisGen.class" ] || { echo "gen.sh: build of $1 failed" >&2; exit 1; }
}
build "$new"
build "$old"

# start_redis starts one redis-server on a random free port in 20000-60000, retrying on a
# taken port, and sets port.
start_redis() {
	local pid
	for _ in $(seq 50); do
		port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		mkdir -p "$work/redis-$port"
		redis-server --bind 127.0.0.1 --port "$port" --dir "$work/redis-$port" --save '' \
			--appendonly no --logfile "$work/redis-$port/log" >/dev/null 2>&1 &
		pid=$!
		for _ in $(seq 50); do
			if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
				pids+=("$pid")
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
ports=()
for _ in $(seq 10); do
	start_redis
	ports+=("$port")
done

redis=$(redis-server --version | sed 's/ sha=.*//')
redis="$redis (Debian $(dpkg-query -W -f='${Version}' redis-server 2>/dev/null || echo '?'))"
run() { # run TAG VERSION PREFIX ONLY-NAMED OUTDIR
	java -DredisVersion="$redis" -cp "$work/$1/classes:$deps:$nop" JedisGen "$2" ../keys.txt "$5" "$3" "$4" "${ports[@]}"
}

rm -f ./*.json ./*.txt
run "$new" "${new#v}" "" false .
run "$old" "${old#jedis-}" old-naming- true .

# Unnamed shards are named by position in both releases: check 2.9.3 places them the same.
mkdir -p "$work/old-all"
run "$old" "${old#jedis-}" "" false "$work/old-all" >/dev/null
for f in unnamed-*.txt; do
	cmp -s <(grep -v '^#' "$f") <(grep -v '^#' "$work/old-all/$f") ||
		{ echo "gen.sh: $old places $f differently from $new" >&2; exit 1; }
done
echo "unnamed configs: $old and $new agree on every key"
