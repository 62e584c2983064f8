#!/usr/bin/env python3
"""Issue 18 §4 for ndkping: a client that completes its handshake and then sends nothing costs the server no core
(it busy-polled at 100 % of one before), and the server ends its session when the client leaves.
Usage: ndkping_silent_client.py NDKPING"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_peer  # noqa: E402  (the raw MPA peer)

ndkping = sys.argv[1]
for attempt in range(5):
    port = 20000 + (os.getpid() * 13 + attempt * 97) % 20000
    server = subprocess.Popen([ndkping, "--server", "-a", "127.0.0.1", "-p", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    if "listening" in server.stdout.readline():
        break
    server.wait()
else:
    sys.exit("the ndkping server did not start")
peer = hostile_peer.Peer(port)
peer.sock.sendall(hostile_peer.mpa_request(b""))
assert not peer.exact(20)[16] & 0x20, "the server rejected the client"


def cpu_seconds():
    fields = open(f"/proc/{server.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


time.sleep(0.5)
before = cpu_seconds()
time.sleep(3)
percent = (cpu_seconds() - before) / 3 * 100
peer.close()
output, _ = server.communicate(timeout=30)
print(f"ndkping --server with a silent client: {percent:.1f} % of a core; then: {output.strip().splitlines()[-1]}")
assert percent < 20, f"the server spends {percent:.0f} % of a core waiting for a silent client"
assert "the client went away" in output, output
