#!/usr/bin/env bash
# softndk-kmhost as a host (issue 19 §2/§3, issue 20 §1): --interface defines what the driver sees; SIGTERM or
# SIGINT ends the host with a report even while DriverEntry waits for ever; flags are strict.
# Usage: kmhost_host.sh KMHOST FILEPUSH.so STUCK_DRIVER.so PORT
set -uo pipefail
kmhost="$1"
filepush="$2"
stuck="$3"
port="$4"
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
check() {  # check NAME WANT_EXIT STATUS WORDS
  if [ "$3" -ne "$2" ] || ! grep -qF -- "$4" "$out"; then
    echo "FAIL $1: exit $3 (want $2), output:"; tail -8 "$out"; failed=1
  else
    echo "ok   $1: exit $3, $(grep -F -- "$4" "$out" | head -1 | cut -c1-120)"
  fi
}

# Two interfaces of the host's choosing; the driver finds 127.0.0.1 on IfIndex 7 and runs both sides there.
"$kmhost" --verifier abort --stop-when-idle --seconds 60 --interface 7=127.0.0.1 --interface 9=::1 \
    --parameter Port="$port" "$filepush" >"$out" 2>&1
status=$?
check "filepush on --interface 7=127.0.0.1" 0 "$status" "over interface 7"
grep -q "server verified" "$out" || { echo "FAIL filepush did not verify on interface 7"; failed=1; }

for signal in TERM INT; do
  "$kmhost" "$stuck" >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "waiting for an event" "$out" && break; sleep 0.05; done
  kill -"$signal" "$pid"
  wait "$pid"
  status=$?
  [ "$signal" = TERM ] && want=143 || want=130
  check "SIG$signal inside DriverEntry" "$want" "$status" "inside DriverEntry, which has not returned"
  grep -q "Suck" "$out" || { echo "FAIL SIG$signal: the report does not name the driver's pool block (tag Suck)"; failed=1; }
done

"$kmhost" --help >"$out" 2>&1; check "--help" 0 $? "--interface IFINDEX=ADDRESS"
"$kmhost" --interface 7 "$stuck" >"$out" 2>&1; check "--interface without =" 2 $? "is not IFINDEX=ADDRESS"
"$kmhost" --interface 7=not.a.host.invalid "$stuck" >"$out" 2>&1; check "--interface bad address" 2 $? "resolving it"
"$kmhost" --interface 7=127.0.0.1 --interface 7=::1 "$stuck" >"$out" 2>&1; check "IfIndex twice" 2 $? "given twice"
"$kmhost" --completion sometimes "$stuck" >"$out" 2>&1; check "--completion bad" 2 $? "is not inline, pend or random"
"$kmhost" --seconds -3 "$stuck" >"$out" 2>&1; check "--seconds bad" 2 $? '--seconds: "-3"'
"$kmhost" --bogus "$stuck" >"$out" 2>&1; check "unknown flag" 2 $? "unknown flag --bogus; see softndk-kmhost --help"
"$kmhost" /nonexistent/driver.so >"$out" 2>&1; check "missing driver" 6 $? "cannot load"
exit $failed
