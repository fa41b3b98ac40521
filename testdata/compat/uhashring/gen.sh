#!/usr/bin/env bash
# Regenerates testdata/compat/uhashring from scratch (from the repository root, as root):
#   bash testdata/compat/uhashring/gen.sh
# The three Python clients share one driver and one set of servers: see
# ../pymemcache/gen.sh and ../pymemcache/gen/pyclients.py.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../pymemcache/gen.sh" uhashring
