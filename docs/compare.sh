#!/usr/bin/env bash
# Rewrites the "Every strategy" section of docs/measurements.md (between its compare: begin
# and compare: end markers) from one run of `go run ./cmd/shard compare`, dated, with the
# load average before the run. Run it on an idle machine: the timings are one run's.
# `go test -run TestDocsCompare .` then checks the deterministic cells against the code.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out" "$out.md"' EXIT
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo unknown)
start=$(date +%s)
go run ./cmd/shard compare >"$out"
secs=$(($(date +%s) - start))
{
	sed -n '1,/^<!-- compare: begin -->$/p' docs/measurements.md
	printf 'One run on %s, load average %s before it, %d s.\n\n' "$(date -u +%F)" "$load" "$secs"
	cat "$out"
	sed -n '/^<!-- compare: end -->$/,$p' docs/measurements.md
} >"$out.md"
grep -q '^<!-- compare: end -->$' "$out.md" || { echo "docs/measurements.md: markers not found" >&2; exit 1; }
cat "$out.md" >docs/measurements.md
echo "docs/measurements.md: rewritten from one compare run (load average $load before it)"
