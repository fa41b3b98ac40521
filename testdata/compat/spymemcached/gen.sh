#!/usr/bin/env bash
# Regenerates every file in testdata/compat/spymemcached from scratch:
#   bash testdata/compat/spymemcached/gen.sh        (from the repository root, as root)
# Installs Debian's libspymemcached-java, a JDK and memcached, writes the .conf files,
# compiles gen/SpyVec.java and runs it against real memcached servers on loopback. The
# servers run inside a private network namespace (unshare -n), so the fixed addresses the
# configurations name (127.0.0.1:24101-24110 and 127.0.0.1-10:11211; point names contain
# them, so they must not change between runs) cannot collide with anyone else's, and the
# reverse lookups spymemcached makes cannot leave the machine.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
keys=$(cd "$dir/.." && pwd)/keys.txt
jar=/usr/share/java/spymemcached.jar

if [[ "${1:-}" != --inside ]]; then
	if ! dpkg -s libspymemcached-java memcached >/dev/null 2>&1 || ! command -v javac >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libspymemcached-java memcached default-jdk-headless >/dev/null
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

javac -Xlint:all -Werror -cp "$jar" -d "$work" "$dir/gen/SpyVec.java"
spyvec() { java -cp "$work:$jar" SpyVec "$@" 2>>"$work/log"; }

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

version="spymemcached $(dpkg-query -W -f '${Version}' libspymemcached-java) (Debian libspymemcached-java) on $(java -version 2>&1 | head -1 | tr -d '"'), memcached $(dpkg-query -W -f '${Version}' memcached)"

