#!/usr/bin/env bash
# Issue 21 §2: where the time goes in a wire benchmark. Runs one scenario between two ndkperf processes (the server
# runs as "ndkserver", the client as "ndkclient", so perf tells them apart), records every CPU with call graphs
# (perf record -a -g) while the scenario is in its steady state, and prints for each process the share of all
# samples taken in: each system call (with everything the kernel did under it, the TCP stack included), futex
# wake-ups and waits, scheduler yields, memory copies, CRC, mutexes, malloc/free and softndk's own code.
# Needs root (perf -a) and the release build.
#   Usage: scripts/profile-wire.sh SCENARIO [SECONDS]
#   SCENARIO: write64 (64 B writes, window 16 in DEFER bursts), write1m (1 MiB writes), write256k and read256k,
#   pingpong64 (64 B Send
#   ping-pong), mtu1500 (1 MiB writes between two namespaces over a veth pair at MTU 1500)
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="${1:?usage: scripts/profile-wire.sh write64|write1m|write256k|read256k|pingpong64|mtu1500 [SECONDS]}"
seconds="${2:-4}"
command -v perf >/dev/null || { echo "profile-wire: perf is not installed (apt-get install linux-perf)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "profile-wire: perf -a needs root"; exit 77; }
cmake --preset release >/dev/null
cmake --build --preset release --target ndkperf >/dev/null
work=$(mktemp -d)
netns_a="" netns_b=""
cleanup() {
  pkill -f "$work/ndk" 2>/dev/null || true
  for ns in $netns_a $netns_b; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cp build/release/tools/ndkperf "$work/ndkserver"
cp build/release/tools/ndkperf "$work/ndkclient"
address=127.0.0.1 run_a=() run_b=()
case "$scenario" in
  write64) client_args=(--test write --sizes 64 --window 16) ;;
  write1m) client_args=(--test write --sizes 1m --window 16) ;;
  read256k) client_args=(--test read --sizes 256k --window 16) ;;
  write256k) client_args=(--test write --sizes 256k --window 16) ;;
  pingpong64) client_args=(--test send --sizes 64 --latency-sizes 64) ;;
  mtu1500)
    client_args=(--test write --sizes 1m --window 16)
    netns_a="ndkprof-a-$$" netns_b="ndkprof-b-$$"
    ip netns add "$netns_a" && ip netns add "$netns_b"
    ip link add "pfa$$" type veth peer name "pfb$$"
    ip link set "pfa$$" netns "$netns_a" && ip link set "pfb$$" netns "$netns_b"
    ip -n "$netns_a" addr add 10.214.0.1/24 dev "pfa$$" && ip -n "$netns_b" addr add 10.214.0.2/24 dev "pfb$$"
    for ns in $netns_a $netns_b; do ip -n "$ns" link set lo up; done
    ip -n "$netns_a" link set "pfa$$" mtu 1500 up && ip -n "$netns_b" link set "pfb$$" mtu 1500 up
    address=10.214.0.1
    run_a=(ip netns exec "$netns_a" env SOFTNDK_INTERFACE="pfa$$")
    run_b=(ip netns exec "$netns_b" env SOFTNDK_INTERFACE="pfb$$")
    for _ in $(seq 50); do ip netns exec "$netns_b" ping -c1 -W1 "$address" >/dev/null 2>&1 && break; sleep 0.1; done
    ;;
  *) echo "profile-wire: unknown scenario $scenario"; exit 2 ;;
esac
port=$((20000 + RANDOM % 20000))
"${run_a[@]}" "$work/ndkserver" --server -a "$address" -p "$port" >"$work/server.log" 2>&1 &
for _ in $(seq 100); do grep -q listening "$work/server.log" 2>/dev/null && break; sleep 0.05; done
# Bandwidth runs first, then the ping-pong: record the second half of the phase that is profiled.
total=$((seconds * 2))
"${run_b[@]}" "$work/ndkclient" --client -a "$address" -p "$port" "${client_args[@]}" --seconds "$total" \
    >"$work/client.log" 2>&1 &
