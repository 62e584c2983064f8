#!/usr/bin/env bash
# The NVMe-oF host sample (samples/km/nvmeof-host, under softndk-kmhost) against Linux's own NVMe-oF target
# (nvmet + nvmet-rdma over soft-iWARP) in the interop guest. The guest serves a 4 MiB namespace on a tmpfs file;
# the sample writes and reads back the whole of it twice and checks every byte; then the guest's own copy of the file is
# checked against the pattern of the last pass (md5 on both sides). Cases: completion modes inline, pend and
# random, MPA CRC off and on (with CRC on, tshark must find good CRCs and no bad one). A failing case prints the
# sample's last steps, the guest's dmesg and the capture's end.
# Usage: host_against_linux_target.sh KMHOST NVMEOF_HOST_SO OUTDIR. Exits 77 (skip) when no guest can be prepared.
set -u
kmhost="$1" driver="$2" out="$3"
name="nvmeof-host-$$"
test_bytes=$((4 * 1024 * 1024))
nqn="nqn.2026-12.io.softndk:ram"
pick_guest_ports() {  # one forwarded port: the target's
  base=$((22000 + RANDOM % 1900))
  guest_ports=(--forward "$base")
}
pick_guest_ports
# shellcheck source=../interop/siw_common.sh
. "$(dirname "$0")/../interop/siw_common.sh"
rm -f "$out"/nvmeof-host-*

# Linux's target in the guest: configfs subsystem (any host), namespace 1 on a tmpfs file (buffered: tmpfs has
# no O_DIRECT), an RDMA port on the guest's address.
start_target() {
  vm exec --name "$name" --timeout 120 -- sh -c "set -e
    modprobe crc64_rocksoft_generic; modprobe nvmet; modprobe nvmet-rdma
    mount -t configfs none /sys/kernel/config 2>/dev/null || true
    dd if=/dev/zero of=/tmp/ns.img bs=1M count=4 2>/dev/null
    s=/sys/kernel/config/nvmet/subsystems/$nqn p=/sys/kernel/config/nvmet/ports/1
    mkdir \$s; echo 1 >\$s/attr_allow_any_host
    mkdir \$s/namespaces/1; echo /tmp/ns.img >\$s/namespaces/1/device_path
    echo 1 >\$s/namespaces/1/buffered_io; echo 1 >\$s/namespaces/1/enable
    mkdir \$p; echo rdma >\$p/addr_trtype; echo ipv4 >\$p/addr_adrfam
    echo \$GUEST_ADDR >\$p/addr_traddr; echo $base >\$p/addr_trsvcid
    ln -s \$s \$p/subsystems/" >"$out/nvmeof-host-target-setup.log" 2>&1
}
if ! start_target || ! vm wait --name "$name" --timeout 60 --listen "$base" >/dev/null 2>&1; then
  echo "FAIL nvmeof: Linux's NVMe-oF target did not start in the guest:"
  sed 's/^/  | /' "$out/nvmeof-host-target-setup.log"
  vm exec --name "$name" -- sh -c 'dmesg | tail -n 12' | sed 's/^/  | /'
  exit 1
fi
# The last pass's pattern over the test range (NvmePattern in samples/km/nvmeof/nvme_fabrics.h, pass 2).
expected_md5=$(python3 - "$test_bytes" <<'EOF'
import hashlib, sys
n = int(sys.argv[1])
data = bytes(((i * 31) ^ (i >> 12) ^ (2 * 0x5B) ^ 0xA5) & 0xFF for i in range(n))
print(hashlib.md5(data).hexdigest())
EOF
)

run_host() {  # run_host MODE CRC
  local mode=$1 crc=$2 label="completion $1, MPA CRC $2"
  begin_case "nvmeof host -> Linux nvmet: $label"
  local log="$out/nvmeof-host-$mode-crc-$crc.log" pcap="$out/nvmeof-host-$mode-crc-$crc.pcap" status info guest_md5
  vm exec --name "$name" -- sh -c "dd if=/dev/zero of=/tmp/ns.img bs=1M count=4 conv=notrunc 2>/dev/null" >/dev/null
  [ "$crc" = on ] && export SOFTNDK_MPA_CRC=1 || unset SOFTNDK_MPA_CRC
  SOFTNDK_TRACE="$pcap" SOFTNDK_VERIFIER_TOLERATED=abort timeout 300 "$kmhost" --verifier abort --stop-when-idle \
    --seconds 240 --completion "$mode" --seed 7 --parameter Port="$base" --parameter Nqn="$nqn" \
    --parameter TestBytes="$test_bytes" "$driver" >"$log" 2>&1
  status=$?
  unset SOFTNDK_MPA_CRC
  guest_md5=$(vm exec --name "$name" -- sh -c "head -c $test_bytes /tmp/ns.img | md5sum" | cut -d' ' -f1)
  info=$(summary "$pcap")
  if [ "$status" = 0 ] && grep -q "every byte verified" "$log" && grep -q "clean exit, no leaks" "$log" &&
     grep -q "host done: 0x00000000" "$log" && ! grep -q "VERIFIER\|refused:" "$log" &&
     grep -Eq "queue 1: [1-9][0-9]* writes with data in the capsule, ([0-9]+) keyed SGLs: \1 MRs invalidated by the target" "$log" &&
     grep -Eq "queue 2: [0-9]+ writes with data in the capsule, ([0-9]+) keyed SGLs: 0 MRs invalidated by the target, \1 by us" "$log" &&
     [ "$guest_md5" = "$expected_md5" ] && { [ "$crc" = off ] || [[ "$info" == *" good CRC32, 0 bad"* ]]; }; then
    echo "ok   nvmeof host -> Linux nvmet: $label: the whole 4 MiB namespace, $(grep -c 'pass [12]:.*success' "$log") passes verified here," \
      "the guest's file matches ($(grep -o 'queue 1: [^(]*' "$log" | head -1 | sed 's/ *$//')) ($info)"
  else
    echo "FAIL nvmeof host -> Linux nvmet: $label (kmhost exit $status; guest md5 $guest_md5, expected $expected_md5)"
    echo "  -- the sample's last steps ($log):"
    grep "nvmeof-host\|softndk-kmhost\|VERIFIER" "$log" | tail -n 14 | sed 's/^/  | /'
    echo "  -- the guest's dmesg:"
    vm exec --name "$name" -- sh -c 'dmesg | tail -n 10' | sed 's/^/  | /'
    [ -f "${pcap%.pcap}.txt" ] && echo "  -- the capture's end:" && tail -n 6 "${pcap%.pcap}.txt" | sed 's/^/  | /'
    case_failed "nvmeof host -> Linux nvmet: $label"
  fi
}

on_fresh_guest() { start_target && vm wait --name "$name" --timeout 60 --listen "$base" >/dev/null; }
for mode in inline pend random; do
  for crc in off on; do run_case run_host "$mode" "$crc"; done
done
vm exec --name "$name" -- dmesg >"$out/nvmeof-host-guest-dmesg.txt" 2>&1
exit $failed
