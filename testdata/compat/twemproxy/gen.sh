#!/usr/bin/env bash
# Regenerates every configuration and vector file in testdata/compat/twemproxy/ from scratch:
#
#     bash testdata/compat/twemproxy/gen.sh        (from the repository root, as root)
#
# It installs Debian's nutcracker and redis-server if they are missing, builds gen/, and
# runs it as the first process of a private network and PID namespace (unshare): the
# servers listen on that namespace's own 127.0.0.1, so the fixed ports in the committed
# configurations collide with nobody and the names nutcracker hashes ("127.0.0.1:21001")
# are the same on every run; when the generator exits, however it exits, the kernel ends
# every server it started.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

missing=()
for pkg in nutcracker redis-server iproute2; do
	dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go -C "$here/gen" build -o "$work/gen" .

unshare --net --pid --fork --kill-child \
	sh -c 'ip link set lo up && exec "$0" -dir "$1" -keys "$2"' \
	"$work/gen" "$here" "$here/../keys.txt"
