#!/usr/bin/env bash
# Issue 19 §4: samples/km/smbdlite between two processes over iWARP/TCP. One softndk-kmhost loads it as the
# server (its listener's open of the interface, one more open per accepted connection), another as the client
# (two channels, the FRMR pool, IOCTLs to its device). Both must verify, unload through DriverUnload and exit 0:
# no leak, no Verifier report or warning (tolerated rules stop the host here), no refused or failed call. Usage: smbdlite_two_processes.sh KMHOST SMBDLITE.so [kmhost options]
set -u
kmhost="$1" driver="$2"
shift 2
port=$((20000 + RANDOM % 12000))
log=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; rm -rf "$log"' EXIT
export SOFTNDK_VERIFIER_TOLERATED=abort
"$kmhost" --verifier abort --stop-when-idle --seconds 60 "$@" --parameter Role=server --parameter "Port=$port" \
    "$driver" >"$log/server" 2>&1 &
server=$!
for _ in $(seq 200); do grep -q "server listening" "$log/server" && break; sleep 0.05; done
"$kmhost" --verifier abort --stop-when-idle --seconds 60 "$@" --parameter Role=client --parameter "Port=$port" \
    "$driver" >"$log/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
echo "== server (exit $server_rc)"; cat "$log/server"
echo "== client (exit $client_rc)"; cat "$log/client"
[ "$server_rc" -eq 0 ] && [ "$client_rc" -eq 0 ] || exit 1
grep -q "server channel 0 verified" "$log/server" && grep -q "server channel 1 verified" "$log/server" ||
  { echo "the server did not verify both channels"; exit 1; }
grep -q "client wrote and read back" "$log/client" || { echo "the client did not finish"; exit 1; }
grep -q "smbdlite: unloaded" "$log/server" && grep -q "smbdlite: unloaded" "$log/client" ||
  { echo "DriverUnload did not run on both sides"; exit 1; }
if grep -q "refused:\|failed in its completion\|VERIFIER" "$log/server" "$log/client"; then
  echo "a call was refused or failed, or the Verifier spoke"; exit 1
fi
echo "smbdlite between two processes: verified"
