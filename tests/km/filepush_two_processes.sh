#!/usr/bin/env bash
# Issue 9 §4: the sample kernel consumer between two processes over iWARP/TCP. One softndk-kmhost loads
# filepush as the server, another as the client (Role, Port from the driver's registry Parameters); each
# process has its own adapter, so the connection goes over TCP loopback. Both must verify and exit clean, with
# no leaks and no Verifier violation. With FP_EXPECT=abort (an injected fault) one side must abort instead, and
# both must still exit clean. Usage: [FP_EXPECT=abort] filepush_two_processes.sh KMHOST FILEPUSH.so [options]
set -u
kmhost="$1" driver="$2"
shift 2
port=$((20000 + RANDOM % 20000))
log=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; rm -rf "$log"' EXIT
"$kmhost" --verifier abort --stop-when-idle --seconds 60 "$@" --parameter Role=server --parameter "Port=$port" \
    "$driver" >"$log/server" 2>&1 &
server=$!
for _ in $(seq 200); do grep -q "server listening" "$log/server" && break; sleep 0.05; done
"$kmhost" --verifier abort --stop-when-idle --seconds 60 "$@" --parameter Role=client --parameter "Port=$port" \
    --parameter Address=127.0.0.1 "$driver" >"$log/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
echo "== server (exit $server_rc)"; cat "$log/server"
echo "== client (exit $client_rc)"; cat "$log/client"
[ "$server_rc" -eq 0 ] && [ "$client_rc" -eq 0 ] || exit 1
if [ "${FP_EXPECT:-}" = abort ]; then
  grep -q "aborted" "$log/server" "$log/client" || { echo "no side aborted"; exit 1; }
  echo "filepush between two processes: aborted cleanly"
  exit 0
fi
grep -q "server verified" "$log/server" || { echo "the server did not verify the file"; exit 1; }
grep -q "client pushed" "$log/client" || { echo "the client did not finish"; exit 1; }
grep -q "loaded as server" "$log/server" && grep -q "loaded as client" "$log/client" || exit 1
echo "filepush between two processes: verified"
