#!/usr/bin/env bash
# Regenerates the backend sections (*.cfg) and event vectors (*.txt) of HAProxy's
# hash-balance-factor in testdata/compat/haproxy/bounded/:
#
#     bash testdata/compat/haproxy/bounded/gen.sh        (from the repository root, as root)
#
# It installs Debian's haproxy if missing, builds gen/, and runs it as the first process of
# private network and PID namespaces (unshare), as ../gen.sh does: the fixed ports (20080,
# 31001-31010) are that namespace's own, and the kernel ends HAProxy when gen exits.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

missing=()
for pkg in haproxy iproute2; do
	dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go -C "$here/gen" build -o "$work/gen" .

rm -f "$here"/*.cfg "$here"/*.txt
unshare --net --pid --fork --kill-child \
	sh -c 'ip link set lo up && exec "$0" -dir "$1" -keys "$2" -work "$3"' \
	"$work/gen" "$here" "$here/../../keys.txt" "$work" | tee "$work/gen.log"
cp "$work/gen.log" "$here/gen.log"
