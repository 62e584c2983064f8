#!/usr/bin/env bash
# Issue 8 §4: errors across the boundary between softndk (`ndkperf ib_*_bw -R`) and Linux siw in a Linux guest (guest/vm.sh).
#  - siw initiates and softndk refuses (softndk's --inject on what it advertises, or a smaller receive): softndk
#    sends the RFC 5040 Terminate, reports the cause, and no byte of its registered memory changes; siw logs
#    `got TERMINATE. layer L, type T, code C` in dmesg (read through vm.sh exec), with siw's nibble order.
#  - softndk initiates and siw refuses: softndk decodes siw's Terminate (siw's layout, siw-on-the-wire §3.9) into the
#    spec's status and the cause.
#  - either process killed mid-transfer: the other side ends within seconds with the reason.
# Then a clean run both ways shows both sides still work, and the guest's dmesg has no kernel warning.
# Exits 77 (skip) with one line saying why when no guest can be booted.
# Usage: siw_errors.sh NDKPERF OUTDIR
set -u
ndkperf="$1" out="$2"
name="ndk-errors-$$"
# Below 32768, Linux's ephemeral ports; picked again before a retried boot. 20 pairs: the cases use at most
# 4 + 3 × 3 (attempts) + 4 + 2 + 1.
pick_guest_ports() {
  base=$((28000 + RANDOM % 3900))
  guest_ports=()
  for i in $(seq 0 19); do guest_ports+=(--forward $((base + 2 * i)) --reverse $((base + 2 * i + 1))); done
}
pick_guest_ports
# shellcheck source=siw_common.sh
. "$(dirname "$0")/siw_common.sh"
rm -f "$out"/errors-*
index=0
slot=0  # the next port pair of this guest; `index` numbers the files and is never reset
on_fresh_guest() { slot=0; }  # run_case (siw_common.sh): a fresh guest's ports are all unused
next_ports() {
  forward=$((base + 2 * slot)) reverse=$((base + 2 * slot + 1))
  slot=$((slot + 1)) index=$((index + 1))
}
guest() { vm exec --name "$name" -- sh -c "$1" 2>/dev/null; }
report() {  # verdict (0 = pass), what, detail; on failure the tails of both sides' logs
  if [ "$1" -eq 0 ]; then echo "ok   $2: $3"; else
    echo "FAIL $2: $3"
    echo "  -- softndk, the end of $log:"
    tail -n 12 "$log" | sed 's/^/  | /'
    # perftest's stdout is block-buffered into the file and its stderr is not: an error line comes first.
    echo "  -- siw, the start and the end of the guest's log, and dmesg:"
    guest "head -n 3 /tmp/errors-guest.log; echo ...; tail -n 12 /tmp/errors-guest.log; dmesg | tail -n 4" |
      sed 's/^/  | /'
    case_failed "$2"
  fi
}

# siw initiates: `tool` in the guest with `theirs`, ndkperf serving with `ours`. Expects softndk's cause in its
# log and siw's dmesg line.
siw_initiates() {
  local tool="$1" ours="$2" theirs="$3" cause="$4" logged="$5" memory="$6"
  begin_case "siw $tool $theirs -> ndkperf $ours"
  next_ports
  pcap="$out/errors-siw-initiates-$index.pcap" log="${pcap%.pcap}.log"
  guest 'dmesg -c >/dev/null'
  # shellcheck disable=SC2086
  SOFTNDK_TRACE="$pcap" timeout 60 "$ndkperf" "$tool" -R -p "$reverse" $ours >"$log" 2>&1 &
  local server=$!
  wait_for_line "$log" "Waiting for client"
  local theirs_exit
  # 20 s: perftest's client has hung once after siw took our Terminate; timeout ends it (exit 143)
  theirs_exit=$(guest "timeout 20 $tool -R -p $reverse $theirs \$HOST_ADDR >/tmp/errors-guest.log 2>&1; echo \$?")
  wait "$server"
  local ours_exit=$?
  local dmesg
  dmesg=$(guest 'dmesg' | grep -o "siw: got TERMINATE.*" | head -1)
  local verdict=1
  local info=""
  if [ "$ours_exit" -eq 1 ] && [ "$theirs_exit" != 0 ] && grep -Eq "$cause" "$log" &&
     [[ "$dmesg" == *"$logged"* ]] && { [ "$memory" != memory ] || grep -q "registered memory unchanged" "$log"; } &&
     info=$(summary "$pcap"); then
    verdict=0
  fi
  report $verdict "siw $tool $theirs -> ndkperf $ours" \
    "softndk: $(grep -m1 -Eo "$cause" "$log")${memory:+; its memory unchanged}; siw exit $theirs_exit, dmesg \"$dmesg\" ($info)"
}

