#!/usr/bin/env bash
# Tests of the guest harness itself (vm.sh): it boots, runs commands and reports their status, output and time-outs,
# waits for a listening port, carries bytes both ways through --forward and --reverse, refuses bad input and a taken
# forward port with a message (leaving no qemu behind), stops clean, and the suites' recovery from a guest whose
# network device wedged works (siw_perftest.sh with SIW_SIMULATE_WEDGE=1, one case).
# Usage: vm_test.sh NDKPERF OUTDIR. Exits 77 (skip) with one line when no guest can be prepared.
set -u
ndkperf="$1" out="$2"
here=$(cd "$(dirname "$0")" && pwd)
vm() { "$here/vm.sh" "$@"; }
mkdir -p "$out"
if ! vm prepare >"$out/guest-prepare.log" 2>&1; then
  echo "SKIP guest harness: the guest could not be prepared ($(tail -1 "$out/guest-prepare.log"))"
  exit 77
fi
failed=0
check() {  # check NAME COMMAND...: one line per check
  if "${@:2}"; then echo "ok   guest harness: $1"; else echo "FAIL guest harness: $1"; failed=1; fi
}
name="harness-test-$$"
base=$((20000 + RANDOM % 900 * 2))
forward=$base reverse=$((base + 1))
trap 'vm stop --name "$name" >/dev/null 2>&1; vm stop --name "$name-taken" >/dev/null 2>&1' EXIT

booted() { vm start --name "$name" --forward "$forward" --reverse "$reverse" >"$out/harness-start.log" 2>&1; }
check "a guest boots with siw0 up (start returns once it is)" booted
if ! vm status --name "$name" >/dev/null; then
  sed 's/^/  | /' "$out/harness-start.log"
  exit 1
fi

runs_commands() {
  local text status
  text=$(vm exec --name "$name" -- sh -c 'echo "addr=$GUEST_ADDR host=$HOST_ADDR"; ibv_devices | grep -c siw0; exit 3')
  status=$?
  [ "$status" = 3 ] && grep -q "addr=10.0.2.15 host=10.0.2.100" <<<"$text" && grep -qx 1 <<<"$(tail -1 <<<"$text")"
}
check "exec returns the command's output and exit status; siw0 is listed" runs_commands
times_out() { vm exec --name "$name" --timeout 1 -- sleep 10 >/dev/null 2>&1; [ $? = 124 ]; }
check "exec gives up after --timeout with status 124" times_out

# The guest listens on the forwarded port and answers one line.
vm exec --name "$name" -- sh -c 'printf "#!/bin/sh\nread line; echo \"guest got \$line\"\n" >/tmp/answer.sh;
  chmod +x /tmp/answer.sh' >/dev/null
vm exec --name "$name" --bg -- nc -l -p "$forward" -e /tmp/answer.sh >/dev/null
check "wait --listen returns once the guest port listens" vm wait --name "$name" --timeout 60 --listen "$forward"
not_listening() {
  local text
  text=$(vm wait --name "$name" --timeout 1 --listen $((forward + 2)) 2>&1) && return 1
  grep -q "not listening after 1 s" <<<"$text"
}
check "wait --listen on a port nothing listens on fails, naming the port" not_listening
forwards() {
  python3 - "$forward" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"from the host\n")
reply = s.makefile().readline()
sys.exit(0 if reply == "guest got from the host\n" else 1)
EOF
}
check "--forward carries a line to the guest and its answer back" forwards

reverses() {
  python3 - "$reverse" "$out/reverse.txt" <<'EOF' &
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen(1)
server.settimeout(30)
peer, _ = server.accept()
line = peer.makefile().readline()
peer.sendall(("host got " + line).encode())
peer.close()
open(sys.argv[2], "w").write(line)
EOF
  local listener=$! reply
  sleep 0.5
  reply=$(vm exec --name "$name" --timeout 30 -- sh -c "echo from the guest | nc -w 10 \$HOST_ADDR $reverse")
  wait "$listener" && [ "$reply" = "host got from the guest" ] && [ "$(cat "$out/reverse.txt")" = "from the guest" ]
}
check "--reverse carries a guest connection to host 127.0.0.1, both ways" reverses