client=$!
record="$seconds"
if [ "$scenario" = pingpong64 ]; then
  # The ping-pong stops at 100000 round trips (about 2 s here): record 1.5 s from just after it starts.
  sleep "$total.3"
  record=1.5
else
  sleep $((seconds / 2 + 1))
fi
perf record -a -g -o "$work/perf.data" -- sleep "$record" >/dev/null 2>&1
wait "$client" || { cat "$work/client.log"; exit 1; }
echo "== scenario $scenario: what the client printed"
grep -E "^(write|read|send) |one-way" "$work/client.log" || true
perf report -i "$work/perf.data" --children --sort comm,sym -g none --stdio 2>/dev/null >"$work/children.txt"
perf report -i "$work/perf.data" --no-children --sort comm,sym -g none --stdio 2>/dev/null >"$work/self.txt"
python3 - "$work/children.txt" "$work/self.txt" <<'EOF'
import re, sys
def rows(path):
    for line in open(path):
        m = re.match(r"\s+([\d.]+)%\s+(?:([\d.]+)%\s+)?(\S+)\s+\[(.)\]\s+(.*)", line)
        if m:
            yield m.group(3), m.group(4), m.group(5).strip(), float(m.group(1))
children, self_ = {}, {}
for comm, kind, sym, pct in rows(sys.argv[1]):
    children[(comm, sym)] = max(children.get((comm, sym), 0), pct)
for comm, kind, sym, pct in rows(sys.argv[2]):
    self_.setdefault(comm, []).append((kind, sym, pct))
# Kernel entry points: the share of all samples spent under each (what it did inside included).
syscalls = [("every system call", ["do_syscall_64"]),
            ("  sendmsg/sendto/write", ["__sys_sendmsg", "__sys_sendto", "ksys_write"]),
            ("  readv/recv/read", ["do_readv", "__sys_recvfrom", "ksys_read"]),
            ("  epoll_wait/poll", ["do_epoll_wait", "do_sys_poll"]),
            ("  futex (lock waits and wake-ups)", ["__x64_sys_futex"]),
            ("  sched_yield", ["__x64_sys_sched_yield"])]
user = [("memcpy (user)", r"memmove|memcpy"), ("CRC32c", r"crc32|Crc32"),
        ("mutex (user side)", r"pthread_mutex|lll_lock|__lll_"), ("malloc/free", r"malloc|free|_int_|cfree|tcache"),
        ("softndk code", r"softndk::")]
for comm in ("ndkserver", "ndkclient"):
    total = sum(p for _, _, p in self_.get(comm, []))
    if total == 0:
        continue
    print(f"\n{comm}: {total:.1f} % of all samples (2 CPUs = 200 % of one core would be 100 % here)")
    covered = 0.0
    for label, names in syscalls:
        share = sum(children.get((comm, n), 0) for n in names)
        print(f"  {share:6.1f} %  {label}")
    in_user = sum(p for kind, _, p in self_[comm] if kind == ".")
    print(f"  {in_user:6.1f} %  user space, of which:")
    for label, pattern in user:
        share = sum(p for kind, sym, p in self_[comm] if kind == "." and re.search(pattern, sym))
        print(f"  {share:6.1f} %    {label}")
    kernel_copy = sum(p for kind, sym, p in self_[comm] if kind == "k" and re.search(r"copy_(to|from)_iter|copy_user|memcpy|memmove", sym))
    print(f"  {kernel_copy:6.1f} %  (within the kernel shares: the kernel's own copies to and from user memory)")
    print("  top self symbols:")
    for kind, sym, p in sorted(self_[comm], key=lambda r: -r[2])[:12]:
        print(f"    {p:6.2f} %  [{kind}] {sym[:100]}")
EOF