# softndk initiates: ndkperf with `ours` against `tool` serving in the guest. Expects the status and cause of the
# refused request in softndk's log.
softndk_initiates() {
  local tool="$1" ours="$2" theirs="$3" expected="$4"
  begin_case "ndkperf $tool $ours -> siw $theirs"
  local retried="" attempt ours_exit theirs_exit guest_text
  for attempt in 1 2 3; do
    next_ports
    pcap="$out/errors-softndk-initiates-$index.pcap" log="${pcap%.pcap}.log"
    guest 'killall -9 ib_write_bw ib_read_bw ib_send_bw 2>/dev/null; true'
    vm exec --name "$name" --bg -- sh -c "timeout 50 $tool -R -p $forward $theirs >/tmp/errors-guest.log 2>&1; \
        echo exit=\$? >>/tmp/errors-guest.log" >/dev/null 2>&1
    vm wait --name "$name" --listen "$forward" >/dev/null 2>&1
    # shellcheck disable=SC2086
    SOFTNDK_TRACE="$pcap" timeout 60 "$ndkperf" "$tool" -R -p "$forward" $ours 127.0.0.1 >"$log" 2>&1
    ours_exit=$?
    guest_text=$(guest_log_when_done /tmp/errors-guest.log 'exit=[0-9]')
    theirs_exit=$(grep -o 'exit=[0-9]*' <<<"$guest_text")
    # siw stops reading at its error, and its perftest exits soon after, with our unread requests in its socket:
    # closing it resets the stream. Through the guest's user-mode network the reset can overtake siw's Terminate,
    # which then never reaches softndk, and softndk can only say the connection was lost (twice under a CPU hog,
    # issue 22). That signature alone, softndk's LLP "connection lost" with no Terminate from siw in softndk's own
    # capture, is run again, at most twice (a loaded CI machine lost it twice in a row once, issue 22), and the
    # case's line says so. A Terminate that arrived and was not reported fails.
    if [ "$attempt" -lt 3 ] && grep -q "cause LLP/0x0/0x01" "$log" && ! grep -Eq "$expected" "$log" &&
       [ "$(terminates_from "$pcap" "$forward")" = 0 ]; then
      retried+=" [attempt $attempt: siw's Terminate never reached softndk, none in its capture; the stream was reset;"
      retried+=" run again]"
      mv "$pcap" "${pcap%.pcap}-attempt-$attempt.pcap"
      mv "$log" "${log%.log}-attempt-$attempt.log"
      continue
    fi
    break
  done
  local verdict=1 info=""
  # The refused request's completion, or the flushed receive's when every Write or Send had completed as sent
  if [ "$ours_exit" -eq 1 ] && grep -Eq "(Completion with error at client|data connection ended): $expected" "$log" &&
     [ -n "$theirs_exit" ] && [ "$theirs_exit" != exit=0 ] && info=$(summary "$pcap"); then
    verdict=0
  fi
  [ "$verdict" = 0 ] || info="$(summary "$pcap")"  # a failure says what was on the wire too
  report $verdict "ndkperf $tool $ours -> siw $theirs" \
    "softndk: $(grep -m1 -Eo "(Completion with error at client|data connection ended): $expected" "$log"); siw $theirs_exit ($info)$retried"
}

