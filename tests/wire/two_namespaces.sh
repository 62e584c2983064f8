#!/usr/bin/env bash
# Issue 7 §5 "two hosts": two network namespaces joined by a veth pair, each with its own address. Each side's
# adapter is bound to its end of the pair (SOFTNDK_INTERFACE), so it owns exactly that address; ndkping (every
# iteration verified on both ends) and ndkperf (write, read, send, ping-pong) run between them over iWARP/TCP.
# Skips (exit 77) with one line saying why when namespaces cannot be made: not root, or no CAP_SYS_ADMIN.
set -euo pipefail
ndkping="$1"
ndkperf="$2"
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: not root, so no network namespaces can be made"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP: iproute2 (ip) is not installed"; exit 77; fi
tag="$$"
a="sndk-a-$tag"
b="sndk-b-$tag"
veth_a="sva$tag"
veth_b="svb$tag"
net="10.$((200 + RANDOM % 50)).$((RANDOM % 250)).0"
prefix="${net%.0}"
log=$(mktemp -d)
cleanup() {
    ip netns pids "$a" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids "$b" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    rm -rf "$log" "/etc/netns/$a"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>"$log/err" || ! ip netns add "$b" 2>>"$log/err"; then
    echo "SKIP: network namespaces cannot be made here: $(head -1 "$log/err")"; exit 77
fi
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_a" netns "$a"
ip link set "$veth_b" netns "$b"
ip -n "$a" addr add "$prefix.1/24" dev "$veth_a"
ip -n "$b" addr add "$prefix.2/24" dev "$veth_b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$veth_a" up
ip -n "$b" link set "$veth_b" up
in_a() { ip netns exec "$a" env SOFTNDK_INTERFACE="$veth_a" "$@"; }
in_b() { ip netns exec "$b" env SOFTNDK_INTERFACE="$veth_b" "$@"; }
for _ in $(seq 50); do ip netns exec "$a" ping -c1 -W1 "$prefix.2" >/dev/null 2>&1 && break; sleep 0.1; done

echo "== ndkping from $prefix.1 ($veth_a in $a) to $prefix.2 ($veth_b in $b)"
port=$((20000 + RANDOM % 20000))
in_b "$ndkping" --server -a "$prefix.2" -p "$port" >"$log/server" 2>&1 &
for _ in $(seq 50); do grep -q "listening" "$log/server" 2>/dev/null && break; sleep 0.1; done
if ! in_a timeout 60 "$ndkping" --client -a "$prefix.2" -p "$port" -c 30 -s 65536 >"$log/client" 2>&1; then
    echo "ndkping client failed:"; cat "$log/client" "$log/server"; exit 1
fi
wait || { echo "ndkping server failed:"; cat "$log/server"; exit 1; }
tail -1 "$log/client"
grep -q "30 iterations, 30 verified, 0 errors" "$log/client"
grep -q "30 iterations, 30 verified, 0 errors" "$log/server"

echo "== no SOFTNDK_INTERFACE: the default adapter owns the host's addresses and the route picks the source"
# Issue 20 §1: before, a client in another host failed with "the source address is not an address of this
# adapter (CM-04)" unless SOFTNDK_INTERFACE named the interface. The peer is named by a host name here
# (ip netns exec mounts /etc/netns/NAME/hosts over /etc/hosts), resolved as rping resolves it.
mkdir -p "/etc/netns/$a"
printf '%s sndk-peer-%s\n' "$prefix.2" "$tag" >"/etc/netns/$a/hosts"
port=$((20000 + RANDOM % 20000))
ip netns exec "$b" env -u SOFTNDK_INTERFACE "$ndkping" --server -a "$prefix.2" -p "$port" >"$log/plain-server" 2>&1 &
for _ in $(seq 50); do grep -q "listening" "$log/plain-server" 2>/dev/null && break; sleep 0.1; done
if ! ip netns exec "$a" env -u SOFTNDK_INTERFACE timeout 60 "$ndkping" --client -a "sndk-peer-$tag" -p "$port" \
        -c 5 >"$log/plain-client" 2>&1; then
    echo "ndkping without SOFTNDK_INTERFACE failed:"; cat "$log/plain-client" "$log/plain-server"; exit 1
fi
wait || { echo "ndkping server without SOFTNDK_INTERFACE failed:"; cat "$log/plain-server"; exit 1; }
grep -q "5 iterations, 5 verified, 0 errors" "$log/plain-client"
tail -1 "$log/plain-client"
echo "SOFTNDK_INTERFACE restricts the choice: bound to lo, the client's route source is refused, and says why"
if ip netns exec "$a" env SOFTNDK_INTERFACE=lo timeout 60 "$ndkping" --client -a "$prefix.2" -p "$port" -c 1 \
        >"$log/restricted" 2>&1; then
    echo "a client bound to lo connected from $prefix.1:"; cat "$log/restricted"; exit 1
fi
grep -q "STATUS_INVALID_ADDRESS (0xC0000141)" "$log/restricted" && grep -q "bound to interface lo" "$log/restricted" \
    || { echo "the refusal does not say why:"; cat "$log/restricted"; exit 1; }
grep -m1 "STATUS_INVALID_ADDRESS" "$log/restricted"

echo "== ndkperf between the namespaces"
port=$((20000 + RANDOM % 20000))
in_b "$ndkperf" --server -a "$prefix.2" -p "$port" --max-size 1048576 >"$log/perf-server" 2>&1 &
for _ in $(seq 50); do grep -q "listening" "$log/perf-server" 2>/dev/null && break; sleep 0.1; done
if ! in_a timeout 120 "$ndkperf" --client -a "$prefix.2" -p "$port" --sizes 64,65536,1048576 --seconds 0.1 \
        --latency-sizes 64 >"$log/perf-client" 2>&1; then
    echo "ndkperf client failed:"; cat "$log/perf-client" "$log/perf-server"; exit 1
fi
wait || { echo "ndkperf server failed:"; cat "$log/perf-server"; exit 1; }
grep -E "^(write|read|send) |ping-pong" "$log/perf-client"

echo "== the server's end vanishes mid-transfer (its link goes down: no FIN, no reset); each side notices"
# Issue 18 §2, SOFTNDK_PEER_STALL_TIMEOUT_MS=3000 on both sides. The client, writing, finds its data unacknowledged
# (TCP_USER_TIMEOUT) or not moving (the stall check); the server, an idle receiver, is probed (keepalive) and the
# user timeout ends it. Each process ends with the connection's error within the timeout and a margin.
port=$((20000 + RANDOM % 20000))
in_b env SOFTNDK_PEER_STALL_TIMEOUT_MS=3000 "$ndkperf" --server -a "$prefix.2" -p "$port" --max-size 65536 \
    >"$log/vanish-server" 2>&1 &
server_pid=$!
for _ in $(seq 50); do grep -q "listening" "$log/vanish-server" 2>/dev/null && break; sleep 0.1; done
in_a env SOFTNDK_PEER_STALL_TIMEOUT_MS=3000 timeout 60 "$ndkperf" --client -a "$prefix.2" -p "$port" --test write \
    --sizes 65536 --seconds 30 >"$log/vanish-client" 2>&1 &
client_pid=$!
sleep 2
ip -n "$b" link set "$veth_b" down
down_at=$SECONDS
client_status=0
wait "$client_pid" || client_status=$?
client_took=$((SECONDS - down_at))
echo "client: exit $client_status, $client_took s after the link went down: $(grep -m1 -E "ended|error|failed" \
    "$log/vanish-client" || true)"
if [ "$client_status" -eq 0 ] || [ "$client_status" -eq 124 ] || [ "$client_took" -gt 8 ]; then
    echo "the client did not notice the vanished server within 3 s (+5 s margin):"; cat "$log/vanish-client"; exit 1
fi
# The server keeps serving (issue 18 §4): it reports the lost client and stays up for the next one.
for _ in $(seq 80); do grep -qE "(client $prefix.1:[0-9]+ left without a Quit|dropped client $prefix.1:[0-9]+)" "$log/vanish-server" && break
    sleep 0.1; done
server_took=$((SECONDS - down_at))
if ! grep -qE "(client $prefix.1:[0-9]+ left without a Quit|dropped client $prefix.1:[0-9]+)" "$log/vanish-server"; then
    kill "$server_pid" 2>/dev/null || true
    echo "the server did not notice the vanished client within 3 s (+5 s margin):"; cat "$log/vanish-server"; exit 1
fi
echo "server: $server_took s after the link went down: $(grep -m1 -E "left without|dropped" "$log/vanish-server")"
kill -0 "$server_pid" 2>/dev/null || { echo "the server ended with its client:"; cat "$log/vanish-server"; exit 1; }
ip -n "$b" link set "$veth_b" up
# The link carries packets again once a ping crosses it (until then a connect is unreachable, 0xC000023D).
for _ in $(seq 50); do ip netns exec "$a" ping -c1 -W1 "$prefix.2" >/dev/null 2>&1 && break; sleep 0.1; done
echo "the link is back: a new client is served by the same server, and its Quit ends it"
if ! in_a timeout 60 "$ndkperf" --client -a "$prefix.2" -p "$port" --test write --sizes 4096 --seconds 0.1 \
        --latency-sizes 64 >"$log/after-client" 2>&1; then
    echo "the server did not serve a client after losing one:"; cat "$log/after-client" "$log/vanish-server"; exit 1
fi
wait "$server_pid" || { echo "the server failed after the Quit:"; cat "$log/vanish-server"; exit 1; }

echo "== an idle connection whose peer vanishes: keepalive alone notices it, on both sides"
# Issue 18 §2: no request is outstanding either way, so only the kernel's probes (keepalive after a third of
# SOFTNDK_PEER_STALL_TIMEOUT_MS, TCP_USER_TIMEOUT at it) can tell. Each side must end the connection within the
# timeout (3 s) plus a margin, and the server stays up.
port=$((20000 + RANDOM % 20000))
in_b env SOFTNDK_PEER_STALL_TIMEOUT_MS=3000 "$ndkperf" --server -a "$prefix.2" -p "$port" --max-size 65536 \
    >"$log/idle-server" 2>&1 &
server_pid=$!
for _ in $(seq 50); do grep -q "listening" "$log/idle-server" 2>/dev/null && break; sleep 0.1; done
in_a env SOFTNDK_PEER_STALL_TIMEOUT_MS=3000 timeout 60 "$ndkperf" --client -a "$prefix.2" -p "$port" --test write \
    --sizes 4096 --seconds 0.1 --idle 30 >"$log/idle-client" 2>&1 &
client_pid=$!
sleep 2
ip -n "$b" link set "$veth_b" down
down_at=$SECONDS
client_status=0
wait "$client_pid" || client_status=$?
client_took=$((SECONDS - down_at))
echo "idle client: exit $client_status, $client_took s after the link went down: $(grep -m1 "ended while idle" \
    "$log/idle-client" || true)"
if ! grep -q "ended while idle" "$log/idle-client" || [ "$client_took" -gt 9 ]; then
    echo "the idle client did not notice the vanished server within 3 s (+6 s margin):"; cat "$log/idle-client"; exit 1
fi
for _ in $(seq 90); do grep -qE "(left without a Quit|dropped client)" "$log/idle-server" && break; sleep 0.1; done
server_took=$((SECONDS - down_at))
if ! grep -qE "(left without a Quit|dropped client)" "$log/idle-server" || [ "$server_took" -gt 9 ]; then
    echo "the idle server did not notice the vanished client within 3 s (+6 s margin):"; cat "$log/idle-server"; exit 1
fi
echo "idle server: $server_took s after the link went down: $(grep -m1 -E "left without|dropped" "$log/idle-server")"
kill -0 "$server_pid" 2>/dev/null || { echo "the server ended with its idle client:"; cat "$log/idle-server"; exit 1; }
kill "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
ip -n "$b" link set "$veth_b" up
for _ in $(seq 50); do ip netns exec "$a" ping -c1 -W1 "$prefix.2" >/dev/null 2>&1 && break; sleep 0.1; done

echo "== an adapter bound to $veth_a does not own loopback: listening there fails"
if in_a "$ndkping" --server -a 127.0.0.1 -p "$port" >"$log/refused" 2>&1; then
    echo "listening on an address the adapter does not own succeeded"; exit 1
fi
grep -q "NdkListen failed" "$log/refused" || { cat "$log/refused"; exit 1; }
echo "two namespaces: ndkping and ndkperf over veth, and the address check, passed"
