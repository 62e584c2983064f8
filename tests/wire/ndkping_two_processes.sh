#!/usr/bin/env bash
# Issue 7 §7: ndkping between two processes over iWARP/TCP on loopback, the way rping is used: a server started
# without a peer address, a client given the server's address and port. Both ends must verify every iteration.
set -euo pipefail
ndkping="$1"
size="${2:-4096}"
port=$((20000 + RANDOM % 20000))
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
"$ndkping" --server -a 127.0.0.1 -p "$port" >"$log/server" 2>&1 &
server=$!
for _ in $(seq 50); do grep -q "listening" "$log/server" 2>/dev/null && break; sleep 0.1; done
if ! timeout 60 "$ndkping" --client -a 127.0.0.1 -p "$port" -c 50 -s "$size" >"$log/client" 2>&1; then
    echo "client failed:"; cat "$log/client"; kill "$server" 2>/dev/null || true; cat "$log/server"; exit 1
fi
if ! timeout 30 tail --pid="$server" -f /dev/null; then
    echo "server did not end after the client disconnected"; kill "$server"; cat "$log/server"; exit 1
fi
wait "$server" || { echo "server failed:"; cat "$log/server"; exit 1; }
tail -2 "$log/client"
tail -2 "$log/server"
grep -q "50 iterations, 50 verified, 0 errors" "$log/client"
grep -q "50 iterations, 50 verified, 0 errors" "$log/server"
