#!/usr/bin/env bash
# The cost of SMB Direct and SMB2 over the raw RDMA under them: the SMB Direct client sample
# (samples/km/smbdirect-client, Benchmark=1, Release build) against Linux's ksmbd in the interop guest, beside raw
# RDMA between ndkperf and the guest's own perftest over the same guest link, in the same run. ksmbd moves a WRITE's
# data with an RDMA Read of our buffer and a READ's with an RDMA Write into it, so the raw figure for each is the
# guest initiating that same operation against ndkperf (perftest -R, one at a time: -t 1): WRITE beside the guest's
# ib_read_bw, READ beside its ib_write_bw, and the 4 KiB READ round trip beside one 4 KiB RDMA Write of the guest's
# at a time (microseconds from its message rate). The client sends one request at a time too. Under TCG the guest's
# CPU is the limit: the ratios say what the protocol costs there, not a hardware figure. Prints one table and where
# the client's time went.
# Usage: scripts/bench-smbdirect.sh [SECONDS per loop, default 5] [BUILD folder, default build/bench-smbdirect]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}" build="${2:-build/bench-smbdirect}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSOFTNDK_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target softndk-kmhost smbdirect-client ndkperf >/dev/null
kmhost="$build/tools/softndk-kmhost" ndkperf="$build/tools/ndkperf" client="$build/tests/smbdirect-client.so"
V=tests/interop/guest/vm.sh name="bench-smbd-$$"
out=$(mktemp -d /tmp/bench-smbdirect.XXXXXX)
base=$((23000 + RANDOM % 900))
$V start --name "$name" --forward "$base:5445" --reverse $((base + 1)) >"$out/start.log" 2>&1
trap '$V stop --name "$name" >/dev/null 2>&1' EXIT
$V exec --name "$name" --timeout 120 -- ksmbd-start >"$out/ksmbd.log" 2>&1

"$kmhost" --verifier off --stop-when-idle --seconds 300 --parameter Port="$base" --parameter Benchmark=1 \
  --parameter BenchSeconds="$seconds" "$client" >"$out/client.log" 2>&1
grep -q "client done: 0x00000000" "$out/client.log" || { tail -20 "$out/client.log"; exit 1; }

raw() {  # raw TOOL SIZE: ndkperf serves on the host and the guest's perftest initiates, one at a time; "MB/s Mpps"
  local tool=$1 size=$2 port=$((base + 1)) pid
  "$ndkperf" "$tool" -R -p "$port" -s "$size" -D "$seconds" -t 1 >"$out/raw-$tool-$size.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "Waiting for client" "$out/raw-$tool-$size.log" && break; sleep 0.1; done
  $V exec --name "$name" --timeout 120 -- sh -c "timeout 120 $tool -R -p $port -s $size -D $seconds -t 1 \$HOST_ADDR" \
    >"$out/raw-guest-$tool-$size.log" 2>&1 || true
  wait "$pid" || true
  awk -v s="$size" '$1 == s { print $4, $5; exit }' "$out/raw-$tool-$size.log"
}
read -r raw_read _ <<<"$(raw ib_read_bw 1048576)"
read -r raw_write _ <<<"$(raw ib_write_bw 1048576)"
read -r _ raw_rate <<<"$(raw ib_write_bw 4096)"
raw_us=$(awk -v r="$raw_rate" 'BEGIN { printf "%.0f", 1 / r }')

field() { grep "bench $1 $2:" "$out/client.log" | sed -E "s/.*: [0-9]+ I\/Os in [0-9]+ ms: ([0-9]+) MB\/s, ([0-9]+) us per I\/O, ([0-9]+)%.*/\\$3/"; }
printf '| SMB Direct over ksmbd | SMB2 | raw RDMA on the same link (guest perftest -R against ndkperf) | raw | SMB2 / raw |\n| --- | --- | --- | --- | --- |\n'
printf '| WRITE 1 MiB, one at a time | %s MB/s | the guest RDMA-Reads 1 MiB (ib_read_bw -t 1) | %s MB/s | %.2f |\n' \
  "$(field write 1048576 1)" "$raw_read" "$(awk -v a="$(field write 1048576 1)" -v b="$raw_read" 'BEGIN { print a / b }')"
printf '| READ 1 MiB, one at a time | %s MB/s | the guest RDMA-Writes 1 MiB (ib_write_bw -t 1) | %s MB/s | %.2f |\n' \
  "$(field read 1048576 1)" "$raw_write" "$(awk -v a="$(field read 1048576 1)" -v b="$raw_write" 'BEGIN { print a / b }')"
printf '| READ 4 KiB round trip | %s µs | one 4 KiB RDMA Write of the guest at a time | %s µs | %.2f× the time |\n' \
  "$(field read 4096 2)" "$raw_us" "$(awk -v a="$(field read 4096 2)" -v b="$raw_us" 'BEGIN { print a / b }')"
echo
echo "Where the client's time went (the rest of each I/O is the SMB Direct and SMB2 exchange and the server):"
grep "bench " "$out/client.log" | sed 's/^smbdirect-client: /  /'
echo "logs: $out"
