#!/usr/bin/env bash
# Regenerates testdata/compat/grpc/: runs gen/, which starts 20 gRPC servers on 127.0.0.1
# (ports the kernel picks) inside its own process, drives a real grpc-go client with each
# configuration against them, and stops them. Run by hand from the repository root:
#   bash testdata/compat/grpc/gen.sh
# Needs Go; grpc-go comes from the Go module proxy at the version pinned in gen/go.mod.
set -euo pipefail
cd "$(dirname "$0")"
rm -f ./*.json ./*.txt
go -C gen run . -keys ../../keys.txt -out ..
