#!/usr/bin/env bash
# Regenerates testdata/compat/hashring/: installs the hashring version pinned in
# gen/package-lock.json from the npm registry (npm ci) and runs gen/gen.js, which calls the
# real ring.get for every key and configuration. Needs node and npm.
# Run by hand from the repository root:  bash testdata/compat/hashring/gen.sh
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
trap 'rm -rf gen/node_modules' EXIT
npm --prefix gen ci --no-audit --no-fund --loglevel=error
npm --prefix gen ls --all
rm -f ./*.json ./*.txt
node gen/gen.js ../keys.txt .
