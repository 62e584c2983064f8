# Shared by the siw interop scripts (sourced): the guest (guest/vm.sh, this repository's own), one per script, and
# the capture summary. Before sourcing set `out` (the output folder), `name` (the guest's name) and define
# `pick_guest_ports`, which sets `base` and `guest_ports` (vm.sh --forward and --reverse options) and has been called
# once. Exits 77 (skip) with one line saying why when no guest can be prepared (no apt archive to download from, no
# qemu to install); TCG is enough.
vm() { "$(dirname "${BASH_SOURCE[0]}")/guest/vm.sh" "$@"; }
mkdir -p "$out"
if ! vm prepare >"$out/guest-prepare.log" 2>&1; then
  echo "SKIP siw interop: the guest could not be prepared ($(tail -1 "$out/guest-prepare.log"))"
  exit 77
fi
# shellcheck disable=SC2154  # guest_ports is the caller's
boot_guest() { vm start --name "$name" "${guest_ports[@]}" >"$out/guest-start-$name.log" 2>&1; }
# qemu itself failing to start (vm.sh's "qemu failed to start", a forward port taken among them) is retried once, on
# other ports, and only that; its output is printed either way. A guest that booted for an earlier suite of this run
# (test.sh exports SOFTNDK_SIW_GUEST_BOOTED=1) and not for this one is a failure, not a skip: it would hide this
# suite's cases.
boot_guest_retrying_once() {
  boot_guest && return 0
  grep -q "qemu failed to start" "$out/guest-start-$name.log" || return 1
  echo "guest: qemu failed to start; its output:"
  tail -6 "$out/guest-start-$name.log" | sed 's/^/  | /'
  echo "guest: retrying the boot once, on other ports (only this signature is retried)"
  vm stop --name "$name" >/dev/null 2>&1 || true
  sleep 2
  pick_guest_ports
  boot_guest
}
booted=0
boot_guest_retrying_once && booted=1
if [ "$booted" = 0 ]; then
  tail -6 "$out/guest-start-$name.log" | sed 's/^/  | /'
  if [ "${SOFTNDK_SIW_GUEST_BOOTED:-0}" = 1 ]; then
    echo "FAIL siw interop: the siw guest booted for an earlier suite but not for $(basename "$0") (output above)"
    exit 1
  fi
  echo "SKIP siw interop: the siw guest did not boot ($(tail -1 "$out/guest-start-$name.log"))"
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

