#!/usr/bin/env bash
# Regenerates every file in testdata/compat/libmemcached from scratch:
#   bash testdata/compat/libmemcached/gen.sh        (from the repository root, as root)
# Installs Debian's libmemcached-dev and memcached, writes the .conf files, builds
# gen/lmvec.c, and runs it against real memcached servers on loopback. The servers run
# inside a private network namespace (unshare -n), so the fixed addresses the
# configurations name (127.0.0.1:24101-24110 and 127.0.0.1-10:11211; point names contain
# host and port, so they must not change between runs) cannot collide with anyone else's.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
keys=$(cd "$dir/.." && pwd)/keys.txt

if [[ "${1:-}" != --inside ]]; then
	if ! dpkg -s libmemcached-dev memcached >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmemcached-dev memcached pkg-config gcc >/dev/null
	fi
	exec unshare --net "$BASH" "${BASH_SOURCE[0]}" --inside
fi

# From here on: inside the private network namespace.
ip link set lo up

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

gcc -O2 -Wall -Wextra -Werror -o "$work/lmvec" "$dir/gen/lmvec.c" \
	$(pkg-config --cflags --libs libmemcached)

P=(24101 24102 24103 24104 24105 24106 24107 24108 24109 24110)
for p in "${P[@]}"; do
	memcached -u nobody -U 0 -l 127.0.0.1 -p "$p" -m 64 -t 1 &
	pids+=($!)
done
for i in 1 2 3 4 5 6 7 8 9 10; do
	memcached -u nobody -U 0 -l "127.0.0.$i" -p 11211 -m 64 -t 1 &
	pids+=($!)
done
for _ in $(seq 50); do
	ok=1
	for p in "${P[@]}"; do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || ok=0; done
	for i in 1 2 3 4 5 6 7 8 9 10; do (exec 3<>"/dev/tcp/127.0.0.$i/11211") 2>/dev/null || ok=0; done
	[[ $ok == 1 ]] && break
	sleep 0.1
done

version="libmemcached $(dpkg-query -W -f '${Version}' libmemcached11) (Debian libmemcached11), memcached $(dpkg-query -W -f '${Version}' memcached)"