refuses() {  # refuses EXPECTED-MESSAGE ARGS...: vm.sh exits 2 with the message
  local text
  text=$(vm "${@:2}" 2>&1) && return 1
  grep -qF -- "$1" <<<"$text"
}
check "a forward port out of range is refused" refuses "--forward '70000': a port from 1 to 65535" \
  start --name "$name-bad" --forward 70000
check "an unknown option is refused" refuses "unknown option '--frobnicate'" start --name "$name-bad" --frobnicate
check "a bad guest name is refused" refuses "--name 'a/b'" start --name a/b
check "exec on a guest that is not running is refused" refuses "is not running" exec --name "$name-none" -- true
check "a second start of a running guest is refused" refuses "is already running" start --name "$name"
ksmbd_serves() {  # ksmbd built with SMB Direct listens on iWARP port 5445 with a user account; a bad option is named
  vm exec --name "$name" --timeout 120 -- ksmbd-start --user smbuser secret >"$out/ksmbd-start.log" 2>&1 &&
    grep -q "ksmbd listens on port 5445 (SMB Direct over siw0), user smbuser" "$out/ksmbd-start.log" &&
    vm exec --name "$name" -- sh -c 'dmesg | grep -q "smb_direct: init RDMA listener"' &&
    ! vm exec --name "$name" -- ksmbd-start --frobnicate >"$out/ksmbd-bad.log" 2>&1 &&
    grep -q "unknown option '--frobnicate'" "$out/ksmbd-bad.log"
}
check "ksmbd-start loads ksmbd with SMB Direct, which listens on port 5445; a bad option is named" ksmbd_serves

taken_port() {  # a forward onto a port the host already uses: a clear failure, and no qemu left running
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(60)' $((base + 4)) &
  local holder=$! text status
  sleep 0.5
  text=$(vm start --name "$name-taken" --forward $((base + 4)) 2>&1)
  status=$?
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  [ "$status" = 2 ] && grep -q "qemu failed to start: a --forward port is taken" <<<"$text" &&
    ! vm status --name "$name-taken" >/dev/null 2>&1
}
check "a taken forward port fails the start with a message and leaves no qemu" taken_port

stops() {
  local pid
  pid=$(vm status --name "$name" | grep -o 'qemu pid [0-9]*' | cut -d' ' -f3)
  [ -n "$pid" ] && vm stop --name "$name" && ! vm status --name "$name" >/dev/null 2>&1 && ! kill -0 "$pid" 2>/dev/null
}
check "stop powers the guest off and its qemu is gone" stops
vm stop --name "$name" >/dev/null 2>&1

# The suites' recovery from a wedged network device (siw_common.sh): one perftest case, eth0 taken down before it.
wedge_recovery() {
  SIW_SIMULATE_WEDGE=1 SIW_PERFTEST_CASES=ib_write_bw:65536:20 "$here/../siw_perftest.sh" "$ndkperf" "$out/wedge" \
    >"$out/wedge.log" 2>&1 || return 1
  grep -q "^RERUN" "$out/wedge.log" && [ "$(grep -c '^ok ' "$out/wedge.log")" = 2 ]
}
check "a wedged guest network is recognised, a fresh guest boots and the case passes" wedge_recovery
# A case's own request for a fresh guest (siw_perftest.sh: siw's drop at a message boundary, simulated).
drop_rerun() {
  SIW_SIMULATE_DROP=1 SIW_PERFTEST_CASES=ib_write_bw:65536:20 "$here/../siw_perftest.sh" "$ndkperf" "$out/drop" \
    >"$out/drop.log" 2>&1 || return 1
  grep -q "^RERUN .*siw's client flushed its Sends" "$out/drop.log" && [ "$(grep -c '^ok ' "$out/drop.log")" = 3 ]
}
check "a case that asks for a fresh guest gets one and passes there" drop_rerun
[ "$failed" = 0 ] || { echo "guest harness: some checks failed; logs in $out"; exit 1; }
