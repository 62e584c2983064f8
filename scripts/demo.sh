#!/usr/bin/env bash
# Builds the release preset's tools (only what the demo runs: under 2 minutes on 2 cores; the test suites and
# benchmarks are the test command's) and runs the main demo: adapter info, then registration end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target ndkinfo softndk-demo ndkping ndkperf
echo "== ndkinfo"
build/release/tools/ndkinfo
echo "== softndk-demo (inline completions)"
build/release/tools/softndk-demo
echo "== softndk-demo (every call pends)"
build/release/tools/softndk-demo --pend
echo "== ndkping: send, fast-register, RDMA write + read, send-and-invalidate, verified"
build/release/tools/ndkping -c 5
echo "== ndkping between two processes over iWARP/TCP on loopback (MPA v2 / DDP / RDMAP)"
build/release/tools/ndkping --server -a 127.0.0.1 -p 7174 > >(sed -u 's/^/[server] /') 2>&1 &
server=$!
sleep 0.5
build/release/tools/ndkping --client -a 127.0.0.1 -p 7174 -c 5 -s 64k 2>&1 | sed -u 's/^/[client] /'
wait "$server"
sleep 0.1  # the server's last lines through its prefix
echo "== ndkperf (short run)"
build/release/tools/ndkperf --seconds 0.05 --sizes 64,4096,65536,1048576
