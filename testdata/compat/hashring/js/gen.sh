#!/usr/bin/env bash
# Regenerates the .txt of every .json here with the hashring pinned in ../gen (npm ci):
#   bash testdata/compat/hashring/js/gen.sh      (from the repository root; needs node and npm)
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
trap 'rm -rf ../gen/node_modules' EXIT
npm --prefix ../gen ci --no-audit --no-fund --loglevel=error
node gen.js ../../keys.txt .
