#!/usr/bin/env bash
# Issue 8 §1: rping between softndk (`ndkping --rping`) and Linux soft-iWARP (siw) in a Linux guest (guest/vm.sh), both ways:
#   siw as server: `rping -s` in the guest, `ndkping --rping -c` on the host (through vm.sh --forward);
#   siw as client: `ndkping --rping -s` on the host, `rping -c` in the guest (through vm.sh --reverse).
# Sizes from rping's minimum (26) to 65535, hundreds of iterations, every one verified (-V) on both sides: rping
# and ndkping's client compare the buffers, ndkping's server checks that what it Read is rping's pattern. Each softndk side writes a pcap (SOFTNDK_TRACE) and a tshark summary into OUTDIR.
# Exits 77 (skip) with one line saying why when no guest can be booted; TCG is enough, KVM is not needed.
# Usage: siw_rping.sh NDKPING OUTDIR
set -u
ndkping="$1" out="$2"
name="ndk-rping-$$"
# size:iterations[:option] — crc: softndk asks for CRC32c (SOFTNDK_MPA_CRC=1); siw follows the C bit either way
# (it never asks itself, siw-on-the-wire §3.5), so CRC is on in both directions of that case. readrtr: softndk's
# Request offers only a Read RTR (SOFTNDK_MPA_RTR=read), so when softndk initiates, siw must choose it and answer
# the zero-length Read Request (issue 8 §3); every other case initiated by softndk uses the Write RTR.
# limitsN: softndk's client asks for IRD = ORD = N (--limits), which siw's rping server mirrors (rping's own
# client asks for 1); 5 is below a power of two, which siw rounds its queues up to.
cases="26:200 64:200 1000:100 4096:100 65535:50 4096:50:crc 1000:50:readrtr 1000:50:limits5 1000:50:limits16
       1000:50:limits128"
# A port pair per case: a guest rping killed after a failure can leave its listener behind for a while.
pick_guest_ports() {  # below 32768, Linux's ephemeral ports; picked again before a retried boot
  base=$((21000 + RANDOM % 2900))
  guest_ports=()
  for i in $(seq 0 9); do guest_ports+=(--forward $((base + 2 * i)) --reverse $((base + 2 * i + 1))); done
}
pick_guest_ports
# shellcheck source=siw_common.sh
. "$(dirname "$0")/siw_common.sh"
rm -f "$out"/rping-*
vm exec --name "$name" -- sh -c 'uname -r; rping -h 2>&1 | head -1' >"$out/siw-guest-versions.txt" 2>&1
# The negotiation holds: with CRC on, tshark finds good CRCs and no bad one. When softndk initiated, its Request
# offered P2P with one RTR (Read with readrtr, else Write), siw's Reply chose it, and softndk's first FPDU is that
# RTR: a zero-length Read Request or a zero-length Write (issue 8 §3).
negotiation_holds() {
  if [ "${initiated:-}" = ours ]; then
    local rtr="write" first="opcode 0x00 ulpdu 14" c=""
    [ "${crc:-}" = readrtr ] && rtr="read" first="opcode 0x01 ulpdu 46 read size 0"
    [ "${crc:-}" = crc ] && c=" C"
    python3 "$(dirname "$0")/mpa_words.py" "$1" >"${1%.pcap}.mpa.txt" 2>&1
    grep -q "request rev 2$c IRD $limits ORD $limits P2P rtr=$rtr | reply rev 2$c IRD $limits ORD $limits P2P rtr=$rtr | first FPDU $first" \
      "${1%.pcap}.mpa.txt" || return 1
  fi
  [ "${crc:-}" != crc ] && return 0
  grep -q "Good CRC32" "${1%.pcap}.txt" && ! grep -q "Bad CRC32" "${1%.pcap}.txt"
}

# One case's verdict: ndkping exited 0 and printed `expected`, the guest's rping exited 0, and the capture
# decodes with the negotiation asked for. Uses ours, theirs, log, pcap, count, label; on failure shows the
# logs of both sides (the guest's is `guest_log`).
verdict() {
  local what="$1" expected="$2" guest_log="$3"
  if [ "$ours" -eq 0 ] && grep -q "$expected" "$log" && [ "$theirs" = "rping-exit=0" ] &&
     info=$(summary "$pcap") && negotiation_holds "$pcap"; then
    echo "ok   $what: $count x $label verified ($info)"
  else
    echo "FAIL $what: $label (ndkping exit $ours, siw ${theirs:-no exit status})"
    echo "  -- softndk, the end of $log:"
    tail -n 12 "$log" | sed 's/^/  | /'
    echo "  -- siw, the end of the guest's $guest_log:"
    vm exec --name "$name" -- sh -c "tail -n 12 $guest_log" 2>/dev/null | sed 's/^/  | /'
    case_failed "$what: $label"
  fi
}

