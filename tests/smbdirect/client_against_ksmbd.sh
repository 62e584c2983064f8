#!/usr/bin/env bash
# The SMB Direct client sample (samples/km/smbdirect-client, under softndk-kmhost) against Linux's SMB server,
# ksmbd with SMB Direct, over soft-iWARP in the interop guest (ksmbd-start: a share on tmpfs, port 5445). Each case
# writes two 8 MiB files through a sweep of I/O sizes (1 byte to 8 MiB) and whole, reads every byte back and checks
# it (1 byte to 64 KiB also with the data in the messages, so MS-SMBD fragments and reassembles them both ways); then the guest's own sha256 of each file is checked against the pattern. Cases: completion modes inline, pend
# and random; MPA CRC off and on (with CRC on, tshark must find good CRCs and no bad one); who invalidates each I/O's
# first MR (both ways in turn, the server always, we always); a guest session and a user's (NTLMv2, every message
# signed with AES-CMAC and every response's signature checked). Two refusals: a share that does not exist and a
# wrong password (each status in words, a clean unload).
# A failing case prints the client's last steps, ksmbd's debug log (its rdma component, in the guest's dmesg) and the
# capture's end. Usage: client_against_ksmbd.sh KMHOST SMBDIRECT_CLIENT_SO OUTDIR. Exits 77 (skip) only when no guest
# can be prepared at all; a guest without ksmbd is a failure.
set -u
kmhost="$1" driver="$2" out="$3"
name="smbdirect-$$"
file_bytes=$((8 * 1024 * 1024))
pick_guest_ports() {  # one forwarded port, to ksmbd's 5445 in the guest
  base=$((21000 + RANDOM % 900))
  guest_ports=(--forward "$base:5445")
}
pick_guest_ports
# shellcheck source=../interop/siw_common.sh
. "$(dirname "$0")/../interop/siw_common.sh"
rm -f "$out"/smbdirect-*

user=smbuser password=Secret-42
start_ksmbd() {
  vm exec --name "$name" --timeout 120 -- ksmbd-start --user "$user" "$password" >"$out/smbdirect-ksmbd-start.log" 2>&1
}
if ! start_ksmbd; then
  echo "FAIL smbdirect: ksmbd did not start in the guest:"
  sed 's/^/  | /' "$out/smbdirect-ksmbd-start.log"
  vm exec --name "$name" -- sh -c 'dmesg | tail -n 12' | sed 's/^/  | /'
  exit 1
fi
# The pattern the client writes (ScPattern in samples/km/smbdirect-client/client.c), file by file.
expected=$(python3 - "$file_bytes" <<'EOF'
import hashlib, sys
n = int(sys.argv[1])
for f in (0, 1):
    print(hashlib.sha256(bytes((((i * 131) ^ (i >> 13) ^ (f * 0x3D) ^ 0x5A) & 0xFF) for i in range(n))).hexdigest())
EOF
)

failed_details() {  # the client's last steps, ksmbd's log, the capture's end
  echo "  -- the client's last steps ($1):"
  grep "smbdirect-client\|softndk-kmhost\|VERIFIER" "$1" | tail -n 14 | sed 's/^/  | /'
  echo "  -- ksmbd's debug log and the guest's kernel messages (dmesg, last 14 lines):"
  vm exec --name "$name" -- sh -c 'dmesg | tail -n 14' | sed 's/^/  | /'
  [ -f "${2%.pcap}.txt" ] && echo "  -- the capture's end:" && tail -n 6 "${2%.pcap}.txt" | sed 's/^/  | /'
}