rm -f "$dir"/*.conf "$dir"/*.txt

conf() {
	local name=$1
	shift
	printf '%s\n' "$@" >"$dir/$name.conf"
}
# loop N: N servers on 127.0.0.1, the first N ports; host NAME N: the same under another name.
loop() { host 127.0.0.1 "$1"; }
host() {
	local h=$1 n=$2 i s=""
	for ((i = 0; i < n; i++)); do s+="${s:+ }$h:${P[i]}"; done
	echo "servers=$s"
}
# std ORDER: servers 127.0.0.X:11211, X taken from ORDER.
std() {
	local x s=""
	for x in $1; do s+="${s:+ }127.0.0.$x:11211"; done
	echo "servers=$s"
}
lower() { tr 'A-Z' 'a-z' <<<"${1%_HASH}"; }

hashes=(NATIVE_HASH CRC_HASH FNV1_64_HASH FNV1A_64_HASH FNV1_32_HASH FNV1A_32_HASH KETAMA_HASH)
shuffled="3 1 10 7 2 9 5 8 4 6"

# KetamaNodeLocator through KetamaConnectionFactory: every hash, both point-name formats.
for h in "${hashes[@]}"; do
	conf "ketama-$(lower "$h")-spy-5" "locator=CONSISTENT" "hash=$h" "format=SPYMEMCACHED" "$(loop 5)"
	conf "ketama-$(lower "$h")-libm-5" "locator=CONSISTENT" "hash=$h" "format=LIBMEMCACHED" "$(loop 5)"
done
for n in 1 2 3 10; do
	conf "ketama-ketama-spy-$n" "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop $n)"
done
conf ketama-ketama-libm-10 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(loop 10)"
conf ketama-ketama-spy-5-localhost "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(host localhost 5)"
conf ketama-ketama-libm-5-localhost "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(host localhost 5)"
conf ketama-ketama-spy-5-11211 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(std "1 2 3 4 5")"
conf ketama-ketama-libm-5-11211 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(std "1 2 3 4 5")"
conf ketama-ketama-spy-10-11211-unordered "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(std "$shuffled")"
conf ketama-native-spy-10-11211-unordered "locator=CONSISTENT" "hash=NATIVE_HASH" "format=SPYMEMCACHED" "$(std "$shuffled")"
# Weights (KetamaConnectionFactory's map): 160 points scaled by weight, 4 from each MD5.
conf ketama-ketama-spy-5w "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop 5)" "weights=1 2 3 4 5"
conf ketama-ketama-libm-5w "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(loop 5)" "weights=1 2 3 4 5"
conf ketama-ketama-libm-3w-localhost "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(host localhost 3)" "weights=1 2 3"
conf ketama-ketama-spy-10w "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop 10)" "weights=1 2 3 5 8 13 21 34 55 89"
conf ketama-ketama-spy-3w1 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop 3)" "weights=1 1 1"
conf ketama-ketama-spy-3w0 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop 3)" "weights=0 1 2"
conf ketama-ketama-spy-3wbig "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop 3)" "weights=1000000000 1 1"
conf ketama-ketama-spy-2wmax "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(loop 2)" "weights=2147483647 0"
conf ketama-native-spy-5w "locator=CONSISTENT" "hash=NATIVE_HASH" "format=SPYMEMCACHED" "$(loop 5)" "weights=1 2 3 4 5"
conf ketama-fnv1a_32-libm-5w "locator=CONSISTENT" "hash=FNV1A_32_HASH" "format=LIBMEMCACHED" "$(loop 5)" "weights=1 2 3 4 5"
conf ketama-crc-spy-5w "locator=CONSISTENT" "hash=CRC_HASH" "format=SPYMEMCACHED" "$(loop 5)" "weights=1 2 3 4 5"
# Accepted without complaint: the same address twice.
conf ketama-ketama-spy-3-duplicate "locator=CONSISTENT" "hash=KETAMA_HASH" \
	"servers=127.0.0.1:${P[0]} 127.0.0.1:${P[1]} 127.0.0.1:${P[0]}"
# ConnectionFactoryBuilder with Locator.CONSISTENT: KetamaNodeLocator, SPYMEMCACHED, no weights.
conf builder-ketama-5 "factory=builder" "locator=CONSISTENT" "hash=KETAMA_HASH" "$(loop 5)"
conf builder-native-5 "factory=builder" "locator=CONSISTENT" "hash=NATIVE_HASH" "$(loop 5)"

# ArrayModNodeLocator: hash % number of servers.
for h in "${hashes[@]}"; do
	conf "arraymod-$(lower "$h")-5" "locator=ARRAY_MOD" "hash=$h" "$(loop 5)"
done
for n in 1 2 3 10; do
	conf "arraymod-native-$n" "locator=ARRAY_MOD" "hash=NATIVE_HASH" "$(loop $n)"
done
conf arraymod-native-10-11211-unordered "locator=ARRAY_MOD" "hash=NATIVE_HASH" "$(std "$shuffled")"
conf arraymod-native-3-duplicate "locator=ARRAY_MOD" "hash=NATIVE_HASH" \
	"servers=127.0.0.1:${P[0]} 127.0.0.1:${P[1]} 127.0.0.1:${P[0]}"
conf arraymod-native-3-commas "locator=ARRAY_MOD" "hash=NATIVE_HASH" \
	"servers=127.0.0.1:${P[0]},127.0.0.1:${P[1]} , 127.0.0.1:${P[2]}"

# Servers given as host/ip pairs, InetSocketAddress(InetAddress.getByAddress(host, ip), port)
# (addresses= in the .conf): the host name is kept as given and nothing is looked up.
# pairs N [PORT]: cache-a/127.0.0.1:P0 ... on the fixed ports, or 127.0.0.X:11211 with 11211.
pairs() {
	local n=$1 i s=""
	local names=(cache-a cache-b cache-c cache-d cache-e)
	for ((i = 0; i < n; i++)); do
		if [[ "${2:-}" == 11211 ]]; then s+="${s:+ }${names[i]}/127.0.0.$((i + 1)):11211"; else s+="${s:+ }${names[i]}/127.0.0.1:${P[i]}"; fi
	done
	echo "addresses=$s"
}
conf pairs-ketama-spy-5 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(pairs 5)"
conf pairs-ketama-libm-5 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(pairs 5)"
conf pairs-ketama-libm-5-11211 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" "$(pairs 5 11211)"
conf pairs-ketama-spy-5-11211 "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(pairs 5 11211)"
conf pairs-ketama-spy-5w "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" "$(pairs 5)" "weights=1 2 3 4 5"
conf pairs-native-spy-5 "locator=CONSISTENT" "hash=NATIVE_HASH" "format=SPYMEMCACHED" "$(pairs 5)"
conf pairs-fnv1a_32-libm-5 "locator=CONSISTENT" "hash=FNV1A_32_HASH" "format=LIBMEMCACHED" "$(pairs 5)"
conf pairs-arraymod-native-5 "locator=ARRAY_MOD" "hash=NATIVE_HASH" "$(pairs 5)"
conf pairs-builder-ketama-5 "factory=builder" "locator=CONSISTENT" "hash=KETAMA_HASH" "$(pairs 5)"
conf pairs-ketama-spy-3-localhost "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" \
	"addresses=localhost/127.0.0.1:${P[0]} localhost/127.0.0.1:${P[1]} localhost/127.0.0.1:${P[2]}"
conf pairs-ketama-spy-3-case "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" \
	"addresses=Cache-A/127.0.0.1:${P[0]},CACHE-B/127.0.0.1:${P[1]} , cache-c/127.0.0.1:${P[2]}"
conf pairs-ketama-spy-3w-same-address "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" \
	"addresses=cache-a/127.0.0.1:${P[0]} cache-b/127.0.0.1:${P[0]} cache-c/127.0.0.1:${P[1]}" "weights=1 2 3"
conf pairs-ketama-spy-3-empty-host "locator=CONSISTENT" "hash=KETAMA_HASH" "format=SPYMEMCACHED" \
	"addresses=/127.0.0.1:${P[0]} /127.0.0.1:${P[1]} /127.0.0.1:${P[2]}"
conf pairs-ketama-libm-3-empty-host "locator=CONSISTENT" "hash=KETAMA_HASH" "format=LIBMEMCACHED" \
	"addresses=/127.0.0.1:${P[0]} /127.0.0.1:${P[1]} /127.0.0.1:${P[2]}"

for f in "$dir"/*.conf; do
	spyvec vectors "$version" "$keys" "$f" >"${f%.conf}.txt" || {
		tail -20 "$work/log" >&2
		echo "failed: $f" >&2
		exit 1
	}
done

# What spymemcached refuses: the configuration and what it answers.
refuse() {
	local name=$1
	shift
	conf "refused-$name" "$@"
	spyvec refuse "$dir/refused-$name.conf" >"$dir/refused-$name.txt"
}
refuse servers-empty "locator=CONSISTENT" "hash=KETAMA_HASH" "servers="
refuse server-no-port "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=127.0.0.1"
refuse server-empty-host "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=:${P[0]}"
refuse server-bad-port "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=127.0.0.1:abc"
refuse server-port-range "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=127.0.0.1:70000"
refuse weight-missing "locator=CONSISTENT" "hash=KETAMA_HASH" "$(loop 3)" "weights=1 2"
refuse weights-all-zero "locator=CONSISTENT" "hash=KETAMA_HASH" "$(loop 2)" "weights=0 0"
refuse weights-overflow "locator=CONSISTENT" "hash=KETAMA_HASH" "$(loop 2)" "weights=2147483647 1"
# Accepted: what AddrUtil makes of odd but legal lists.
refuse_ok() {
	local name=$1
	shift
	conf "accepted-$name" "$@"
	spyvec refuse "$dir/accepted-$name.conf" >"$dir/accepted-$name.txt"
}
refuse_ok ipv6-bracketed "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=[::1]:${P[0]}"
refuse_ok ipv6-bare "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=::1:${P[0]}"
refuse_ok separators "locator=CONSISTENT" "hash=KETAMA_HASH" "servers=, 127.0.0.1:${P[0]},,127.0.0.1:${P[1]}	127.0.0.1:${P[2]} ,"

refuse_ok weights-negative "locator=CONSISTENT" "hash=KETAMA_HASH" "$(loop 2)" "weights=-1 -1"

echo "spymemcached: $(ls "$dir"/*.txt | wc -l) files written"
