#!/usr/bin/env bash
# Issue 20 §1: ndkperf, ndkping and ndkinfo parse every flag strictly. A bad value names the flag and the accepted range and exits 2
# (before: `--seconds abc` aborted with an uncaught std::invalid_argument, exit 134; `--test foo` ran a row named
# foo; `--seconds -1` ran; `-p 70000` wrapped); sizes take k/K/KiB and m/M/MiB; -h and --help print usage to
# stdout and exit 0; an unknown flag gets one line pointing to --help and exit 2. ndkping: rping's -s/-c habits
# get "did you mean --rping"; ndkinfo printed the device for --help and --bogus alike, exit 0, and 8 MiB as
# "0.0 GiB". A client whose server never answers says what it waits for, then ends with STATUS_IO_TIMEOUT.
# Usage: tool_flags.sh NDKPERF NDKPING NDKINFO
set -uo pipefail
ndkperf="$1"
ndkping="$2"
ndkinfo="$3"
failed=0
tool="$ndkperf"
expect() {  # expect EXIT WORDS -- ARGS...: $tool's exit status, and words its output must hold
  local want="$1" words="$2"
  shift 3
  local output status
  output=$("$tool" "$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$words" <<<"$output"; then
    echo "FAIL $(basename "$tool") $*: exit $status (want $want), output: $(head -3 <<<"$output")"
    failed=1
  else
    echo "ok   $(basename "$tool") $*: exit $status, $(head -1 <<<"$output" | cut -c1-110)"
  fi
}
expect 2 '--seconds: "abc" is not a number of seconds from 0.001 to 3600' -- --seconds abc
expect 2 '--seconds: "-1"' -- --seconds -1
expect 2 '-p: "abc" is not a whole number from 1 to 65535' -- --client -a 127.0.0.1 -p abc
expect 2 '-p: "70000"' -- --client -a 127.0.0.1 -p 70000
expect 2 '--test: "foo" is not write, read, send or all' -- --test foo
expect 2 '--sizes: "4x"' -- --sizes 64,4x
expect 2 '--sizes: "0"' -- --sizes 0
expect 2 '--window: "0"' -- --client -a 127.0.0.1 -p 1 --window 0
expect 2 'unknown flag --bogus; see ndkperf --help' -- --bogus
expect 2 '-q: "33" is not a whole number from 1 to 32' -- --client -a 127.0.0.1 -p 1 -q 33
expect 2 '-q (QPs at once) is for --client' -- --server -q 2
expect 2 '--progress-threads: "17"' -- --server --progress-threads 17
expect 2 'ndkperf: --seconds needs a value; see ndkperf --help' -- --seconds
expect 2 "ndkperf: -s is perftest's flag: sizes here are --sizes 4096" -- -s 4096
expect 2 "ndkperf: -n is perftest's flag: here the budget is --seconds S" -- -n 100
expect 2 "ndkperf: -b is perftest's flag: both directions at once is the perftest mode's -b" -- -b
# --help names every flag the native mode parses, and each with a default or a range
for flag in --test --sizes --seconds --pend --random --json --server --client -a -p --max-size --window -q \
            --latency-sizes --connections --idle --progress-threads; do
  if ! "$ndkperf" --help | grep -E '^  -' | grep -qE -- "(^| )$flag([ ,]|$)"; then
    echo "FAIL ndkperf --help does not list $flag among its flags"
    failed=1
  fi
done
expect 0 'usage: ndkperf' -- --help
expect 0 'usage: ndkperf' -- -h
expect 0 '"size":4096' -- --test write --sizes 4k --seconds 0.01 --json
expect 0 '"size":1048576' -- --test write --sizes 1MiB --seconds 0.01 --json
# Statuses are named with a remedy (issue 20): a port nobody listens on (taken from the kernel, then freed).
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect 1 'STATUS_CONNECTION_REFUSED (0xC0000236): nobody listens at that address and port' -- \
  --client -a 127.0.0.1 -p "$closed"
# A port that accepts TCP and closes it (not an iWARP peer) gets the hint that says so.
tcp_only=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(4); s.settimeout(30)
c, _ = s.accept(); c.close()' "$tcp_only" &
for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q ":$tcp_only " && break; sleep 0.1; done
expect 1 'what listens there closed the connection without an MPA reply (not an iWARP peer' -- \
  --client -a 127.0.0.1 -p "$tcp_only"
wait
expect 2 'resolving it as a host name failed' -- --client -a no-such-host.invalid -p 1
expect 0 '"schema":"softndk-ndkperf/2"' -- --test write --sizes 64 --seconds 0.01 --json
expect 0 '"gbytes_per_s":' -- --test write --sizes 64 --seconds 0.01 --json
# perftest mode (issue 20 §1): help, -d as perftest scripts pass it, -a and -b combinations that cannot run
expect 0 '-d, --ib-dev DEVICE' -- ib_write_bw --help
expect 0 'usage: ndkperf ib_write_bw' -- ib_read_bw -h
expect 2 '-d: no device "mlx5_0"' -- ib_write_bw -R -d mlx5_0
expect 0 '-b, --bidirectional' -- ib_send_bw --help
expect 2 'give -a or -s, not both' -- ib_write_bw -R -d lo -a -s 4k
expect 2 '--inject runs one size in one direction' -- ib_write_bw -R -d siw_lo -b --inject bad-stag
expect 2 'ib_send_bw -a counts its Sends per size (-n)' -- ib_send_bw -R -d softndk0 -a -D 2
expect 2 'ndkperf: -q 2: several QPs are not supported in the perftest mode yet' -- ib_write_bw -R -q 2
expect 2 '-s: "4x"' -- ib_write_bw -R -s 4x
expect 2 'unsupported flag --bogus; see ndkperf ib_write_bw --help' -- ib_write_bw -R --bogus
expect 2 'ndkperf: -q 4: several QPs are not supported in the perftest mode yet (one QP: -q 1)' -- ib_write_bw -R -q 4
tool="$ndkping"
expect 1 'STATUS_CONNECTION_REFUSED (0xC0000236): nobody listens' -- --client -a 127.0.0.1 -p "$closed"
expect 2 'did you mean --rping' -- -s -a 127.0.0.1
expect 2 '-c: "abc" is not a whole number' -- -c abc
expect 2 '-p: "70000" is not a whole number from 1 to 65535' -- -p 70000
expect 2 "--client needs the server's -a ADDRESS and -p PORT" -- --client -a 127.0.0.1
expect 2 'unknown flag --bogus; see ndkping --help' -- --bogus
expect 0 'usage: ndkping' -- --help
expect 0 '2 iterations, 2 verified, 0 errors' -- -s 4k -c 2
expect 0 '2 iterations, 2 verified, 0 errors' -- -a localhost -c 2
expect 2 '-a: "no-such-host.invalid" is not an address, and resolving it as a host name failed' -- \
  --client -a no-such-host.invalid -p 1

# Ctrl-C (issue 20 §1): the partial summary, exit 130, as ping and perftest; a listening server likewise.
interrupt() {  # interrupt SECONDS EXIT WORDS -- ARGS...
  local after="$1" want="$2" words="$3"
  shift 4
  local out status
  out=$(mktemp)
  "$tool" "$@" >"$out" 2>&1 &
  local pid=$!
  sleep "$after"
  kill -INT "$pid"
  wait "$pid"
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$words" "$out"; then
    echo "FAIL $(basename "$tool") $* + SIGINT: exit $status (want $want), output: $(tail -3 "$out")"
    failed=1
  else
    echo "ok   $(basename "$tool") $* + SIGINT after ${after} s: exit $status, $(grep -F -- "$words" "$out" | head -1)"
  fi
  rm -f "$out"
}
interrupt 2 130 'no iterations (interrupted)' -- --server
interrupt 3 130 'iterations, ' -- -c 100000000 -s 64
tool="$ndkperf"
interrupt 3 130 '(interrupted: partial results)' -- --test write --sizes 64,4096 --seconds 20
interrupt 3 130 '"interrupted":true' -- --test write --sizes 64 --seconds 20 --json
tool="$ndkping"
# A long wait on a peer says what it waits for: against a server that takes the TCP connection and never answers,
# each client prints what it waits for after 3 s, then ends with STATUS_IO_TIMEOUT at AcceptTimeoutMs (5 s here).
silent_port=$((20000 + RANDOM % 20000))
silent_up=$(mktemp)
python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $silent_port)); s.listen(16); print('up', flush=True)
held, end = [], time.time() + 60
s.settimeout(1)
while time.time() < end:
    try: held.append(s.accept()[0])
    except OSError: pass
