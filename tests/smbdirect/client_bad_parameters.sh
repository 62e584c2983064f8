#!/usr/bin/env bash
# Each bad parameter of the SMB Direct client sample fails DriverEntry with its status and a line that names the
# parameter, its value and what is allowed; nothing is left behind (no unload, no leak report). With no server
# listening, the connection is refused: the client says so and unloads clean.
# Usage: client_bad_parameters.sh KMHOST SMBDIRECT_CLIENT_SO
kmhost="$1" driver="$2"
failed=0
check() {  # check PARAMETER=VALUE STATUS EXPECTED-LINE
  local out
  out=$("$kmhost" --verifier abort --stop-when-idle --seconds 30 --parameter "$1" "$driver" 2>&1)
  if grep -qF -- "$3" <<<"$out" && grep -q "DriverEntry(smbdirect-client) = $2" <<<"$out" &&
     ! grep -q "LEAK" <<<"$out"; then
    echo "ok   $1: $3"
  else
    echo "FAIL $1: expected \"$3\" and $2; the output:"
    sed 's/^/  | /' <<<"$out"
    failed=1
  fi
}
check Files=0 STATUS_INVALID_PARAMETER "parameter Files 0: from 1 to 8"
check Files=9 STATUS_INVALID_PARAMETER "parameter Files 9: from 1 to 8"
check LargestIo=100 STATUS_INVALID_PARAMETER "parameter LargestIo 100: from 4096 to 8388608"
check LargestIo=9000000 STATUS_INVALID_PARAMETER "parameter LargestIo 9000000: from 4096 to 8388608"
check Port=0 STATUS_INVALID_PARAMETER "parameter Port 0: from 1 to 65535"
check Invalidate=never STATUS_INVALID_PARAMETER 'parameter Invalidate "never": both, remote or local'
check Address=1.2.3 STATUS_INVALID_PARAMETER 'parameter Address "1.2.3": an IPv4 address'
check Share= STATUS_INVALID_PARAMETER "parameter Share: a share name"
check Password=secret STATUS_INVALID_PARAMETER "parameter Password without User: give both, or neither"
check "User=al ice" STATUS_INVALID_PARAMETER "parameter User: printable ASCII without spaces"
# Nothing listens on port 1 of loopback: the connection is refused, said in words, and the driver unloads clean.
out=$("$kmhost" --verifier abort --stop-when-idle --seconds 60 --completion pend --parameter Port=1 "$driver" 2>&1)
if grep -q "RDMA connection to the server: 0xC0000236 (connection refused)" <<<"$out" &&
   grep -q "client done: 0xC0000236" <<<"$out" && grep -q "clean exit, no leaks" <<<"$out"; then
  echo "ok   a refused connection ends the run with STATUS_CONNECTION_REFUSED and a clean unload"
else
  echo "FAIL a refused connection; the output:"
  sed 's/^/  | /' <<<"$out"
  failed=1
fi
exit $failed
