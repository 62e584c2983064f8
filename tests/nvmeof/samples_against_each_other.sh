#!/usr/bin/env bash
# The two NVMe-oF samples against each other, no guest: samples/km/nvmeof-host against samples/km/nvmeof-target
# with a 4 MiB namespace, after 8 commands the target must refuse (each answered with its status and Do Not Retry),
# in one softndk-kmhost process (the in-process path) or in two (iWARP over TCP on
# 127.0.0.1), in one completion mode, the Verifier on in both. It passes when the host verified every byte of both
# passes, queue 1's keyed SGLs were all invalidated by the target and queue 2's by the host, the target's namespace
# checksum (logged at its unload) equals that of the host's last pass, and every driver unloaded with no leak.
# Usage: samples_against_each_other.sh KMHOST NVMEOF_HOST_SO NVMEOF_TARGET_SO inprocess|tcp MODE PORT [OUTDIR]
set -u
kmhost="$1" host="$2" target="$3" transport="$4" mode="$5" port="$6" out="${7:-.}"
bytes=$((4 * 1024 * 1024))
mkdir -p "$out"
log="$out/nvmeof-samples-$transport-$mode.log" target_log="$out/nvmeof-samples-$transport-$mode-target.log"
# Probe=1: first, commands the target must refuse (each with its NVMe status and Do Not Retry), then the passes.
common=(--verifier abort --completion "$mode" --seed 11 --parameter Port="$port" --parameter NamespaceBytes="$bytes"
        --parameter Probe=1)
if [ "$transport" = inprocess ]; then
  timeout 300 "$kmhost" "${common[@]}" --stop-when-idle --seconds 240 "$target" "$host" >"$log" 2>&1
  status=$?
  cp "$log" "$target_log"
else
  # The target runs until it is told to stop; its own --seconds is the backstop.
  "$kmhost" "${common[@]}" --seconds 240 "$target" >"$target_log" 2>&1 &
  target_pid=$!
  for _ in $(seq 100); do grep -q "listening on port" "$target_log" && break; sleep 0.1; done
  timeout 300 "$kmhost" "${common[@]}" --stop-when-idle --seconds 240 "$host" >"$log" 2>&1
  status=$?
  kill -TERM "$target_pid" 2>/dev/null
  wait "$target_pid"
  target_status=$?
  [ "$target_status" = 0 ] || status=$target_status
fi
expected=$(python3 - "$bytes" <<'EOF'
import sys
h = 2166136261
for i in range(int(sys.argv[1])):
    h = ((h ^ (((i * 31) ^ (i >> 12) ^ (2 * 0x5B) ^ 0xA5) & 0xFF)) * 16777619) & 0xFFFFFFFF
print("0x%08X" % h)
EOF
)
checksum=$(grep -o "namespace checksum 0x[0-9A-F]*" "$target_log" | grep -o "0x.*")
if [ "$status" = 0 ] && grep -q "every byte verified" "$log" && grep -q "host done: 0x00000000" "$log" &&
   grep -q "probes: 8 of 8 answered as they should" "$log" &&
   grep -Eq "queue 1: [0-9]+ writes with data in the capsule, ([0-9]+) keyed SGLs: \1 MRs invalidated by the target" "$log" &&
   grep -Eq "queue 2: [0-9]+ writes with data in the capsule, ([0-9]+) keyed SGLs: 0 MRs invalidated by the target, \1 by us" "$log" &&
   [ "$checksum" = "$expected" ] && grep -q "clean exit, no leaks" "$log" && grep -q "clean exit, no leaks" "$target_log" &&
   ! grep -q "VERIFIER\|refused:" "$log" "$target_log"; then
  echo "ok   nvmeof samples ($transport, completion $mode): 8 refusals as they should be; 4 MiB written and read back" \
    "twice, every byte checked;" \
    "the target's namespace checksum $checksum is the host's last pass"
  exit 0
fi
echo "FAIL nvmeof samples ($transport, completion $mode): exit $status, target checksum ${checksum:-none} (expected $expected)"
echo "  -- the host's last steps ($log):"
grep "nvmeof-host\|softndk\|VERIFIER" "$log" | tail -n 14 | sed 's/^/  | /'
echo "  -- the target's last lines ($target_log):"
grep "nvmeof-target\|softndk\|VERIFIER" "$target_log" | tail -n 10 | sed 's/^/  | /'
exit 1
