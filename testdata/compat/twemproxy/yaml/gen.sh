#!/usr/bin/env bash
# Records what nutcracker 0.5 says of each YAML file here: verdicts.txt has one line per
# file, "<file> valid" or "<file> invalid", from `nutcracker -t -c <file>` (its syntax
# check: it reads the whole configuration and validates it, listen addresses included).
#   bash testdata/compat/twemproxy/yaml/gen.sh      (from the repository root)
set -euo pipefail
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v nutcracker >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nutcracker >/dev/null
fi
cd "$dir"
{
	echo "# $(nutcracker --version 2>&1 | head -1): nutcracker -t -c <file>"
	for f in *.yml; do
		if nutcracker -t -c "$f" 2>&1 | grep -q 'syntax is ok'; then
			echo "$f valid"
		else
			echo "$f invalid"
		fi
	done
} >verdicts.txt
