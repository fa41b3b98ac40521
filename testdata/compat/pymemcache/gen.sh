#!/usr/bin/env bash
# Regenerates the vectors of the Python memcached clients from scratch, from the repository
# root, as root (it uses apt and unshare):
#   bash testdata/compat/pymemcache/gen.sh [SYSTEM...]   (pymemcache uhashring python-memcache;
#                                                        all three when none is named)
# Installs Debian's python3-pymemcache, python3-uhashring, python3-memcache and memcached,
# then re-executes itself in a private network namespace (unshare -n), where it starts 15
# memcached servers at fixed addresses (127.0.0.1:21201-21210 and 127.0.0.1-5:11211: the
# clients hash the server names, so they must not change between runs, and the private
# namespace keeps them from colliding with anyone's) and runs gen/pyclients.py for each
# system under Debian's /usr/bin/python3. A trap stops the servers on any exit.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
compat=$(cd "$dir/.." && pwd)

if [[ "${1:-}" != --inside ]]; then
	if ! dpkg -s python3-pymemcache python3-uhashring python3-memcache memcached >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pymemcache python3-uhashring python3-memcache memcached >/dev/null
	fi
	exec unshare --net "$BASH" "${BASH_SOURCE[0]}" --inside "$@"
fi
shift
systems=("$@")
[[ ${#systems[@]} == 0 ]] && systems=(pymemcache uhashring python-memcache)

ip link set lo up
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

addrs=()
for p in $(seq 21201 21210); do addrs+=("127.0.0.1 $p"); done
for i in 1 2 3 4 5; do addrs+=("127.0.0.$i 11211"); done
for a in "${addrs[@]}"; do
	read -r host port <<<"$a"
	memcached -u nobody -U 0 -l "$host" -p "$port" -m 64 -t 1 &
	pids+=($!)
done
for _ in $(seq 50); do
	ok=1
	for a in "${addrs[@]}"; do
		read -r host port <<<"$a"
		(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null || ok=0
	done
	[[ $ok == 1 ]] && break
	sleep 0.1
done

for s in "${systems[@]}"; do
	rm -f "$compat/$s"/*.json "$compat/$s"/*.txt
	/usr/bin/python3 "$dir/gen/pyclients.py" "$s" "$compat/$s" "$compat/keys.txt"
done