# The guest's network device can wedge under TCG (the CI run of b6a188c, stop 29): from one moment no packet left
# the guest (its kernel's NETDEV WATCHDOG: "transmit queue 0 timed out 1222976 ms"), the case running then lost its
# stream, and every later case failed; the guest itself still ran commands. Linux 6.1's virtio_net only logs a
# transmit timeout and never resets the queue, so that guest's network stays dead. `run_case CMD...` runs one case
# (a function that calls case_failed when it fails). When it failed, and the guest's transmit timeouts (eth0's
# tx_timeout in sysfs, which `dmesg -c` does not clear) rose during the case, and its network is dead now (a ping
# to the host leaves eth0's tx_packets where it was), the failure is not counted: the files the case wrote get a
# -wedged-N suffix, the guest is stopped, a fresh one boots on new ports (the suite's `on_fresh_guest`, if defined,
# resets what depends on them) and the case runs once more. At most 2 fresh guests per suite, and only that
# signature; the first attempt's FAIL lines stay in the log above the RERUN line. A case that checks the guest's
# own state after earlier cases (the errors suite's last) is not run this way: a fresh guest would make it vacuous.
fresh_guests=0
guest_tx_timeouts() {  # the sum of eth0's transmit timeouts; the simulation's count when SIW_SIMULATE_WEDGE ran
  vm exec --name "$name" --timeout 30 -- sh -c 'exec 2>/dev/null; n=$(cat /tmp/siw-simulated-wedge || echo 0)
    for q in /sys/class/net/eth0/queues/tx-*; do n=$((n + $(cat "$q/tx_timeout" || echo 0))); done
    echo "tx_timeouts=$n"' 2>/dev/null | grep -o 'tx_timeouts=[0-9]*' | cut -d= -f2
}
guest_network_dead() {  # 0 when a ping to the host moves no frame out of eth0; prints what it saw
  vm exec --name "$name" --timeout 30 -- sh -c 'exec 2>/dev/null; s=/sys/class/net/eth0/statistics/tx_packets
    before=$(cat $s); ping -c 2 -W 1 $HOST_ADDR >/dev/null; sleep 1; after=$(cat $s)
    echo "tx_packets=$before,$after"' 2>/dev/null | grep -o 'tx_packets=[0-9]*,[0-9]*' | {
    IFS=, read -r before after || return 1
    before=${before#tx_packets=}
    echo "eth0 sent $((after - before)) frames for a ping to the host"
    [ "$before" = "$after" ]
  }
}
# SIW_SIMULATE_WEDGE=1 checks this recovery by hand: before the suite's first case the guest's eth0 goes down and a
# file adds one to the kernel's count of transmit timeouts, so that case fails and must pass on a fresh guest.
# A case may also ask for a fresh guest itself: it sets `fresh_guest_reason` (one line) when its first attempt
# failed with a signature after which this guest cannot be trusted (siw_perftest.sh: siw flushed its Sends and
# closed at a message boundary; in the CI run of 2546716 every connect from that guest failed afterwards, on a
# forwarded port that worked, so a run once more on the same guest is no remedy). Same limit of 2 fresh guests.
run_case() {
  local failures_before=${#failed_cases[@]} failed_before=$failed timeouts_before timeouts_after dead
  timeouts_before=$(guest_tx_timeouts)
  if [ "${SIW_SIMULATE_WEDGE:-0}" = 1 ] && [ "$fresh_guests" = 0 ] && [ -z "${wedge_simulated:-}" ]; then
    wedge_simulated=1
    vm exec --name "$name" -- sh -c 'ip link set eth0 down; echo 1 >/tmp/siw-simulated-wedge' >/dev/null 2>&1
  fi
  touch "$out/.case-start"
  fresh_guest_reason=""
  "$@"
  ((${#failed_cases[@]} > failures_before)) || return 0
  [ "$fresh_guests" -lt 2 ] || return 0
  local tag=wedged
  if [ -n "$fresh_guest_reason" ]; then
    fresh_guests=$((fresh_guests + 1)) tag=untrusted
    echo "RERUN $current_case: $fresh_guest_reason, so the FAIL above is not counted:"
  else
    timeouts_after=$(guest_tx_timeouts)
    [ -n "$timeouts_before" ] && [ -n "$timeouts_after" ] && [ "$timeouts_after" -gt "$timeouts_before" ] || return 0
    dead=$(guest_network_dead) || return 0
    fresh_guests=$((fresh_guests + 1))
    echo "RERUN $current_case: the guest's network device stopped sending, so the FAIL above is not counted:"
    echo "  the guest: eth0 transmit timeouts $timeouts_before before the case, $timeouts_after after; $dead"
  fi
  echo "  a fresh guest boots on new ports and the case runs once more (fresh guest $fresh_guests of at most 2)"
  vm exec --name "$name" -- dmesg >"$out/siw-dmesg-$suite-$tag-$fresh_guests.txt" 2>&1
  local file
  while IFS= read -r file; do
    mv "$file" "${file%.*}-$tag-$fresh_guests.${file##*.}"
  done < <(find "$out" -maxdepth 1 -type f -newer "$out/.case-start" ! -name 'siw-*' ! -name '.*')
  failed_cases=("${failed_cases[@]:0:failures_before}")
  failed=$failed_before
  vm stop --name "$name" >/dev/null 2>&1 || true
  sleep 2
  pick_guest_ports
  if ! boot_guest_retrying_once; then
    tail -6 "$out/guest-start-$name.log" | sed 's/^/  | /'
    echo "FAIL $current_case: the fresh guest did not boot (output above)"
    case_failed "$current_case (the fresh guest did not boot)"
    exit 1
  fi
  declare -F on_fresh_guest >/dev/null && on_fresh_guest
  fresh_guest_reason=""
  "$@"
}
echo "siw guest: $(grep -o 'accel [a-z]*.*' "$out/guest-start-$name.log" | head -1)"

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

# tshark tries its iWARP dissectors (heuristic: they find the MPA key) before any dissector registered for the port:
# the harness picks ports from a range that holds 24800, which Wireshark gives to Synergy, so a capture on it
# decoded no MPA at all and a case whose data went through failed (a CI-like run at 6415abe).
tshark() { command tshark -o tcp.try_heuristic_first:TRUE "$@"; }

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
