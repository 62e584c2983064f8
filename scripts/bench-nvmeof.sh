#!/usr/bin/env bash
# The cost of the NVMe-oF protocol layer: the host sample against the target sample (samples/km/nvmeof-*, one I/O
# queue, Release build) beside ndkperf's raw RDMA at the same size and depth, in the same run, in one process
# (the in-process path) and in two (iWARP/TCP on 127.0.0.1). An NVMe-oF read moves its data by the target's RDMA
# Write and a write by its RDMA Read (4 KiB writes go in the capsule instead), so read is set beside raw Write and
# write beside raw Read. Prints one table: IOPS for 4 KiB random at depth 1 and 32, MB/s for 128 KiB sequential
# at depth 32, the raw figure and the ratio.
# Usage: scripts/bench-nvmeof.sh [SECONDS per run, default 3] [BUILD folder, default build/bench-nvmeof]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-3}" build="${2:-build/bench-nvmeof}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSOFTNDK_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target softndk-kmhost nvmeof-host nvmeof-target ndkperf >/dev/null
kmhost="$build/tools/softndk-kmhost" ndkperf="$build/tools/ndkperf"
host="$build/tests/nvmeof-host.so" target="$build/tests/nvmeof-target.so"
out=$(mktemp -d /tmp/bench-nvmeof.XXXXXX)
port=$((26000 + RANDOM % 2000))
common=(--verifier off --parameter NamespaceBytes=16777216 --parameter TestBytes=16777216 --parameter Benchmark=1
        --parameter BenchSeconds="$seconds" --parameter IoQueues=1 --parameter QueueDepth=33)

nvmeof() {  # nvmeof inprocess|tcp: the host's bench lines into $out/nvmeof-$1.log
  if [ "$1" = inprocess ]; then
    "$kmhost" "${common[@]}" --parameter Port="$port" --stop-when-idle "$target" "$host" >"$out/nvmeof-$1.log" 2>&1
  else
    "$kmhost" "${common[@]}" --parameter Port=$((port + 1)) "$target" >"$out/target-$1.log" 2>&1 &
    local pid=$!
    sleep 1
    "$kmhost" "${common[@]}" --parameter Port=$((port + 1)) --stop-when-idle "$host" >"$out/nvmeof-$1.log" 2>&1
    kill -TERM "$pid"
    wait "$pid" || true
  fi
}

raw() {  # raw inprocess|tcp TEST SIZE WINDOW: ndkperf's GB/s
  local args=(--test "$2" --sizes "$3" --window "$4" --seconds "$seconds")
  if [ "$1" = inprocess ]; then
    "$ndkperf" "${args[@]}" >"$out/raw.log" 2>&1
  else
    "$ndkperf" --server -p $((port + 2)) >"$out/server.log" 2>&1 &
    local pid=$!
    sleep 1
    "$ndkperf" --client -a 127.0.0.1 -p $((port + 2)) "${args[@]}" >"$out/raw.log" 2>&1
    kill -INT "$pid"
    wait "$pid" || true
  fi
  awk -v t="$2" '$1 == t && $3 == "KiB" { print $5; exit }' "$out/raw.log"
}

printf '| transport | NVMe-oF run | NVMe-oF | raw RDMA (ndkperf) | raw | NVMe-oF / raw |\n| --- | --- | --- | --- | --- | --- |\n'
for transport in inprocess tcp; do
  nvmeof "$transport"
  while read -r run opcode size depth unit raw_test; do
    line=$(grep "bench $run:" "$out/nvmeof-$transport.log") || { echo "no result for $run ($transport)"; exit 1; }
    iops=$(sed -E 's/.*: ([0-9]+) IOPS, ([0-9]+) MB\/s/\1/' <<<"$line")
    mbs=$(sed -E 's/.*: ([0-9]+) IOPS, ([0-9]+) MB\/s/\2/' <<<"$line")
    gbs=$(raw "$transport" "$raw_test" "$size" "$depth")
    if [ "$unit" = IOPS ]; then
      ours=$iops theirs=$(awk -v g="$gbs" -v s="$size" 'BEGIN { printf "%d", g * 1e9 / s }')
    else
      ours=$mbs theirs=$(awk -v g="$gbs" 'BEGIN { printf "%d", g * 1000 }')
    fi
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
    printf '| %s | %s | %s %s | %s %s %s | %s %s | %s |\n' "$transport" "$run" "$ours" "$unit" "$raw_test" \
      "$size" "window $depth" "$theirs" "$unit" "$ratio"
    : "$opcode"
  done <<'EOF'
randread-4k-qd1 read 4096 1 IOPS write
randwrite-4k-qd1 write 4096 1 IOPS read
randread-4k-qd32 read 4096 32 IOPS write
randwrite-4k-qd32 write 4096 32 IOPS read
seqread-128k-qd32 read 131072 32 MB/s write
seqwrite-128k-qd32 write 131072 32 MB/s read
EOF
done
echo "logs: $out"
