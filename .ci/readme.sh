#!/usr/bin/env bash
# Runs every ```sh block of README.md, in order, as a newcomer would: in a fresh clone of
# this repository (a local clone of the commit checked out; uncommitted changes are not in
# it), with the command that the README's `go install ./cmd/shard` installs first on PATH.
# The README's test command, `go test ./...`, is left out here: .ci/run runs it verbatim as
# a step of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone --quiet . "$tmp/shard"
export GOBIN="$tmp/bin" PATH="$tmp/bin:$PATH"

awk -v dir="$tmp" '
	/^```sh$/ { n++; inblock = 1; next }
	/^```$/   { inblock = 0; next }
	inblock   { print > (dir "/block" sprintf("%02d", n) ".sh") }
' README.md
blocks=("$tmp"/block*.sh)
test -e "${blocks[0]}" || { echo "README.md: no sh block" >&2; exit 1; }
for b in "${blocks[@]}"; do
	printf -- '--- README.md, sh block %s\n' "$(basename "$b" .sh | tr -dc 0-9)"
	grep -v '^go test \./\.\.\.$' "$b" >"$b.run" || true
	(cd "$tmp/shard" && bash -euo pipefail -x "$b.run" >"$b.out" 2>&1) || {
		cat "$b.out"
		echo "README.md: a command of the block above failed" >&2
		exit 1
	}
	tail -n 3 "$b.out"
done
echo "README.md: every sh block ran"
