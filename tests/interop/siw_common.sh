# Shared by the siw interop scripts (sourced): the siw-vm harness, one guest per script, and the capture summary.
# Before sourcing set `out` (the output folder), `name` (the guest's name) and define `pick_guest_ports`, which
# sets `base` and `guest_ports` (siw-vm --forward and --reverse options) and has been called once. Exits 77 (skip)
# with one line saying why when no guest can be booted; TCG is enough.
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
boot_guest() { vm start --name "$name" "${guest_ports[@]}" >"$out/siw-vm-start-$name.log" 2>&1; }
# Issue 22: qemu itself failing to start (siw-vm's "qemu failed to start") is retried once, and only that; its
# output is printed either way. A guest that booted for an earlier suite of this run (test.sh exports
# SOFTNDK_SIW_GUEST_BOOTED=1) and not for this one is a failure, not a skip: it would hide this suite's cases.
booted=0
boot_guest && booted=1
if [ "$booted" = 0 ] && grep -q "qemu failed to start" "$out/siw-vm-start-$name.log"; then
  echo "siw-vm: qemu failed to start; its output:"
  tail -6 "$out/siw-vm-start-$name.log" | sed 's/^/  | /'
  echo "siw-vm: retrying the boot once, on other ports (only this signature is retried)"
  vm stop --name "$name" >/dev/null 2>&1 || true
  sleep 2
  pick_guest_ports
  boot_guest && booted=1
fi
if [ "$booted" = 0 ]; then
  tail -6 "$out/siw-vm-start-$name.log" | sed 's/^/  | /'
  if [ "${SOFTNDK_SIW_GUEST_BOOTED:-0}" = 1 ]; then
    echo "FAIL siw interop: the siw guest booted for an earlier suite but not for $(basename "$0") (output above)"
    exit 1
  fi
  echo "SKIP siw interop: the siw guest did not boot ($(tail -1 "$out/siw-vm-start-$name.log"))"
  exit 77
fi

# Every case has a name. A suite that fails ends by naming each failed case, and one that stops unexpectedly names
# the case it was in, so the last lines of the CI log say what broke (the details are above, under FAIL).
suite=$(basename "$0" .sh)
current_case="(guest set-up)"
failed=0
failed_cases=()
begin_case() { current_case="$1"; }
case_failed() { failed=1; failed_cases+=("$1"); }
on_exit() {
  local status=$?
  vm stop --name "$name" >/dev/null 2>&1
  [ "$status" -eq 0 ] && return
  if ((${#failed_cases[@]})); then
    echo "$suite: ${#failed_cases[@]} case(s) failed; each one's logs are printed under its FAIL line above:"
    printf '  FAIL %s\n' "${failed_cases[@]}"
  else
    echo "$suite: stopped with exit $status in case: $current_case"
  fi
}
trap on_exit EXIT
echo "siw guest: $(grep -o 'accel [a-z]*.*' "$out/siw-vm-start-$name.log" | head -1)"

# Waits up to SECONDS (default 60) for a line matching PATTERN in FILE. 1 when it never came: a loaded machine
# starts a sanitizer build slowly, so no wait here assumes a speed.
wait_for_line() {
  local file="$1" pattern="$2" deadline=$((SECONDS + ${3:-60}))
  until grep -Eq "$pattern" "$file" 2>/dev/null; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

# Prints the guest file GUEST_LOG once its command has written its exit marker (a line matching MARKER), waiting
# up to SECONDS (default 30); prints what is there when the marker never came.
guest_log_when_done() {
  local guest_log="$1" marker="$2" deadline=$((SECONDS + ${3:-30})) text
  while :; do
    text=$(vm exec --name "$name" -- sh -c "cat $guest_log" 2>/dev/null)
    if grep -Eq "$marker" <<<"$text" || [ "$SECONDS" -ge "$deadline" ]; then
      printf '%s\n' "$text"
      return
    fi
    sleep 0.2
  done
}

# How many Terminates (RDMAP opcode 7) a capture holds from the peer's port $2: 0 also when tshark cannot read it.
terminates_from() {
  tshark -r "$1" -Y "iwarp_rdma.opcode == 7 && tcp.srcport == $2" -T fields -e frame.number 2>/dev/null |
    grep -c . || true
}

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
