#!/usr/bin/env bash
# Builds the release preset's tools (only what the demo runs: about 30 s on 2 idle cores, a minute busy; the test suites and
# benchmarks are the test command's), quietly unless the build fails, and runs the main demo: adapter info,
# registration end to end, ndkping in one process and between two, a short ndkperf; then three next steps.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== building ndkinfo, softndk-demo, ndkping and ndkperf (release): about 30 s on 2 idle cores the first time, a minute busy"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
started=$SECONDS
if ! { cmake --preset release && cmake --build --preset release --target ndkinfo softndk-demo ndkping ndkperf; } \
    >"$log" 2>&1; then
  cat "$log"  # the compiler's lines only when the build fails
  echo "demo: the build failed (above)"
  exit 1
fi
echo "   built in $((SECONDS - started)) s"
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
echo
echo "== next steps"
echo "  build/release/tools/ndkperf --help                      # every flag and its default; docs/tools.md"
echo "  less samples/um/first_consumer.c                        # a first consumer of your own, commented"
echo "  scripts/test.sh                                         # every test (about 25 minutes on 2 cores)"