# A process killed mid-transfer (ib_write_bw -D 20, killed after 4 s): the other side must end within 10 s.
# When softndk is the victim, ndkperf itself is the background job (a `timeout` wrapper would take the SIGKILL
# and leave ndkperf running); otherwise it runs under timeout.
killed() {
  victim_run() {
    if [ "$victim" = softndk ]; then exec "$ndkperf" ib_write_bw -R -p "$@" -s 65536 -D 20; fi
    timeout 60 "$ndkperf" ib_write_bw -R -p "$@" -s 65536 -D 20
  }
  local victim="$1" role="$2"
  begin_case "$victim process killed mid-transfer ($role)"
  next_ports
  log="$out/errors-killed-$victim-$role.log"
  export SOFTNDK_TRACE="${log%.log}.pcap"
  guest 'killall -9 ib_write_bw 2>/dev/null; true'
  local port ours_pid
  if [ "$role" = siw-server ]; then
    port=$forward
    vm exec --name "$name" --bg -- sh -c "timeout 50 ib_write_bw -R -p $port -s 65536 -D 20 >/tmp/errors-guest.log \
        2>&1; echo exit=\$? >>/tmp/errors-guest.log" >/dev/null 2>&1
    vm wait --name "$name" --listen "$port" >/dev/null 2>&1
    victim_run "$port" 127.0.0.1 >"$log" 2>&1 &
    ours_pid=$!
  else
    port=$reverse
    victim_run "$port" >"$log" 2>&1 &
    ours_pid=$!
    wait_for_line "$log" "Waiting for client"
    vm exec --name "$name" --bg -- sh -c "timeout 50 ib_write_bw -R -p $port -s 65536 -D 20 \$HOST_ADDR \
        >/tmp/errors-guest.log 2>&1; echo exit=\$? >>/tmp/errors-guest.log" >/dev/null 2>&1
  fi
  # Mid-transfer: 2 s into the data phase (perftest's report header is printed as it starts), however long a
  # loaded machine took to get there.
  wait_for_line "$log" "#bytes" 60
  sleep 2
  local verdict=1 detail
  if [ "$victim" = siw ]; then
    guest 'killall -9 ib_write_bw'
    local start=$SECONDS
    timeout 10 tail --pid="$ours_pid" -f /dev/null
    wait "$ours_pid"
    local ours_exit=$?
    detail="softndk exit $ours_exit after $((SECONDS - start)) s: $(grep -m1 -E 'Completion with error|the peer closed|closed the data' "$log" | sed 's/^ //')"
    [ "$ours_exit" -eq 1 ] && [ $((SECONDS - start)) -le 10 ] &&
      grep -Eq "Completion with error|the peer closed|closed the data" "$log" && verdict=0
  else
    kill -9 "$ours_pid"
    wait "$ours_pid" 2>/dev/null
    local theirs_exit
    theirs_exit=$(guest_log_when_done /tmp/errors-guest.log 'exit=[0-9]' 10 | grep -o 'exit=[0-9]*')
    detail="siw's ib_write_bw ended with $theirs_exit"
    [ -n "$theirs_exit" ] && [ "$theirs_exit" != exit=0 ] && verdict=0
  fi
  unset SOFTNDK_TRACE
  local info
  # A killed softndk may not have written its last records; its capture is kept but not required to decode
  info=$(summary "${log%.log}.pcap") || { [ "$victim" = siw ] && verdict=1; }
  report $verdict "$victim process killed mid-transfer ($role)" "$detail ($info)"
}

# The causes softndk sends, and how siw 6.1 logs them: it reads the RFC layout's first byte with its own bitfield
# order, so layer and type come out swapped (siw-on-the-wire §3.9); DDP/tagged (1/1) reads the same either way.
run_case siw_initiates ib_write_bw "-s 4096 -n 100 --inject bad-stag" "-s 4096 -n 100" \
  "data connection ended: STATUS_CANCELLED \(0xC0000120\) on a receive, cause DDP/0x1/0x00 \(DDP tagged buffer: invalid STag\)" \
  "layer 1, type 1, code 0" memory
run_case siw_initiates ib_write_bw "-s 4096 -n 100 --inject beyond-region" "-s 4096 -n 100" \
  "data connection ended: STATUS_CANCELLED \(0xC0000120\) on a receive, cause DDP/0x1/0x01 \(DDP tagged buffer: base or bounds violation\)" \
  "layer 1, type 1, code 1" memory
run_case siw_initiates ib_read_bw "-s 4096 -n 100 --inject beyond-region" "-s 4096 -n 100" \
  "data connection ended: STATUS_CANCELLED \(0xC0000120\) on a receive, cause RDMAP/0x1/0x01 \(RDMAP remote protection: base or bounds violation\)" \
  "layer 1, type 0, code 1" ""
run_case siw_initiates ib_send_bw "-s 1024 -n 100" "-s 4096 -n 100" \
  "Completion with error at server: STATUS_BUFFER_OVERFLOW \(0x80000005\) on a receive, cause DDP/0x2/0x05 \(DDP untagged buffer: message too long for available buffer\)" \
  "layer 2, type 1, code 5" ""
run_case softndk_initiates ib_write_bw "-s 4096 -n 100 --inject bad-stag" "-s 4096 -n 100" \
  "STATUS_CANCELLED \(0xC0000120\) on a (write|receive), cause DDP/0x1/0x00 \(DDP tagged buffer: invalid STag\)"
run_case softndk_initiates ib_read_bw "-s 4096 -n 5 --inject beyond-region" "-s 4096 -n 5" \
  "STATUS_REMOTE_RESOURCES \(0xC000013D\) on a read, cause RDMAP/0x1/0x01 \(RDMAP remote protection: base or bounds violation\)"
