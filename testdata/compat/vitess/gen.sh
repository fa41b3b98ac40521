#!/usr/bin/env bash
# Regenerates testdata/compat/vitess/: runs gen/, which maps every value with Vitess's own
# vindexes and resolves the keyspace ids over Vitess's own shard checks and key ranges, and
# records the unicode_loose collation's ASCII weights. Run by hand from the repository root:
#   bash testdata/compat/vitess/gen.sh
# Needs Go; Vitess comes from the Go module proxy at the version pinned in gen/go.mod (its
# first build takes a minute or two).
set -euo pipefail
cd "$(dirname "$0")"
rm -f ./*.json ./*.txt
go -C gen run . -keys ../../keys.txt -out ..
