#!/usr/bin/env bash
# Linux's own NVMe-oF host (nvme-rdma over soft-iWARP, in the interop guest) against the target sample
# (samples/km/nvmeof-target under softndk-kmhost on the host, 8 MiB RAM namespace). The guest connects through
# /dev/nvme-fabrics, which must create /dev/nvme0n1; writes 8 MiB of random data with 128 KiB direct writes (the
# target fetches them by RDMA Read), reads them back with 64 KiB direct reads (RDMA Writes) and compares; rewrites
# the first MiB with 4 KiB direct writes (data in the capsule) and compares again; then deletes the controller.
# The target's namespace checksum, logged at its unload, must equal the checksum of the guest's data; the target
# must have used every path (RDMA Read, RDMA Write, in-capsule data, Send with Invalidate), held the host's
# Asynchronous Event Request until the end, and unloaded with no leak. Cases: completion modes inline and pend. A failing case prints the target's last lines, the guest's
# output and dmesg.
# Usage: linux_host_against_target.sh KMHOST NVMEOF_TARGET_SO OUTDIR. Exits 77 (skip) when no guest can be prepared.
set -u
kmhost="$1" target="$2" out="$3"
name="nvmeof-linux-host-$$"
nqn="nqn.2026-12.io.softndk:ram"
bytes=$((8 * 1024 * 1024))
pick_guest_ports() {  # one reverse port per case
  base=$((23000 + RANDOM % 900 * 2))
  guest_ports=(--reverse "$base" --reverse $((base + 1)))
}
pick_guest_ports
# shellcheck source=../interop/siw_common.sh
. "$(dirname "$0")/../interop/siw_common.sh"
rm -f "$out"/nvmeof-linux-host-*

serve() {  # serve MODE PORT: the target sample until the guest is done
  local mode=$1 port=$2 label="completion $1"
  begin_case "Linux nvme-rdma -> nvmeof target: $label"
  local log="$out/nvmeof-linux-host-target-$mode.log" guest_log="$out/nvmeof-linux-host-guest-$mode.log"
  local pcap="$out/nvmeof-linux-host-$mode.pcap" status pid checksum expected
  SOFTNDK_TRACE="$pcap" "$kmhost" --verifier abort --completion "$mode" --seed 5 --seconds 280 --parameter Port="$port" \
    --parameter Nqn="$nqn" --parameter NamespaceBytes="$bytes" "$target" >"$log" 2>&1 &
  pid=$!
  wait_for_line "$log" "listening on port" 30
  vm exec --name "$name" --timeout 240 -- sh -c "
    modprobe crc64_rocksoft_generic; modprobe nvme-rdma || exit 10
    echo transport=rdma,traddr=\$HOST_ADDR,trsvcid=$port,nqn=$nqn >/dev/nvme-fabrics || exit 11
    n=0; until [ -b /dev/nvme0n1 ]; do n=\$((n + 1)); [ \$n -gt 300 ] && exit 12; sleep 0.1; done
    head -c $bytes /dev/urandom >/tmp/pattern
    dd if=/tmp/pattern of=/dev/nvme0n1 bs=128k oflag=direct 2>&1 | tail -n 1
    dd if=/dev/nvme0n1 of=/tmp/back bs=64k iflag=direct 2>&1 | tail -n 1
    cmp /tmp/pattern /tmp/back || exit 13
    dd if=/tmp/pattern of=/dev/nvme0n1 bs=4k count=256 oflag=direct 2>&1 | tail -n 1
    dd if=/dev/nvme0n1 of=/tmp/back bs=4k count=256 iflag=direct 2>&1 | tail -n 1
    head -c 1048576 /tmp/pattern | cmp - /tmp/back || exit 14
    echo 1 >/sys/class/nvme/nvme0/delete_controller || exit 15
    n=0; while [ -e /dev/nvme0 ]; do n=\$((n + 1)); [ \$n -gt 300 ] && exit 16; sleep 0.1; done
    echo verified-in-the-guest" >"$guest_log" 2>&1
  status=$?
  vm exec --name "$name" -- cat /tmp/pattern >"$out/nvmeof-linux-host-pattern.bin" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  local target_status=$?
  checksum=$(grep -o "namespace checksum 0x[0-9A-F]*" "$log" | grep -o "0x.*")
  expected=$(python3 - "$out/nvmeof-linux-host-pattern.bin" <<'PY'
import sys
h = 2166136261
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 16777619) & 0xFFFFFFFF
print("0x%08X" % h)
PY
)
  local io
  io=$(grep "queue 1 closed" "$log" | head -n 1)
  if [ "$status" = 0 ] && [ "$target_status" = 0 ] && grep -q "verified-in-the-guest" "$guest_log" &&
     [ "$checksum" = "$expected" ] && grep -q "clean exit, no leaks" "$log" && ! grep -q "VERIFIER" "$log" &&
     grep -Eq "queue 0 closed after .*, [1-9][0-9]* events held" "$log" &&
     [[ "$io" =~ \(([1-9][0-9]*)\ RDMA\ Reads,\ ([1-9][0-9]*)\ RDMA\ Writes,\ ([1-9][0-9]*)\ in\ the\ capsule,\ ([1-9][0-9]*)\ Sends ]]; then
    echo "ok   Linux nvme-rdma -> nvmeof target: $label: /dev/nvme0n1 written, read back and compared in the guest;" \
      "the target's namespace checksum $checksum is the guest's data (queue 1: ${io#*after })"
  else
    echo "FAIL Linux nvme-rdma -> nvmeof target: $label (guest exit $status, target exit $target_status," \
      "checksum ${checksum:-none}, expected $expected)"
    echo "  -- the target's last lines ($log):"
    tail -n 12 "$log" | sed 's/^/  | /'
    echo "  -- the guest's output:"
    tail -n 8 "$guest_log" | sed 's/^/  | /'
    echo "  -- the guest's dmesg:"
    vm exec --name "$name" -- sh -c 'dmesg | tail -n 12' | sed 's/^/  | /'
    [ -f "$pcap" ] && summary "$pcap" >/dev/null && echo "  -- the capture's end:" &&
      tail -n 6 "${pcap%.pcap}.txt" | sed 's/^/  | /'
    case_failed "Linux nvme-rdma -> nvmeof target: $label"
  fi
}

run_case serve inline "$base"
run_case serve pend $((base + 1))
exit $failed
