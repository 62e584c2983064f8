#!/usr/bin/env bash
# Each bad parameter of the NVMe-oF host sample fails DriverEntry with STATUS_INVALID_PARAMETER and a line that
# names the parameter, its value and what is allowed; nothing is left behind (no unload, no leak report).
# Usage: host_bad_parameters.sh KMHOST NVMEOF_HOST_SO
kmhost="$1" driver="$2"
failed=0
check() {  # check PARAMETER=VALUE EXPECTED-LINE
  local out
  out=$("$kmhost" --verifier abort --stop-when-idle --seconds 30 --parameter "$1" "$driver" 2>&1)
  if grep -qF -- "$2" <<<"$out" && grep -q "STATUS_INVALID_PARAMETER" <<<"$out"; then
    echo "ok   $1: $2"
  else
    echo "FAIL $1: expected \"$2\"; the output:"
    sed 's/^/  | /' <<<"$out"
    failed=1
  fi
}
check IoQueues=9 "parameter IoQueues 9: from 1 to 4"
check IoQueues=0 "parameter IoQueues 0: from 1 to 4"
check QueueDepth=1 "parameter QueueDepth 1: from 2 to 64"
check QueueDepth=65 "parameter QueueDepth 65: from 2 to 64"
check TestBytes=4096 "parameter TestBytes 4096: at least 131072"
check Port=70000 "parameter Port 70000: from 1 to 65535"
check Invalidate=sometimes 'parameter Invalidate "sometimes": both, remote or local'
check Address=10.0.0 'parameter Address "10.0.0": an IPv4 address'
check "Nqn=nqn.with space" "parameter Nqn: printable ASCII without spaces"
exit $failed
