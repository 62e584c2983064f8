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
