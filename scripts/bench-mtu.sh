#!/usr/bin/env bash
# Issue 21 §1: the wire across a real MTU. Two network namespaces joined by a veth pair at MTU 1500 and 9000;
# in each, ndkperf (its adapter bound to its end with SOFTNDK_INTERFACE), iperf3 with the same -l, and
# libfabric's tcp provider (bench/fi_rma_write_bw) on that same pair, interleaved in ROUNDS rounds; every figure
# is the median of the rounds. Needs root (ip netns). Prints one table per MTU.
# Usage: scripts/bench-mtu.sh [SECONDS_PER_POINT [ROUNDS [MTUS]]]   e.g. scripts/bench-mtu.sh 1 3 "1500 9000"
# NDKPERF=path overrides the ndkperf binary (an A/B of two builds).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-1}"
rounds="${2:-3}"
mtus="${3:-1500 9000}"
iperf_seconds=$(python3 -c "import math; print(max(1, math.ceil($seconds)))")
ndkperf="${NDKPERF:-build/release/tools/ndkperf}"
fi_rma=build/release/bench/fi_rma_write_bw
[ "$(id -u)" -eq 0 ] || { echo "bench-mtu: needs root for ip netns"; exit 77; }
if [ -z "${NDKPERF:-}" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target ndkperf fi_rma_write_bw >/dev/null
fi
sizes="4096 65536 1048576"
a="ndkmtu-a-$$" b="ndkmtu-b-$$" va="mtua$$" vb="mtub$$"
out=$(mktemp -d)
cleanup() {
  for ns in "$a" "$b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$out"
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add 10.213.0.1/24 dev "$va"
ip -n "$b" addr add 10.213.0.2/24 dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up
in_a() { ip netns exec "$a" env SOFTNDK_INTERFACE="$va" "$@"; }
in_b() { ip netns exec "$b" env SOFTNDK_INTERFACE="$vb" "$@"; }
for _ in $(seq 50); do ip netns exec "$a" ping -c1 -W1 10.213.0.2 >/dev/null 2>&1 && break; sleep 0.1; done
wait_log() { for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return; sleep 0.05; done; }

for mtu in $mtus; do
  ip -n "$a" link set "$va" mtu "$mtu"
  ip -n "$b" link set "$vb" mtu "$mtu"
  for round in $(seq "$rounds"); do
    port=$((20000 + RANDOM % 20000))
    : >"$out/server.log"  # emptied here: the server's own redirection may come after the wait below
    in_a "$ndkperf" --server -a 10.213.0.1 -p "$port" >"$out/server.log" 2>&1 &
    wait_log "$out/server.log" listening
    in_b "$ndkperf" --client -a 10.213.0.1 -p "$port" --test all --sizes "${sizes// /,}" \
        --seconds "$seconds" --window 16 --json >"$out/ndk-$mtu-$round.json"
    wait
    for size in $sizes; do
      port=$((20000 + RANDOM % 20000))
      ip netns exec "$a" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
      sleep 0.3
      ip netns exec "$b" iperf3 -c 10.213.0.1 -p "$port" -l "$((size > 1048576 ? 1048576 : size))" \
          -t "$iperf_seconds" -J >"$out/iperf-$mtu-$size-$round.json"
      wait
    done
    if [ -x "$fi_rma" ]; then
      port=$((20000 + RANDOM % 20000))
      ip netns exec "$a" "$fi_rma" --server --address 10.213.0.1 --port "$port" --sizes "${sizes// /,}" \
          --seconds "$seconds" --window 16 >"$out/fi-server.log" 2>&1 &
      sleep 0.5
      ip netns exec "$b" "$fi_rma" --client --address 10.213.0.1 --port "$port" --sizes "${sizes// /,}" \
          --seconds "$seconds" --window 16 >"$out/fi-$mtu-$round.json" 2>"$out/fi-client.log" || true
      wait || true
    fi
  done
done

python3 - "$out" "$rounds" "$mtus" "$sizes" <<'EOF'
import json, statistics, sys, glob, os
out, rounds, mtus, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), [int(s) for s in sys.argv[4].split()]
def name(size):
    return f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
def ndk(mtu, test, size):
    values = []
    for r in range(1, rounds + 1):
        data = json.load(open(f"{out}/ndk-{mtu}-{r}.json"))
        values += [x["gbits_per_s"] for x in data["results"] if x["test"] == test and x["size"] == size]
    return statistics.median(values) if values else 0.0
def iperf(mtu, size):
    values = []
    for r in range(1, rounds + 1):
        data = json.load(open(f"{out}/iperf-{mtu}-{size}-{r}.json"))
        values.append(data["end"]["sum_received"]["bits_per_second"] / 1e9)
    return statistics.median(values)
def fabric(mtu, size):
    values = []
    for r in range(1, rounds + 1):
        path = f"{out}/fi-{mtu}-{r}.json"
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            continue
        for line in open(path):
            if line.strip():
                row = json.loads(line)
                if row["size"] == size:
                    values.append(row["gbits_per_s"])
    return statistics.median(values) if values else 0.0
for mtu in mtus:
    print(f"MTU {mtu}, veth between two namespaces, medians of {rounds} interleaved rounds, Gb/s:")
    print()
    print("| size | write | read | send | iperf3 | write / iperf3 | libfabric tcp RMA write | write / libfabric |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        w, r, s, i, f = ndk(mtu, "write", size), ndk(mtu, "read", size), ndk(mtu, "send", size), iperf(mtu, size), fabric(mtu, size)
        ratio_f = f"{w / f:.2f}×" if f else "—"
        print(f"| {name(size)} | {w:.2f} | {r:.2f} | {s:.2f} | {i:.2f} | {w / i:.2f}× | {f:.2f} | {ratio_f} |")
    print()
EOF
