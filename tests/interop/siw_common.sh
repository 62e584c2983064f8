# Shared by the siw interop scripts (sourced): the siw-vm harness, one guest per script, and the capture summary.
# Before sourcing set `out` (the output folder), `name` (the guest's name) and `guest_ports` (siw-vm --forward and
# --reverse options). Exits 77 (skip) with one line saying why when no guest can be booted; TCG is enough.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
siwvm="${SIWVM_PATH:-${SIWVM:-$here/../shared/interop/siw-vm}}"
if [ ! -f "$siwvm" ]; then
  echo "SKIP siw interop: no siw-vm harness at $siwvm (set SIWVM)"
  exit 77
fi
mkdir -p "$out"
vm() { bash "$siwvm" "$@"; }
if ! vm prepare >"$out/siw-vm-prepare.log" 2>&1; then
  echo "SKIP siw interop: siw-vm prepare failed ($(tail -1 "$out/siw-vm-prepare.log"))"
  exit 77
fi
# shellcheck disable=SC2154  # guest_ports is the caller's
if ! vm start --name "$name" "${guest_ports[@]}" >"$out/siw-vm-start-$name.log" 2>&1; then
  echo "SKIP siw interop: the siw guest did not boot ($(tail -1 "$out/siw-vm-start-$name.log"))"
  exit 77
fi
trap 'vm stop --name "$name" >/dev/null 2>&1' EXIT
echo "siw guest: $(grep -o 'accel [a-z]*.*' "$out/siw-vm-start-$name.log" | head -1)"

# The opcodes tshark decodes in a capture, and its CRC verdicts, for reading without re-running; the full decode
# goes beside the capture. Fails when tshark cannot read the capture or finds no RDMAP message in it.
summary() {
  tshark -r "$1" -O iwarp_mpa,iwarp_ddp_rdmap >"${1%.pcap}.txt" 2>&1 || return 1
  local opcodes
  opcodes=$(tshark -r "$1" -T fields -e iwarp_rdma.opcode 2>/dev/null | tr ',' '\n' | grep . | sort | uniq -c |
    awk '{printf "%s opcode %s; ", $1, $2}')
  [ -n "$opcodes" ] || return 1
  printf "%s" "$opcodes"
  local good bad
  good=$(grep -c "Good CRC32" "${1%.pcap}.txt") bad=$(grep -c "Bad CRC32" "${1%.pcap}.txt")
  if [ "$good" -gt 0 ] || [ "$bad" -gt 0 ]; then printf "%s good CRC32, %s bad" "$good" "$bad"; fi
  return 0
}
