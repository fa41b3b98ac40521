#!/usr/bin/env bash
# Tests the nested module coord (the placement record in etcd): vet, then the tests with the
# race detector against an etcd server run in the test process and against Debian's
# etcd-server (/usr/bin/etcd, installed here when missing; the tests start it on 127.0.0.1
# on free ports in a temporary directory and stop it). Needs Go and apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -x /usr/bin/etcd ]]; then
	apt-get update -qq
	apt-get install -y -qq etcd-server >/dev/null
	# Debian's package starts a service on the default ports; the tests need none of it.
	systemctl stop etcd 2>/dev/null || service etcd stop 2>/dev/null || true
fi
version=$(/usr/bin/etcd --version)
echo "${version%%$'\n'*}"

# The root module must not depend on etcd: coord is a module of its own.
modules=$(go list -m all)
if grep -q '^go.etcd.io/' <<<"$modules"; then
	echo "FAIL: the root module depends on etcd" >&2
	exit 1
fi

go -C coord vet ./...
# -v shows that the etcd-server cases ran rather than skipped; the RUN lines are left out.
go -C coord test -race -count=1 -v ./... 2>&1 | grep -v '^=== '
