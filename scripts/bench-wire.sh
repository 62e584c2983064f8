#!/usr/bin/env bash
# Issue 7 §8: the wire benchmarks, all in one run, each beside its baseline measured in the same run:
#   - ndkperf between two processes over TCP loopback: write, read, send bandwidth 64 B … 4 MiB, Send ping-pong
#     64 B, 1000 connections (set-up time, memory), the CPU of an idle adapter with a connection open;
#   - iperf3, one stream, the same message sizes (-l);
#   - libfabric's tcp provider: RMA write bandwidth (bench/fi_rma_write_bw) and fi_pingpong (message ping-pong);
#   - a raw TCP ping-pong that busy-polls (bench/tcp_pingpong);
#   - all of it in ROUNDS interleaved rounds; every figure reported is the median of the rounds.
#   - issue 21 §1: each process pinned to one core (taskset), ndkperf and libfabric; ndkperf -q N against
#     iperf3 -P N (N = 1, 2, 4, 8 up to the cores);
# Writes build/release/bench-wire/*.json, then bench/wire_report.py prints the tables and draws
# docs/wire-bandwidth.png and docs/wire-qps.png from the same medians. Usage: scripts/bench-wire.sh [SECONDS_PER_POINT [ROUNDS]]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-1}"
iperf_seconds=$(python3 -c "import math; print(max(1, math.ceil($seconds)))")  # iperf3 -t: whole seconds; 0 runs for ever
rounds="${2:-5}"
scripts/install-deps.sh
packages=(iperf3 libfabric-bin libfabric-dev gnuplot-nox)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cmake --preset release >/dev/null
cmake --preset release >/dev/null  # again: finds libfabric-dev when it was just installed
cmake --build --preset release -j"$(nproc)" --target ndkperf tcp_pingpong fi_rma_write_bw >/dev/null
out=build/release/bench-wire
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.jsonl "$out"/*.txt
ndkperf=build/release/tools/ndkperf
sizes=64,256,1024,4096,16384,65536,262144,1048576,4194304
port() { echo $((20000 + RANDOM % 20000)); }
wait_listening() { for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return; sleep 0.05; done; }
# A TCP port in LISTEN (a busy machine may take more than a fixed sleep to start a server).
wait_port() { for _ in $(seq 200); do ss -ltnH "sport = :$1" | grep -q . && return; sleep 0.05; done; }

# The sweep, in ROUNDS interleaved rounds (default 5): on 2 vCPUs each tool lands in a fast or a slow thread
# placement from run to run, so one sample per tool can compare a fast baseline with a slow ndkperf or the other
# way round. Every figure of the report, its table, its targets and its plot, is the median of the rounds.
for round in $(seq "$rounds"); do
  echo "== round $round of $rounds: ndkperf (two processes, iWARP/TCP loopback), iperf3, libfabric, raw TCP"
  p=$(port)
  : >"$out/ndkperf-server.log"  # emptied here: the server's own redirection may come after the wait
  "$ndkperf" --server -a 127.0.0.1 -p "$p" >"$out/ndkperf-server.log" 2>&1 &
  wait_listening "$out/ndkperf-server.log" listening
  "$ndkperf" --client -a 127.0.0.1 -p "$p" --test all --sizes "$sizes" --seconds "$seconds" --window 16 \
      --latency-sizes 64 --json >"$out/round-$round-ndkperf.json"
  wait
  for size in ${sizes//,/ }; do
    p=$(port)
    iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
    wait_port "$p"
    iperf3 -c 127.0.0.1 -p "$p" -l "$((size > 1048576 ? 1048576 : size))" -t "$iperf_seconds" -J \
        >"$out/round-$round-iperf3-$size.json"  # iperf3 takes -l ≤ 1 MiB
    wait
  done
  build/release/bench/fi_rma_write_bw --sizes "$sizes" --seconds "$seconds" --window 16 \
      >"$out/round-$round-fi_rma_write_bw.jsonl"
  build/release/bench/tcp_pingpong --size 64 --seconds "$seconds" >"$out/round-$round-tcp_pingpong.json"
done

# Issue 21 §1, placement: the rounds above leave every process unpinned (its threads float over the cores, as on a
# server); here each process is pinned to one core with taskset, ndkperf and libfabric alike, which shows what
# the engine alone costs. Server on the first core, client on the last.
server_core=0
client_core=$(($(nproc) - 1))
echo "== pinned: each process on one core (server on core $server_core, client on core $client_core)"
pinned_sizes=64,4096,65536,1048576
p=$(port)
: >"$out/ndkperf-server.log"  # emptied here: the server's own redirection may come after the wait
taskset -c "$server_core" "$ndkperf" --server -a 127.0.0.1 -p "$p" >"$out/ndkperf-server.log" 2>&1 &
wait_listening "$out/ndkperf-server.log" listening
taskset -c "$client_core" "$ndkperf" --client -a 127.0.0.1 -p "$p" --test all --sizes "$pinned_sizes" \
    --seconds "$seconds" --window 16 --latency-sizes 64 --json >"$out/pinned-ndkperf.json"
wait
p=$(port)
taskset -c "$server_core" build/release/bench/fi_rma_write_bw --server --address 127.0.0.1 --port "$p" \
    --sizes "$pinned_sizes" --seconds "$seconds" --window 16 >"$out/fi-server.log" 2>&1 &
wait_port "$p"
taskset -c "$client_core" build/release/bench/fi_rma_write_bw --client --address 127.0.0.1 --port "$p" \
    --sizes "$pinned_sizes" --seconds "$seconds" --window 16 >"$out/pinned-fi_rma_write_bw.jsonl"
wait

# Issue 21 §1, many QPs: ndkperf -q N (N QPs on one adapter, each its own connection, with N progress threads on
# both sides) against iperf3 -P N (N streams), 1 MiB writes, N = 1, 2, 4, 8 up to the cores, interleaved rounds.
qp_counts=()
for n in 1 2 4 8; do [ "$n" -le "$(nproc)" ] && qp_counts+=("$n"); done
for round in $(seq "$rounds"); do
  echo "== round $round of $rounds: -q N QPs against iperf3 -P N (N = ${qp_counts[*]})"
  for n in "${qp_counts[@]}"; do
    p=$(port)
    : >"$out/ndkperf-server.log"  # emptied here: the server's own redirection may come after the wait
    "$ndkperf" --server -a 127.0.0.1 -p "$p" --progress-threads "$n" --max-size 1048576 >"$out/ndkperf-server.log" 2>&1 &
    wait_listening "$out/ndkperf-server.log" listening
    "$ndkperf" --client -a 127.0.0.1 -p "$p" -q "$n" --progress-threads "$n" --test write --sizes 1048576 \
        --seconds "$seconds" --window 16 --latency-sizes 64 --json >"$out/qps-$round-$n-ndkperf.json"
    wait
    p=$(port)
    iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
    wait_port "$p"
    iperf3 -c 127.0.0.1 -p "$p" -P "$n" -l 1048576 -t "$iperf_seconds" -J >"$out/qps-$round-$n-iperf3.json"
    wait
  done
done

echo "== ndkperf, idle with one connection open (5 s)"
p=$(port)
: >"$out/ndkperf-server.log"  # emptied here: the server's own redirection may come after the wait
"$ndkperf" --server -a 127.0.0.1 -p "$p" --max-size 65536 >"$out/ndkperf-server.log" 2>&1 &
wait_listening "$out/ndkperf-server.log" listening
"$ndkperf" --client -a 127.0.0.1 -p "$p" --test write --sizes 64 --seconds 0.1 --latency-sizes 64 --idle 5 \
    --json >"$out/ndkperf-idle.json"
wait

echo "== ndkperf Send ping-pong with the progress threads' busy-poll window off (SOFTNDK_BUSY_POLL_US=0)"
p=$(port)
: >"$out/ndkperf-server.log"  # emptied here: the server's own redirection may come after the wait
SOFTNDK_BUSY_POLL_US=0 "$ndkperf" --server -a 127.0.0.1 -p "$p" --max-size 65536 >"$out/ndkperf-server.log" 2>&1 &
wait_listening "$out/ndkperf-server.log" listening
SOFTNDK_BUSY_POLL_US=0 "$ndkperf" --client -a 127.0.0.1 -p "$p" --test write --sizes 64 --seconds 0.1 \
    --latency-sizes 64 --seconds "$seconds" --json >"$out/ndkperf-busy0.json"
wait

echo "== ndkperf, 1000 connections"
p=$(port)
: >"$out/ndkperf-server.log"  # emptied here: the server's own redirection may come after the wait
"$ndkperf" --server -a 127.0.0.1 -p "$p" --max-size 65536 >"$out/ndkperf-server.log" 2>&1 &
wait_listening "$out/ndkperf-server.log" listening
"$ndkperf" --client -a 127.0.0.1 -p "$p" --test write --sizes 64 --seconds 0.1 --latency-sizes 64 \
    --connections 1000 --json >"$out/ndkperf-connections.json"
wait

echo "== libfabric tcp message ping-pong (fi_pingpong, msg endpoints)"
for size in 64 1024 65536 1048576; do
  iterations=$((size >= 65536 ? 500 : 5000))
  p=$(port)
  timeout 120 fi_pingpong -p tcp -e msg -B "$p" -I "$iterations" -S "$size" >/dev/null 2>&1 &
  wait_port "$p"
  timeout 120 fi_pingpong -p tcp -e msg -P "$p" -I "$iterations" -S "$size" 127.0.0.1 >"$out/fi_pingpong-$size.txt"
  wait
done

python3 bench/wire_report.py "$out" docs/wire-bandwidth.png docs/wire-qps.png