# 5 requests, not 100, in this and the Read case above: siw resets the stream right behind its Terminate, and a
# burst of 100 kept softndk's lane writing while the reset overtook the Terminate (three attempts out of three for
# the 8 KiB Sends, 2026-12-06).
run_case softndk_initiates ib_send_bw "-s 8192 -n 5" "-s 4096 -n 5" \
  "STATUS_CANCELLED \(0xC0000120\) on a (send|receive), cause DDP/0x2/0x02 \(DDP untagged buffer: invalid MSN, no buffer available\)"
run_case killed siw siw-server
run_case killed siw siw-client
run_case killed softndk siw-server
run_case killed softndk siw-client

# Both sides keep running: a clean ib_write_bw each way, and no kernel warning in the guest.
both_sides_keep_running() {
  begin_case "both sides keep running"
  # perftest's report needs the guest CPU's clock rate, which it measures first; under TCG a preempted vCPU can spoil
  # the measurement, and perftest then exits 1 with "Can't produce a report" after a good data phase
  # (siw_perftest.sh). That signature alone runs the direction once more, on the next port pair, and says so.
  could_not_report() { grep -q "Can't produce a report" <<<"$1"; }
  retried=""
  clean=0
  for attempt in 1 2; do  # siw serves, softndk connects
    next_ports
    log="$out/errors-after-siw-server.log"
    vm exec --name "$name" --bg -- sh -c "timeout 50 ib_write_bw -R -p $forward -s 4096 -n 200 >/tmp/errors-guest.log \
        2>&1; echo exit=\$? >>/tmp/errors-guest.log" >/dev/null 2>&1
    vm wait --name "$name" --listen "$forward" >/dev/null 2>&1
    # The guest's server may not listen yet after the kill cases (TCG): a refused connect is tried again, up to 3 times.
    for connect in 1 2 3; do
      SOFTNDK_TRACE="${log%.log}.pcap" timeout 60 "$ndkperf" ib_write_bw -R -p "$forward" -s 4096 -n 200 127.0.0.1 \
          >"$log" 2>&1
      ours_exit=$?
      grep -q "NdkConnect failed: .*0xC0000236" "$log" || break
      echo "note: the guest refused connect attempt $connect (NdkConnect STATUS_CONNECTION_REFUSED); trying again"
      retried+=" [connected again: the guest's server refused the first connect]"
      sleep 1
    done
    theirs=$(guest_log_when_done /tmp/errors-guest.log 'exit=[0-9]')
    if [ "$attempt" = 1 ] && could_not_report "$theirs"; then
      retried+=" [run once more: siw's perftest could not measure the guest's CPU clock for its report (TCG)]"
      continue
    fi
    break
  done
  [ "$ours_exit" -eq 0 ] && grep -q 'exit=0' <<<"$theirs" || clean=1
  for attempt in 1 2; do  # softndk serves, siw connects
    [ "$attempt" = 2 ] && next_ports
    log="$out/errors-after-siw-client.log"
    SOFTNDK_TRACE="${log%.log}.pcap" timeout 60 "$ndkperf" ib_write_bw -R -p "$reverse" -s 4096 -n 200 >"$log" 2>&1 &
    server=$!
    wait_for_line "$log" "Waiting for client"
    theirs_exit=$(guest "timeout 50 ib_write_bw -R -p $reverse -s 4096 -n 200 \$HOST_ADDR >/tmp/errors-guest.log 2>&1; echo \$?")
    wait "$server"
    ours_exit=$?
    if [ "$attempt" = 1 ] && could_not_report "$(guest 'cat /tmp/errors-guest.log')"; then
      retried+=" [run once more: siw's perftest could not measure the guest's CPU clock for its report (TCG)]"
      continue
    fi
    break
  done
  [ "$ours_exit" -eq 0 ] && [ "$theirs_exit" = 0 ] || clean=1
  guest dmesg >"$out/siw-dmesg-errors.txt"
  if grep -q -E "WARNING|BUG|Oops|Call Trace" "$out/siw-dmesg-errors.txt"; then clean=1; fi
  summary "$out/errors-after-siw-server.pcap" >/dev/null && summary "$out/errors-after-siw-client.pcap" >/dev/null || clean=1
  report $clean "both sides keep running" "a clean ib_write_bw -R each way afterwards; no kernel warning in dmesg$retried"
}
both_sides_keep_running  # not through run_case: it checks this guest after the cases above
exit $failed
