#!/usr/bin/env bash
# Issue 8 §2: `ndkperf ib_write_bw|ib_read_bw|ib_send_bw -R` (perftest's rdma_cm protocol) with softndk on both
# ends, two processes over loopback: each tool at 2 B and 1 MiB, send_bw past its 512 receives (credits), a
# duration run, --report_gbits; both sides exit 0 and print their row. Then the refusals: no -R, a bad flag.
set -uo pipefail
ndkperf="$1"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
failed=0
run() {  # tool, then the flags both sides get
  local tool="$1" port=$((20000 + RANDOM % 20000)) size
  shift
  size=$(grep -oE -- '-s [0-9]+' <<<"$*" | cut -d' ' -f2)
  "$ndkperf" "$tool" -R -p "$port" "$@" >"$log/server" 2>&1 &
  local server=$!
  for _ in $(seq 100); do grep -q "Waiting for client" "$log/server" && break; sleep 0.05; done
  timeout 120 "$ndkperf" "$tool" -R -p "$port" "$@" 127.0.0.1 >"$log/client" 2>&1
  local client=$?
  timeout 30 tail --pid="$server" -f /dev/null
  wait "$server"
  local served=$?
  if [ "$client" -eq 0 ] && [ "$served" -eq 0 ] && grep -Eq "^ $size +[0-9]+ " "$log/client" &&
     grep -Eq "^ $size +[0-9]+ " "$log/server"; then
    echo "ok   $tool $* ($(grep -E "^ $size " "$log/client" | tr -s ' \t' ' '))"
  else
    echo "FAIL $tool $* (client exit $client, server exit $served)"
    tail -n 5 "$log/client" "$log/server"
    failed=1
  fi
}
run ib_write_bw -s 2 -n 1000
run ib_write_bw -s 1048576 -n 50 --report_gbits
run ib_read_bw -s 2 -n 1000
run ib_read_bw -s 1048576 -n 50 -o 4
run ib_send_bw -s 2 -n 3000
run ib_send_bw -s 1048576 -n 50
run ib_send_bw -s 4096 -D 1 -r 64
run ib_write_bw -s 65536 -D 1
if "$ndkperf" ib_write_bw -s 64 >"$log/refused" 2>&1 || ! grep -q "add -R" "$log/refused"; then
  echo "FAIL ib_write_bw without -R must be refused"; cat "$log/refused"; failed=1
fi
if "$ndkperf" ib_write_bw -R --bogus >"$log/refused" 2>&1 || ! grep -q "unsupported flag --bogus" "$log/refused"; then
  echo "FAIL an unknown flag must be refused"; cat "$log/refused"; failed=1
fi
if "$ndkperf" ib_read_bw -R -r 64 >"$log/refused" 2>&1; then
  echo "FAIL -r is send_bw's only"; failed=1
fi
exit $failed
