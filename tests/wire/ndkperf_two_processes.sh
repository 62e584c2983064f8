#!/usr/bin/env bash
# Issue 7 §7: ndkperf between two processes over iWARP/TCP on loopback, like ib_write_bw: a server started
# without a peer, a client given its address and port. Every test runs to its end, the JSON report is
# well-formed, every test moved data and every latency is positive, and both processes exit 0. Then the same with
# -q 2 (issue 21 §1).
set -euo pipefail
ndkperf="$1"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
for attempt in 1 2 3; do  # a random port another test holds: the server exits at once, take another
    port=$((20000 + RANDOM % 20000))
    "$ndkperf" --server -a 127.0.0.1 -p "$port" --max-size 1048576 >"$log/server" 2>&1 &
    server=$!
    for _ in $(seq 100); do
        grep -q "listening" "$log/server" 2>/dev/null && break
        kill -0 "$server" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "listening" "$log/server" && break
    echo "server attempt $attempt on port $port: $(cat "$log/server")"
done
if ! timeout 120 "$ndkperf" --client -a 127.0.0.1 -p "$port" --sizes 64,65536,1048576 --seconds 0.05 \
        --latency-sizes 64,4096 --connections 20 --json >"$log/client" 2>"$log/progress"; then
    echo "client failed:"; cat "$log/client" "$log/progress"; kill "$server" 2>/dev/null || true; cat "$log/server"
    exit 1
fi
if ! timeout 30 tail --pid="$server" -f /dev/null; then
    echo "server did not end after the client"; kill "$server"; cat "$log/server"; exit 1
fi
wait "$server" || { echo "server failed:"; cat "$log/server"; exit 1; }
cat "$log/progress"
python3 - "$log/client" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
rows = report["results"]
assert {(r["test"], r["size"]) for r in rows} == {(t, s) for t in ("write", "read", "send") for s in (64, 65536, 1048576)}, rows
# Every test moved data. The rates are rounded to 4 decimals, so a loaded machine's 64 B rate can print as 0.
assert all(r["iterations"] > 0 and r["gbytes_per_s"] >= 0 and r["gbits_per_s"] >= 0 for r in rows), rows
assert [l["size"] for l in report["latency"]] == [64, 4096] and all(l["one_way_p50_ns"] > 0 for l in report["latency"])
assert report["connections"]["count"] == 20 and report["connections"]["setup_us_per_connection"] > 0
print("ndkperf between two processes:", len(rows), "bandwidth rows,", len(report["latency"]), "latency rows, 20 connections")
PY

# Issue 21 §1: -q 2 (two QPs on one adapter, each its own connection, two progress threads each side): every row
# is the sum of both; the extra QP leaves with kLeave, so the server reports no client that left without a Quit.
port=$((20000 + RANDOM % 20000))
: >"$log/server"
"$ndkperf" --server -a 127.0.0.1 -p "$port" --max-size 65536 --progress-threads 2 >"$log/server" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "listening" "$log/server" 2>/dev/null && break; sleep 0.1; done
if ! timeout 120 "$ndkperf" --client -a 127.0.0.1 -p "$port" -q 2 --progress-threads 2 --sizes 4096,65536 \
        --seconds 0.05 --latency-sizes 64 --json >"$log/client" 2>"$log/progress"; then
    echo "client -q 2 failed:"; cat "$log/client" "$log/progress"; kill "$server" 2>/dev/null || true; cat "$log/server"
    exit 1
fi
wait "$server" || { echo "server failed (-q 2):"; cat "$log/server"; exit 1; }
if grep -q "left without a Quit" "$log/server"; then echo "the extra QP left without kLeave:"; cat "$log/server"; exit 1; fi
grep -q "4 KiB, 2 QPs" "$log/progress" || { echo "no 2-QP progress line:"; cat "$log/progress"; exit 1; }
python3 - "$log/client" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["qps"] == 2, report
rows = report["results"]
assert {(r["test"], r["size"]) for r in rows} == {(t, s) for t in ("write", "read", "send") for s in (4096, 65536)}, rows
assert all(r["iterations"] > 0 for r in rows), rows
assert report["latency"][0]["one_way_p50_ns"] > 0
print("ndkperf -q 2:", len(rows), "summed bandwidth rows, the ping-pong on the first QP")
PY
# -q 4, five times: every extra QP leaves cleanly, so the server says nothing of it (a flushed receive read before
# the disconnect event once made it report 'a request failed ... dropped client', about 1 run in 7).
for run in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    "$ndkperf" --server -a 127.0.0.1 -p "$port" >"$log/server" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q "listening" "$log/server" 2>/dev/null && break; sleep 0.1; done
    timeout 120 "$ndkperf" --client -a 127.0.0.1 -p "$port" -q 4 --test write --sizes 4096 --seconds 0.05 \
        --latency-sizes 64 >"$log/client" 2>&1 || { echo "client -q 4 failed:"; cat "$log/client"; exit 1; }
    wait "$server" || { echo "server failed (-q 4):"; cat "$log/server"; exit 1; }
    if grep -q "a request failed\|dropped client\|left without a Quit" "$log/server"; then
        echo "run $run: a clean -q 4 client was reported:"; cat "$log/server"; exit 1
    fi
done
echo "ndkperf -q 4: 5 runs, every QP left cleanly and the server said nothing of it"
