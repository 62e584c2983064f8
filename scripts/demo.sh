#!/usr/bin/env bash
# Builds the release preset and runs the main demo: adapter info, then registration end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
echo "== ndkinfo"
build/release/tools/ndkinfo
echo "== softndk-demo (inline completions)"
build/release/tools/softndk-demo
echo "== softndk-demo (every call pends)"
build/release/tools/softndk-demo --pend
echo "== ndkping: send, fast-register, RDMA write + read, send-and-invalidate, verified"
build/release/tools/ndkping -c 5
echo "== ndkperf (short run)"
build/release/tools/ndkperf --seconds 0.05 --sizes 64,4096,65536,1048576
