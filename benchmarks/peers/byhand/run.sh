#!/usr/bin/env bash
# Builds this command with the peers in a throwaway module and runs it (README.md).
#
#   bash benchmarks/peers/byhand/run.sh [flags of the command, e.g. -files -rounds 31]
#
# SRC is a directory holding one git repository per peer, named owner+name (the layout the
# workplace's fetch tool makes under /work/.mirror: owner+name/repo[/.git]; a plain
# `git clone https://github.com/owner/name SRC/owner+name` works too). Each is exported at
# the commit measured, never at whatever it holds now. WORK (default: a new temporary
# directory) receives the copies and the throwaway module; nothing is written elsewhere.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
src=${SRC:-/work/.mirror}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work/src" "$work/run"

# owner+name, commit, the module path its copy gets, and the requirements of a go.mod
# written for it when it has none.
peers=(
	"dgryski+go-ketama 8c956565334cb132fb0564e4530fe19d8622e07e github.com/dgryski/go-ketama"
	"wrighty+ketama 4206f55a0783af1c0ce8b3c939f9f898bcb22a76 github.com/wrighty/ketama"
	"ngerakines+ketama cd07782dc5773e8b31cf183130600896cd8eb975 github.com/ngerakines/ketama"
	"rckclmbr+goketama ac3ec91389c8f8d3b0229d806569b6ddbb286219 github.com/rckclmbr/goketama"
	"dgryski+dgohash bc94635621ad3f49136978c8101d13bc0919b17d github.com/dgryski/dgohash"
	"thatguystone+gomcketama 336824dff12e6bba79684ff8d0ca8f4e1c731d54 github.com/thatguystone/gomcketama github.com/bradfitz/gomemcache@v0.0.0-20230905024940-24af94b03874"
	"signalfx+golib dc8e11133702b0b9270819dc211ec2baa742e36c github.com/signalfx/golib/v3"
	"signalfx+gomemcache a50980b0b1dbce391de172ad2ea2b54ba57b425b github.com/signalfx/gomemcache"
	"alicebob+shredis 47b5869f50a6d20b9b26d9c403a7484fdc82ff7b github.com/alicebob/shredis github.com/realzeitmedia/fnv@v0.0.0"
	"realzeitmedia+fnv f137bd26a31bc6afa190e5a31dcd8e501b8790c1 github.com/realzeitmedia/fnv"
	"TysonAndre+golemproxy cacfd1af6f6c4320d572385eded82958a15fcca4 github.com/TysonAndre/golemproxy"
	"bydsky+nchash 7556a21f7657fa4bf89069428a55e7d41d9216b1 github.com/bydsky/nchash"
)

gitdir() { # the git directory of owner+name under $src
	for d in "$src/$1/repo/.git" "$src/$1/repo" "$src/$1/.git" "$src/$1"; do
		if git --git-dir="$d" rev-parse --git-dir >/dev/null 2>&1; then
			echo "$d"
			return
		fi
	done
	echo "run.sh: no git repository for $1 under $src" >&2
	return 1
}

{
	echo "module byhandrun"
	echo
	echo "go 1.26.0"
	echo
	echo "require github.com/shardkit/shard v0.0.0-00010101000000-000000000000"
	echo "replace github.com/shardkit/shard => $repo"
} >"$work/run/go.mod"

for p in "${peers[@]}"; do
	read -r name commit module requires <<<"$p"
	dir="$work/src/$name"
	rm -rf "$dir"
	mkdir -p "$dir"
	git --git-dir="$(gitdir "$name")" archive "$commit" | tar -x -C "$dir"
	if [ "$name" = signalfx+golib ]; then
		# Only gojavahash: the rest of golib needs modules the proxy does not serve.
		find "$dir" -mindepth 1 -maxdepth 1 ! -name gojavahash ! -name LICENSE -exec rm -rf {} +
		rm -f "$dir/go.mod" "$dir/go.sum"
		requires="github.com/signalfx/gomemcache@v0.0.0"
	fi
	if [ ! -f "$dir/go.mod" ]; then
		{
			echo "module $module"
			echo
			echo "go 1.21"
			for r in $requires; do echo "require ${r%@*} ${r#*@}"; done
		} >"$dir/go.mod"
	fi
	version=v0.0.0
	if [[ $module =~ /v([0-9]+)$ ]]; then version=v${BASH_REMATCH[1]}.0.0; fi
	{
		echo "require $module $version"
		echo "replace $module => $dir"
	} >>"$work/run/go.mod"
done
# golemproxy's go.mod asks for its own fork of gomemcache, which the proxy does not serve;
# the packages measured do not import it, so any version will do for the module graph.
echo "replace github.com/TysonAndre/gomemcache => $work/src/empty" >>"$work/run/go.mod"
mkdir -p "$work/src/empty"
echo "module github.com/TysonAndre/gomemcache" >"$work/src/empty/go.mod"

cp "$here/main.go" "$here/peers.go" "$work/run/"
cd "$work/run"
go mod tidy
echo "run.sh: throwaway module in $work/run" >&2
go run -tags byhand . -testdata "$repo/testdata/compat" "$@"