run_client() {  # run_client MODE CRC INVALIDATE guest|user
  local mode=$1 crc=$2 invalidate=$3 session=$4 label="completion $1, MPA CRC $2, invalidate $3, $4 session"
  local account=() session_line="SMB2 SESSION_SETUP (guest): 0x00000000" flags="flags 0x1 (guest)"
  if [ "$session" = user ]; then
    account=(--parameter User="$user" --parameter Password="$password")
    session_line="SMB2 SESSION_SETUP (NTLMv2, signed): 0x00000000" flags="flags 0x0 (user)"
  fi
  begin_case "smbdirect client -> ksmbd: $label"
  local log="$out/smbdirect-$mode-crc-$crc-$invalidate-$session.log"
  local pcap="$out/smbdirect-$mode-crc-$crc-$invalidate-$session.pcap"
  local status info sums counts ok=1
  vm exec --name "$name" -- sh -c 'rm -f /srv/share/softndk-*; dmesg -c >/dev/null' >/dev/null
  [ "$crc" = on ] && export SOFTNDK_MPA_CRC=1 || unset SOFTNDK_MPA_CRC
  SOFTNDK_TRACE="$pcap" SOFTNDK_VERIFIER_TOLERATED=abort timeout 300 "$kmhost" --verifier abort --stop-when-idle \
    --seconds 240 --completion "$mode" --seed 7 --parameter Port="$base" --parameter Invalidate="$invalidate" \
    "${account[@]}" "$driver" >"$log" 2>&1
  status=$?
  unset SOFTNDK_MPA_CRC
  sums=$(vm exec --name "$name" -- sh -c 'sha256sum /srv/share/softndk-0.bin /srv/share/softndk-1.bin' | cut -d' ' -f1)
  info=$(summary "$pcap")
  counts=$(grep -o "first MRs invalidated by the server [0-9]*, MRs invalidated by us [0-9]*" "$log")
  local io server
  io=$(grep -o "([0-9]* I/Os by RDMA" "$log" | tr -dc 0-9)
  # MS-SMBD's fragmentation both ways and the credits granted inside the server's long messages (the 64 KiB READ
  # and WRITE with their data in the messages)
  local smbd sent_messages sent_fragments got_messages got_fragments grants
  smbd=$(grep -o "SMB Direct: [0-9]* messages sent in [0-9]* fragments, [0-9]* received in [0-9]* fragments.*, [0-9]* credit grants" "$log")
  read -r sent_messages sent_fragments got_messages got_fragments grants < <(sed -E \
    's/SMB Direct: ([0-9]+) messages sent in ([0-9]+) fragments, ([0-9]+) received in ([0-9]+) fragments.*, ([0-9]+) credit grants/\1 \2 \3 \4 \5/' <<<"$smbd")
  [ -n "${grants:-}" ] && [ "$sent_fragments" -gt "$sent_messages" ] && [ "$got_fragments" -gt "$got_messages" ] &&
    [ "$grants" -gt 0 ] || ok=0
  server=$(grep -o "invalidated by the server [0-9]*" "$log" | tr -dc 0-9)
  case "$invalidate" in
    both) [ -n "$server" ] && [ "$server" -gt 0 ] && [ "$server" -lt "$io" ] || ok=0 ;;
    remote) [ -n "$server" ] && [ "$server" = "$io" ] || ok=0 ;;
    local) [ "$server" = 0 ] || ok=0 ;;
  esac
  if [ "$ok" = 1 ] && [ "$status" = 0 ] && grep -q "every byte verified: 2 files" "$log" &&
     grep -q "client done: 0x00000000" "$log" && grep -q "clean exit, no leaks" "$log" &&
     grep -qF "$session_line" "$log" && grep -qF "$flags" "$log" &&
     { [ "$session" = guest ] || grep -Eq "signing: [1-9][0-9]* requests signed, [1-9][0-9]* responses' signatures verified" "$log"; } &&
     ! grep -q "VERIFIER\|refused:" "$log" && [ "$sums" = "$expected" ] &&
     { [ "$crc" = off ] || [[ "$info" == *" good CRC32, 0 bad"* ]]; }; then
    echo "ok   smbdirect client -> ksmbd: $label: 2 files of 8 MiB, I/O from 1 byte to 8 MiB, every byte read back" \
      "and the guest's sha256 match ($io I/Os by RDMA; $counts; messages out $sent_messages in $sent_fragments fragments," \
      "in $got_messages in $got_fragments, $grants credit grants inside long ones$(grep -o "; [0-9]* requests signed, [0-9]* responses' signatures verified" "$log" | tr -d ';' | sed 's/^/;/')) ($info)"
  else
    echo "FAIL smbdirect client -> ksmbd: $label (kmhost exit $status; guest sha256 $(tr '\n' ' ' <<<"$sums")," \
      "expected $(tr '\n' ' ' <<<"$expected"); $counts of $io I/Os)"
    failed_details "$log" "$pcap"
    case_failed "smbdirect client -> ksmbd: $label"
  fi
}

# A share that does not exist: the server's status in words, then a clean unload.
no_such_share() {
  begin_case "smbdirect client -> ksmbd: a share that does not exist"
  local log="$out/smbdirect-no-such-share.log" status
  timeout 120 "$kmhost" --stop-when-idle --seconds 60 --parameter Port="$base" --parameter Share=nothere "$driver" \
    >"$log" 2>&1
  status=$?
  if grep -q "TREE_CONNECT: the server answered 0xC00000CC (no such share)" "$log" &&
     grep -q "client done: 0xC00000CC (no such share)" "$log" && grep -q "clean exit, no leaks" "$log"; then
    echo "ok   smbdirect client -> ksmbd: a share that does not exist is named STATUS_BAD_NETWORK_NAME, and the" \
      "client unloads clean (kmhost exit $status)"
  else
    echo "FAIL smbdirect client -> ksmbd: a share that does not exist (kmhost exit $status)"
    failed_details "$log" /dev/null
    case_failed "smbdirect client -> ksmbd: a share that does not exist"
  fi
}

# A wrong password: STATUS_LOGON_FAILURE in words, then a clean unload.
wrong_password() {
  begin_case "smbdirect client -> ksmbd: a wrong password"
  local log="$out/smbdirect-wrong-password.log" status
  timeout 120 "$kmhost" --stop-when-idle --seconds 60 --parameter Port="$base" --parameter User="$user" \
    --parameter Password=not-it "$driver" >"$log" 2>&1
  status=$?
  if grep -q "SESSION_SETUP (NTLMSSP AUTHENTICATE): the server answered 0xC000006D (logon failure)" "$log" &&
     grep -q "client done: 0xC000006D (logon failure)" "$log" && grep -q "clean exit, no leaks" "$log"; then
    echo "ok   smbdirect client -> ksmbd: a wrong password is named STATUS_LOGON_FAILURE, and the client unloads" \
      "clean (kmhost exit $status)"
  else
    echo "FAIL smbdirect client -> ksmbd: a wrong password (kmhost exit $status)"
    failed_details "$log" /dev/null
    case_failed "smbdirect client -> ksmbd: a wrong password"
  fi
}

on_fresh_guest() { start_ksmbd; }
run_case run_client inline off both guest
run_case run_client pend off both guest
run_case run_client random off both guest
run_case run_client inline on remote guest
run_case run_client random on local guest
run_case run_client inline off both user
run_case run_client pend on remote user
run_case run_client random off both user
run_case no_such_share
run_case wrong_password
vm exec --name "$name" -- dmesg >"$out/smbdirect-guest-dmesg.txt" 2>&1
exit $failed