rm -f "$dir"/*.conf "$dir"/*.txt

# conf NAME LINE...: writes one configuration.
conf() {
	local name=$1
	shift
	printf '%s\n' "$@" >"$dir/$name.conf"
}
# loop N [W...]: "server" lines for 127.0.0.1 on the first N ports, weights W (default 0).
loop() {
	local n=$1 i
	shift
	local w=("$@")
	for ((i = 0; i < n; i++)); do echo "server 127.0.0.1 ${P[i]} ${w[i]:-0}"; done
}
# std ORDER [W...]: "server" lines for 127.0.0.X:11211, X taken from ORDER (e.g. "3 1 2").
std() {
	local order=($1) i=0 x
	shift
	local w=("$@")
	for x in "${order[@]}"; do
		echo "server 127.0.0.$x 11211 ${w[i]:-0}"
		i=$((i + 1))
	done
}

hashes=(DEFAULT MD5 CRC FNV1_64 FNV1A_64 FNV1_32 FNV1A_32 MURMUR MURMUR3 JENKINS)
lower() { tr 'A-Z' 'a-z' <<<"$1"; }
shuffled="3 1 10 7 2 9 5 8 4 6"

# MODULA: hash % number of servers.
for h in "${hashes[@]}"; do
	conf "modula-$(lower "$h")-5" "behavior DISTRIBUTION MODULA" "behavior HASH $h" "$(loop 5)"
done
for n in 1 2 3 10; do
	conf "modula-default-$n" "behavior DISTRIBUTION MODULA" "$(loop $n)"
done
conf modula-md5-5w "behavior DISTRIBUTION MODULA" "behavior HASH MD5" "$(loop 5 1 2 3 4 5)"
conf modula-md5-10-11211-unsorted "behavior HASH MD5" "$(std "$shuffled")"
conf modula-md5-10-11211-sorted "behavior HASH MD5" "behavior SORT_HOSTS 1" "$(std "$shuffled")"

# CONSISTENT (= CONSISTENT_KETAMA): 100 points a server, named and hashed with the key hash.
for h in "${hashes[@]}"; do
	conf "consistent-$(lower "$h")-5" "behavior DISTRIBUTION CONSISTENT" "behavior HASH $h" "$(loop 5)"
done
for n in 1 2 3 10; do
	conf "consistent-default-$n" "behavior DISTRIBUTION CONSISTENT" "$(loop $n)"
done
conf ketama-default-5 "behavior DISTRIBUTION CONSISTENT_KETAMA" "$(loop 5)"
conf ketama-behavior-md5-5 "behavior KETAMA 1" "behavior HASH MD5" "$(loop 5)"
conf ketama-ketamahash-md5-5 "behavior DISTRIBUTION CONSISTENT_KETAMA" "behavior KETAMA_HASH MD5" "$(loop 5)"
conf ketama-md5-ketamahash-crc-5 "behavior DISTRIBUTION CONSISTENT_KETAMA" "behavior HASH MD5" "behavior KETAMA_HASH CRC" "$(loop 5)"
conf consistent-md5-5-11211 "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" "$(std "1 2 3 4 5")"
conf consistent-md5-4-mixedports "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" \
	"server 127.0.0.1 11211 0" "server 127.0.0.2 11211 0" "server 127.0.0.1 ${P[2]} 0" "server 127.0.0.1 ${P[3]} 0"
conf consistent-md5-3-localhost "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" \
	"server localhost ${P[0]} 0" "server localhost ${P[1]} 0" "server localhost ${P[2]} 0"
conf consistent-md5-10-11211-unsorted "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" "$(std "$shuffled")"
conf consistent-md5-10-11211-sorted "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" "behavior SORT_HOSTS 1" "$(std "$shuffled")"
conf consistent-md5-3w-after "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" "$(loop 3 1 2 3)"
conf consistent-md5-3w-before "behavior HASH MD5" "$(loop 3 1 2 3)" "behavior DISTRIBUTION CONSISTENT"
conf consistent-md5-3w-push "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" \
	"servers 127.0.0.1:${P[0]}:1, 127.0.0.1:${P[1]}:2, 127.0.0.1:${P[2]}:3"
conf consistent-md5-3-push "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" \
	"servers 127.0.0.1:${P[0]}, 127.0.0.1:${P[1]}, 127.0.0.1:${P[2]}"

# CONSISTENT_WEIGHTED (KETAMA_WEIGHTED): 160 points a server scaled by weight, 4 from each MD5.
for n in 1 2 3 5 10; do
	conf "weighted-md5-$n" "behavior KETAMA_WEIGHTED 1" "$(loop $n)"
done
conf weighted-md5-5w "behavior KETAMA_WEIGHTED 1" "$(loop 5 1 2 3 4 5)"
conf weighted-md5-10w "behavior KETAMA_WEIGHTED 1" "$(loop 10 1 2 3 5 8 13 21 34 55 89)"
conf weighted-md5-3w0 "behavior KETAMA_WEIGHTED 1" "$(loop 3 0 1 2)"
conf weighted-md5-3wmax "behavior KETAMA_WEIGHTED 1" "$(loop 3 4294967295 1 1)"
conf weighted-md5-3wmax-all "behavior KETAMA_WEIGHTED 1" "$(loop 3 4294967295 4294967295 4294967295)"
conf weighted-md5-3w100 "behavior KETAMA_WEIGHTED 1" "$(loop 3 100 1 1)"
conf weighted-md5-3w-localhost "behavior KETAMA_WEIGHTED 1" \
	"server localhost ${P[0]} 1" "server localhost ${P[1]} 2" "server localhost ${P[2]} 3"
conf weighted-default-5w "behavior DISTRIBUTION CONSISTENT_WEIGHTED" "$(loop 5 1 2 3 4 5)"
conf weighted-crc-5w "behavior KETAMA_WEIGHTED 1" "behavior HASH CRC" "$(loop 5 1 2 3 4 5)"
conf weighted-fnv1a_32-5w "behavior KETAMA_WEIGHTED 1" "behavior HASH FNV1A_32" "$(loop 5 1 2 3 4 5)"
conf weighted-md5-5w-11211 "behavior KETAMA_WEIGHTED 1" "$(std "1 2 3 4 5" 1 2 3 4 5)"
conf weighted-md5-10w-11211-unsorted "behavior KETAMA_WEIGHTED 1" "$(std "$shuffled" 1 2 3 4 5 6 7 8 9 10)"
conf weighted-md5-10w-11211-sorted "behavior KETAMA_WEIGHTED 1" "behavior SORT_HOSTS 1" "$(std "$shuffled" 1 2 3 4 5 6 7 8 9 10)"

# CONSISTENT_KETAMA_SPY: points named "/host:port-i".
conf spy-default-3 "behavior DISTRIBUTION CONSISTENT_KETAMA_SPY" "$(loop 3)"
conf spy-md5-5 "behavior DISTRIBUTION CONSISTENT_KETAMA_SPY" "behavior HASH MD5" "$(loop 5)"
conf spy-md5-5-11211 "behavior DISTRIBUTION CONSISTENT_KETAMA_SPY" "behavior HASH MD5" "$(std "1 2 3 4 5")"
conf spy-weighted-md5-3 "behavior KETAMA_WEIGHTED 1" "behavior DISTRIBUTION CONSISTENT_KETAMA_SPY" "$(loop 3)"
conf spy-weighted-md5-5 "behavior KETAMA_WEIGHTED 1" "behavior DISTRIBUTION CONSISTENT_KETAMA_SPY" "$(loop 5)"
conf spy-md5-5w "behavior DISTRIBUTION CONSISTENT_KETAMA_SPY" "behavior HASH MD5" "$(loop 5 1 2 3 4 5)"

# Other options that change placement, and what libmemcached accepts without complaint.
conf namespace-md5-5 "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" \
	"namespace app:" "behavior HASH_WITH_PREFIX_KEY 1" "$(loop 5)"
conf duplicate-md5-3 "behavior DISTRIBUTION CONSISTENT" "behavior HASH MD5" \
	"server 127.0.0.1 ${P[0]} 0" "server 127.0.0.1 ${P[1]} 0" "server 127.0.0.1 ${P[0]} 0"

for f in "$dir"/*.conf; do
	"$work/lmvec" vectors "$version" "$keys" "$f" >"${f%.conf}.txt" || { echo "failed: $f" >&2; exit 1; }
done

# Configurations libmemcached refuses: each call and libmemcached's answer.
refuse() {
	local name=$1
	shift
	conf "refused-$name" "$@"
	"$work/lmvec" refuse "$dir/refused-$name.conf" >"$dir/refused-$name.txt"
}
refuse hash-hsieh "behavior HASH HSIEH"
refuse ketama-hash-hsieh "behavior KETAMA_HASH HSIEH"
refuse hash-custom "behavior HASH 11"
refuse distribution-invalid "behavior DISTRIBUTION 7"
refuse verify-key-binary "behavior BINARY_PROTOCOL 1" "behavior VERIFY_KEY 1"
refuse hostname-too-long "server $(printf 'h%.0s' $(seq 1025)) ${P[0]} 0"
refuse servers-port-overflow "servers 127.0.0.1:99999999999999999999999"
refuse servers-weight-overflow "servers 127.0.0.1:${P[0]}:99999999999999999999999"
# Not refused, recorded so a preset can do the same: what memcached_servers_parse makes of odd lines.
conf parse-lenient \
	"servers 127.0.0.1" \
	"servers 127.0.0.1:70000" \
	"servers 127.0.0.1:abc" \
	"servers 127.0.0.1:${P[0]}:7" \
	"servers 127.0.0.1:${P[0]} 7" \
	"servers 127.0.0.1:${P[0]}:-1" \
	"servers 127.0.0.1:${P[0]}:0" \
	"servers a, b,c ,d" \
	"servers [::1]:${P[0]}:3" \
	"servers ,127.0.0.1:${P[0]}" \
	"servers 127.0.0.1:${P[0]},,127.0.0.1:${P[1]}" \
	"servers host name:${P[0]}" \
	"servers /tmp/socket" \
	"servers 127.0.0.1:${P[0]}, 127.0.0.1:${P[0]}"
"$work/lmvec" refuse "$dir/parse-lenient.conf" >"$dir/parse-lenient.txt"

echo "libmemcached: $(ls "$dir"/*.txt | wc -l) files written"
