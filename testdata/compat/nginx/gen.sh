#!/usr/bin/env bash
# Regenerates every upstream block (*.conf), vector file (*.txt) and refused-*.conf in
# testdata/compat/nginx/ from scratch:
#
#     bash testdata/compat/nginx/gen.sh        (from the repository root, as root)
#
# It installs Debian's nginx if missing, builds gen/, and runs it as the first process of
# private network, PID and mount namespaces (unshare): nginx and its backends listen on that
# namespace's own loopback, so the fixed addresses in the committed upstream blocks (ports
# 31001-31010, port 80 on 127.0.0.2 and 127.0.0.3, ::1, a unix socket under /srv) collide
# with nobody and are the same on every run; /etc/hosts inside is Debian's default (localhost
# is 127.0.0.1 and ::1); when the generator exits, however it exits, the kernel ends nginx.
# What gen prints (the observations quoted in README.md) is also left in gen.log.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

missing=()
for pkg in nginx iproute2; do
	dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go -C "$here/gen" build -o "$work/gen" .
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$work/hosts"

rm -f "$here"/*.conf "$here"/*.txt
unshare --net --pid --fork --kill-child --mount \
	sh -c 'ip link set lo up &&
		mount --bind "$3/hosts" /etc/hosts &&
		mount -t tmpfs tmpfs /srv &&
		exec "$0" -dir "$1" -keys "$2" -work "$3"' \
	"$work/gen" "$here" "$here/../keys.txt" "$work" | tee "$work/gen.log"
cp "$work/gen.log" "$here/gen.log"