" >"$silent_up" 2>&1 &
silent=$!
for _ in $(seq 100); do grep -q up "$silent_up" && break; sleep 0.05; done
export SOFTNDK_ACCEPT_TIMEOUT_MS=5000
silent_client() {  # TOOL ARGS...: says what it waits for, then ends with STATUS_IO_TIMEOUT, exit 1, within 30 s
  local output status
  output=$(timeout 30 "$@" 2>&1)
  status=$?
  if [ "$status" -eq 1 ] && grep -qF "waiting for 127.0.0.1 port $silent_port to answer the connection request" <<<"$output" &&
     grep -qF "NdkConnect failed: STATUS_IO_TIMEOUT (0xC00000B5)" <<<"$output"; then
    echo "ok   $(basename "$1") ${*:2} (a silent server): says what it waits for, then STATUS_IO_TIMEOUT"
  else
    echo "FAIL $(basename "$1") ${*:2} (a silent server): exit $status (want 1), output: $output"
    failed=1
  fi
}
silent_client "$ndkping" --client -a 127.0.0.1 -p "$silent_port"
silent_client "$ndkping" --rping -c -a 127.0.0.1 -p "$silent_port"
silent_client "$ndkperf" --client -a 127.0.0.1 -p "$silent_port" --test write --sizes 64
silent_client "$ndkperf" ib_write_bw -R -p "$silent_port" 127.0.0.1
unset SOFTNDK_ACCEPT_TIMEOUT_MS
kill "$silent" 2>/dev/null
wait "$silent" 2>/dev/null
rm -f "$silent_up"
tool="$ndkinfo"
expect 2 'unknown flag --bogus; see ndkinfo --help' -- --bogus
expect 0 'usage: ndkinfo' -- --help
expect 0 'max_registration_size:' --
exit $failed