# One case's parameters (size:iterations[:option]) and its port pair, the INDEXth of the guest's.
case_setup() {
  IFS=: read -r size count crc <<<"$1"
  unset SOFTNDK_MPA_CRC SOFTNDK_MPA_RTR
  label="$size B"
  if [ "${crc:-}" = crc ]; then export SOFTNDK_MPA_CRC=1; label="$size B, CRC on"; fi
  if [ "${crc:-}" = readrtr ]; then export SOFTNDK_MPA_RTR=read; label="$size B, Read RTR"; fi
  limits=1
  if [[ "${crc:-}" == limits* ]]; then limits=${crc#limits}; label="$size B, IRD/ORD $limits"; fi
  forward=$((base + 2 * $2)) reverse=$((base + 2 * $2 + 1))
}

siw_serves() {
  case_setup "$@"
  begin_case "siw rping -s <- ndkping --rping -c: $label"
  vm exec --name "$name" -- sh -c 'killall -9 rping 2>/dev/null; true' >/dev/null 2>&1
  vm exec --name "$name" --bg -- sh -c "timeout 120 rping -s -a 0.0.0.0 -p $forward -C $count -S 65535 -V \
      >/tmp/rping-server.log 2>&1; echo rping-exit=\$? >>/tmp/rping-server.log" >/dev/null 2>&1
  vm wait --name "$name" --listen "$forward" >/dev/null 2>&1
  pcap="$out/rping-siw-server-$size${crc:+-$crc}.pcap"
  initiated=ours
  log="${pcap%.pcap}.log"
  SOFTNDK_TRACE="$pcap" timeout 150 "$ndkping" --rping -c -a 127.0.0.1 -p "$forward" -C "$count" -S "$size" -V \
      --limits "$limits" >"$log" 2>&1
  ours=$?
  guest_log=$(guest_log_when_done /tmp/rping-server.log "rping-exit=")
  theirs=$(grep -o 'rping-exit=[0-9]*' <<<"$guest_log")
  # rping's server ends on the client's disconnect ("wait for RDMA_READ_ADV state 10", DISCONNECTED). Rarely (once
  # in about 60 runs) its CM thread then reads the event channel it has just destroyed and it exits 255. That is
  # rping's own teardown, after every iteration was verified on both sides, so it counts as a clean end.
  if [ "$theirs" = rping-exit=255 ] && grep -q "wait for RDMA_READ_ADV state 10" <<<"$guest_log" &&
     grep -q "rdma_get_cm_event: Bad file descriptor" <<<"$guest_log"; then
    theirs=rping-exit=0
  fi
  verdict "siw rping -s  <- ndkping --rping -c" "client done, $count iterations verified" /tmp/rping-server.log
}

siw_connects() {
  case_setup "$@"
  begin_case "siw rping -c -> ndkping --rping -s: $label"
  vm exec --name "$name" -- sh -c 'killall -9 rping 2>/dev/null; true' >/dev/null 2>&1
  pcap="$out/rping-siw-client-$size${crc:+-$crc}.pcap"
  initiated=siw
  log="${pcap%.pcap}.log"
  SOFTNDK_TRACE="$pcap" timeout 150 "$ndkping" --rping -s -a 127.0.0.1 -p "$reverse" -C "$count" -S 65535 -V \
      >"$log" 2>&1 &
  server=$!
  wait_for_line "$log" listening
  theirs=$(vm exec --name "$name" -- sh -c "timeout 120 rping -c -a \$HOST_ADDR -p $reverse -C $count -S $size -V \
      >/tmp/rping-client.log 2>&1; echo rping-exit=\$?" 2>/dev/null | grep -o 'rping-exit=[0-9]*')
  wait "$server"
  ours=$?
  [ "$limits" != 1 ] && label="$size B, IRD/ORD 1 (siw's rping asks for 1)"
  # The same race in rping's client: it ends on our disconnect ("client DISCONNECT EVENT..."), its main thread
  # destroys the event channel while its CM thread still reads it, and it exits 255. Counted as a clean end only
  # when we verified every iteration, and said so in the case's line.
  if [ "$theirs" = rping-exit=255 ] && grep -q "server done, $count iterations verified" "$log"; then
    guest_log=$(vm exec --name "$name" -- cat /tmp/rping-client.log 2>/dev/null || true)
    if grep -q "client DISCONNECT EVENT" <<<"$guest_log" &&
       grep -q "rdma_get_cm_event: Bad file descriptor" <<<"$guest_log"; then
      theirs=rping-exit=0
      label="$label [rping's client teardown race: exit 255 after every iteration was verified; counted clean]"
    fi
  fi
  verdict "siw rping -c  -> ndkping --rping -s" "server done, $count iterations verified" /tmp/rping-client.log
}

index=0
for c in $cases; do
  run_case siw_serves "$c" "$index"
  run_case siw_connects "$c" "$index"
  index=$((index + 1))
done
vm exec --name "$name" -- dmesg >"$out/siw-dmesg.txt" 2>&1
exit $failed
