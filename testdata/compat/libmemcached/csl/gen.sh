#!/usr/bin/env bash
# Regenerates the .txt of every .csl here from Debian's libmemcached:
#   bash testdata/compat/libmemcached/csl/gen.sh    (from the repository root)
# Installs libmemcached-dev if missing; contacts no server.
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
keys=$(cd "$dir/../.." && pwd)/keys.txt
if ! dpkg -s libmemcached-dev >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmemcached-dev pkg-config gcc >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -Wextra -Werror -o "$work/cslvec" "$dir/cslvec.c" $(pkg-config --cflags --libs libmemcached)
for f in "$dir"/*.csl; do
	name=$(basename "$f" .csl)
	if [[ $name == refused-* ]]; then
		"$work/cslvec" refuse "$f" >"$dir/$name.txt"
	else
		"$work/cslvec" vectors "$keys" "$f" >"$dir/$name.txt"
	fi
done
