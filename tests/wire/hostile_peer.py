#!/usr/bin/env python3
"""Issue 18 §4 and §5: hostile peers against `ndkperf --server`, written from the RFCs with raw sockets (no
softndk code). Every case checks four things:
  1. the server process lives;
  2. a fresh good client is still served (MPA handshake, a Send ping answered by a pong, an RDMA Read);
  3. the server's descriptors and resident memory stay bounded;
  4. where the peer earns a Terminate: its exact cause (layer, type, code), and that nothing was placed.
At the end a real `ndkperf --client` runs a short test and ends the server with its Quit; the server exits 0.
Usage: hostile_peer.py NDKPERF [CASE ...]   (no CASE: all of them)"""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = 0x4E444B50  # "NDKP", ndkperf's protocol (tools/ndkperf_protocol.hpp)
ROLE_TESTS, ROLE_EXTRA = 1, 2
KIND_START, KIND_DONE, KIND_QUIT = 1, 2, 4
TEST_PINGPONG = 4
STALL_MS = 1000  # the server's SOFTNDK_PEER_STALL_TIMEOUT_MS
DATA_BYTES = 16 << 20  # the server's --max-size: its RDMA data area
OPCODE_WRITE, OPCODE_READ_REQUEST, OPCODE_READ_RESPONSE, OPCODE_SEND, OPCODE_TERMINATE = 0, 1, 2, 3, 7

# ---- CRC32c (RFC 3385), for MPA FPDUs -------------------------------------------------------------------
_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# ---- frames (RFC 5044 MPA, RFC 5041 DDP, RFC 5040 RDMAP) -----------------------------------------------------
def mpa_request(private=b"", rev=1, crc=False, key=b"MPA ID Req Frame", pd_length=None):
    flags = 0x40 if crc else 0
    length = len(private) if pd_length is None else pd_length
    return key + bytes([flags, rev]) + struct.pack(">H", length) + private


def join(role=ROLE_TESTS):
    return struct.pack("<II", MAGIC, role)


def untagged(opcode, queue, msn, offset=0, rsvd_ulp=0, last=True):
    return bytes([0x41 if last else 0x01, 0x40 | opcode]) + struct.pack(">IIII", rsvd_ulp, queue, msn, offset)


def tagged(opcode, stag, to, last=True):
    return bytes([0xC1 if last else 0x81, 0x40 | opcode]) + struct.pack(">IQ", stag, to)


def read_request(msn, sink_stag, sink_to, size, source_stag, source_to):
    return untagged(OPCODE_READ_REQUEST, 1, msn) + struct.pack(">IQIIQ", sink_stag, sink_to, size, source_stag,
                                                                 source_to)


def control(kind, test=0, size=0):
    return struct.pack("<IIIIQQ", MAGIC, kind, 0, test, size, 0)


class Peer:
    """One raw TCP connection speaking MPA rev 1 (no markers), optionally with CRC."""

    def __init__(self, port, crc=False, receive_buffer=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.crc = crc
        self.msn = {0: 1, 1: 1}  # the next MSN per untagged queue
        self.hello = None
        self.pending = bytearray()  # received, not yet taken

    def handshake(self, private=None):
        self.sock.sendall(mpa_request(join() if private is None else private, crc=self.crc))
        header = self.exact(20)
        assert header[:16] == b"MPA ID Rep Frame", header
        assert not header[16] & 0x20, "the server rejected the connection"
        private = self.exact(struct.unpack(">H", header[18:20])[0])
        magic, token, address, size, receives, _ = struct.unpack("<IIQQII", private[:32])
        assert magic == MAGIC, private
        self.hello = {"token": token, "address": address, "bytes": size, "receives": receives}
        return self.hello

    def exact(self, count):
        while len(self.pending) < count:  # large reads: a Read Response of 16 MiB drains in well under a second
            got = self.sock.recv(1 << 20)
            if not got:
                raise ConnectionError("the server closed the stream")
            self.pending += got
        data = bytes(self.pending[:count])
        del self.pending[:count]
        return data

    def fpdu(self, ulpdu, bad_crc=False):
        body = struct.pack(">H", len(ulpdu)) + ulpdu
        body += b"\0" * (-len(body) % 4)
        crc = crc32c(body) if self.crc else 0
        if bad_crc:
            crc ^= 1
        return body + struct.pack("<I", crc)  # the CRC's low byte first, as siw sends it (siw-on-the-wire §3.5)

    def send(self, payload, queue=0):
        msn = self.msn[queue]
        self.msn[queue] += 1
        self.sock.sendall(self.fpdu(untagged(OPCODE_SEND, queue, msn) + payload))

    def write(self, stag, to, data, bad_crc=False):
        self.sock.sendall(self.fpdu(tagged(OPCODE_WRITE, stag, to) + data, bad_crc))

    def read(self, sink_to, size, stag, to):
        msn = self.msn[1]
        self.msn[1] += 1
        self.sock.sendall(self.fpdu(read_request(msn, 0x1234, sink_to, size, stag, to)))

    def next_fpdu(self):
        """(opcode, header fields, payload) of the next FPDU."""
        length = struct.unpack(">H", self.exact(2))[0]
        ulpdu = self.exact(length)
        self.exact((-(2 + length)) % 4 + 4)
        opcode = ulpdu[1] & 0x0F
        if ulpdu[0] & 0x80:
            stag, to = struct.unpack(">IQ", ulpdu[2:14])
            return opcode, {"stag": stag, "to": to}, ulpdu[14:]
        _, queue, msn, offset = struct.unpack(">IIII", ulpdu[2:18])
        return opcode, {"queue": queue, "msn": msn, "offset": offset}, ulpdu[18:]

    def terminate(self):
        """The cause (layer, type, code) and the header-copy flags of the Terminate the server sends."""
        while True:
            opcode, header, payload = self.next_fpdu()
            if opcode == OPCODE_TERMINATE:
                assert (header["queue"], header["msn"], header["offset"]) == (2, 1, 0), header
                return payload[0] >> 4, payload[0] & 0x0F, payload[1], payload[2]

    def read_back(self, to, size):
        """RDMA Read of the server's data area: the bytes its Read Response carries."""
        self.read(0x1000, size, self.hello["token"], to)
        data = b""
        while len(data) < size:
            opcode, header, payload = self.next_fpdu()
            if opcode == OPCODE_READ_RESPONSE:
                data += payload
        return data

    def ended(self, within):
        """True when the server ends the stream (FIN or reset) within `within` seconds; bytes before are skipped."""
        self.sock.settimeout(within)
        deadline = time.monotonic() + within
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False

    def close(self, reset=False):
        if reset:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


# ---- the server under test ------------------------------------------------------------------------------
class Server:
    def __init__(self, ndkperf):
        self.log = tempfile.NamedTemporaryFile(prefix="hostile-server-", suffix=".log", delete=False)
        env = dict(os.environ, SOFTNDK_PEER_STALL_TIMEOUT_MS=str(STALL_MS), SOFTNDK_MPA_REQUEST_TIMEOUT_MS="1000",
                   SOFTNDK_DISCONNECT_TIMEOUT_MS="5000", ASAN_OPTIONS="quarantine_size_mb=16:detect_leaks=1")
        for attempt in range(5):
            self.port = 20000 + (os.getpid() * 7 + attempt * 131) % 20000
            self.process = subprocess.Popen([ndkperf, "--server", "-a", "127.0.0.1", "-p", str(self.port),
                                             "--max-size", str(DATA_BYTES)], stdout=self.log, stderr=self.log, env=env)
            for _ in range(300):
                if "listening" in self.text() or self.process.poll() is not None:
                    break
                time.sleep(0.05)
            if "listening" in self.text():
                return
            self.process.wait()
        raise RuntimeError("the server did not start: " + self.text())

    def text(self, since=0):
        with open(self.log.name) as log:
            return log.read()[since:]

    def mark(self):
        return len(self.text())

    def wait_for(self, words, since, seconds=10.0):
        deadline = time.monotonic() + seconds
        while words not in self.text(since) and time.monotonic() < deadline:
            time.sleep(0.05)
        return words in self.text(since)

    def fds(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def good_client(server):
    """A fresh client is served: handshake, ping answered by a pong, a Write placed and read back."""
    peer = Peer(server.port)
    hello = peer.handshake()
    peer.send(control(KIND_START, TEST_PINGPONG, 64))
    peer.send(b"\x11" * 64)
    opcode, _, payload = peer.next_fpdu()
    assert opcode == OPCODE_SEND and len(payload) == 64, (opcode, len(payload))
    pattern = os.urandom(16)
    peer.write(hello["token"], hello["address"], pattern)
    assert peer.read_back(hello["address"], 16) == pattern, "a good client's Write was not placed"
    peer.close()


# ---- the cases ------------------------------------------------------------------------------------------
LLP, DDP, RDMAP = 2, 1, 0


def expect_closed(server, frame, within=3.0):
    peer = Peer(server.port)
    peer.sock.sendall(frame)
    assert peer.ended(within), "the server kept a malformed MPA Request open"
    peer.close()


def case_mpa_bad_key(server):
    expect_closed(server, mpa_request(join(), key=b"MPA ID Bad Frame"))


def case_mpa_revision_3(server):
    expect_closed(server, mpa_request(join(), rev=3))


def case_mpa_private_data_too_long(server):
    expect_closed(server, mpa_request(b"\0" * 600))


def case_mpa_truncated(server):
    expect_closed(server, mpa_request(join())[:11], within=3.0)  # the Request timeout (1 s) closes it


def case_mpa_not_an_ndkperf_client(server):
    mark = server.mark()
    peer = Peer(server.port)
    peer.sock.sendall(mpa_request(b"hello"))
    header = peer.exact(20)
    assert header[16] & 0x20, "a peer without ndkperf's Join was not rejected"
    peer.close()
    assert server.wait_for("not an ndkperf client", mark), "the refusal is not reported"


def case_flood(server):
    """Silent, half-Request and at-once-closed connections, 200 of each, held together."""
    held = []
    for i in range(200):
        held.append(socket.create_connection(("127.0.0.1", server.port)))
        half = socket.create_connection(("127.0.0.1", server.port))
        half.sendall(mpa_request(join())[:15])
        held.append(half)
        socket.create_connection(("127.0.0.1", server.port)).close()
    good_client(server)  # served while the flood is held
    for sock in held:
        sock.close()


def case_stall_inside_fpdu(server):
    peer = Peer(server.port)
    hello = peer.handshake()
    frame = peer.fpdu(tagged(OPCODE_WRITE, hello["token"], hello["address"]) + b"\xEE" * 1000)
    peer.sock.sendall(frame[:-100])  # the last 100 bytes never come
    start = time.monotonic()
    assert peer.ended(STALL_MS / 1000 * 1.25 + 2), "a peer stalled inside an FPDU was not cut off"
    took = time.monotonic() - start
    assert took >= STALL_MS / 1000 * 0.9, f"cut off after {took:.2f} s, before the stall timeout"
    peer.close()


def case_stops_reading_pongs(server):
    """§4: a client that pings and never reads its pongs is dropped; nobody else notices."""
    peer = Peer(server.port, receive_buffer=4096)
    peer.handshake()
    mark = server.mark()
    port = peer.sock.getsockname()[1]
    peer.send(control(KIND_START, TEST_PINGPONG, 0))
    ping = b"\x22" * 60000
    peer.sock.settimeout(5)
    try:
        # The server reposts each ping's receive at once, so every ping is legal; its pongs pile up until more
        # than its send queue (272) wait for a client that reads nothing.
        for _ in range(1000):
            peer.send(ping)
    except (socket.timeout, ConnectionError):
        pass  # the server stopped taking our pings: the pongs back up
    assert server.wait_for(f"dropped client 127.0.0.1:{port}: NdkSend failed: STATUS_INSUFFICIENT_RESOURCES (0xC000009A)", mark), \
        "a client that does not read its pongs was not dropped for its refused pong (STATUS_INSUFFICIENT_RESOURCES)"
    peer.close()


def case_reset_mid_fpdu(server):
    peer = Peer(server.port)
    hello = peer.handshake()
    peer.sock.sendall(peer.fpdu(tagged(OPCODE_WRITE, hello["token"], hello["address"]) + b"\xEE" * 1000)[:500])
    time.sleep(0.1)
    peer.close(reset=True)


def case_terminate_with_odd_fields(server):
    peer = Peer(server.port)
    peer.handshake()
    body = bytes([(DDP << 4) | 2, 0x02, 0, 0])  # "DDP untagged: no buffer", no header copy
    peer.sock.sendall(peer.fpdu(untagged(OPCODE_TERMINATE, 2, 7) + body))  # MSN 7: one Terminate has MSN 1
    layer, etype, code, _ = peer.terminate()
    assert (layer, etype, code) == (DDP, 2, 0x03), ("expected DDP untagged invalid MSN", layer, etype, code)
    peer.close()


def case_bad_crc(server):
    peer = Peer(server.port, crc=True)
    hello = peer.handshake()
    end = hello["address"] + hello["bytes"] - 64
    peer.write(hello["token"], end, b"\x5A" * 64)
    assert peer.read_back(end, 64) == b"\x5A" * 64
    peer.write(hello["token"], end, b"\xEE" * 64, bad_crc=True)
    layer, etype, code, flags = peer.terminate()
    assert (layer, etype, code) == (LLP, 0, 0x02), ("expected LLP CRC error", layer, etype, code)
    assert not flags & 0x40, "an FPDU that failed its CRC is not copied back"
    peer.close()
    checker = Peer(server.port)
    checker.handshake()
    assert checker.read_back(end, 64) == b"\x5A" * 64, "an FPDU with a bad CRC was placed"
    checker.close()


def case_write_beyond_the_region(server):
    peer = Peer(server.port)
    hello = peer.handshake()
    end = hello["address"] + hello["bytes"]
    peer.write(hello["token"], end - 16, b"\x5A" * 16)
    assert peer.read_back(end - 16, 16) == b"\x5A" * 16
    peer.write(hello["token"], end - 16, b"\xEE" * 64)  # 48 bytes beyond the end
    layer, etype, code, _ = peer.terminate()
    assert (layer, etype, code) == (DDP, 1, 0x01), ("expected DDP tagged base or bounds", layer, etype, code)
    peer.close()
    checker = Peer(server.port)
    checker.handshake()
    assert checker.read_back(end - 16, 16) == b"\x5A" * 16, "a Write beyond the region placed its first bytes"
    checker.close()


def case_write_with_an_unknown_stag(server):
    peer = Peer(server.port)
    hello = peer.handshake()
    peer.write(hello["token"] ^ 0x5500, hello["address"], b"\xEE" * 64)
    layer, etype, code, _ = peer.terminate()
    assert (layer, etype, code) == (DDP, 1, 0x00), ("expected DDP tagged invalid STag", layer, etype, code)
    peer.close()


def case_read_with_a_giant_length(server):
    peer = Peer(server.port)
    hello = peer.handshake()
    peer.read(0x1000, 0xFFFFFFFF, hello["token"], hello["address"])
    layer, etype, code, _ = peer.terminate()
    assert (layer, etype, code) == (RDMAP, 1, 0x01), ("expected RDMAP base or bounds", layer, etype, code)
    peer.close()


def case_reads_beyond_ird(server):
    """A rev 1 peer has IRD 1 (RFC 6581 is not negotiated): a second Read while the first is answered."""
    peer = Peer(server.port, receive_buffer=4096)
    hello = peer.handshake()
    peer.read(0x1000, hello["bytes"], hello["token"], hello["address"])
    time.sleep(0.1)  # the first Response fills the socket
    peer.read(0x1000, 64, hello["token"], hello["address"])
    layer, etype, code, _ = peer.terminate()
    assert (layer, etype, code) == (RDMAP, 2, 0x07), ("expected RDMAP remote stream catastrophic", layer, etype, code)
    peer.close()


def case_sends_on_an_extra_connection(server):
    peer = Peer(server.port)
    peer.handshake(join(ROLE_EXTRA))
    peer.send(control(KIND_START, TEST_PINGPONG, 64))
    assert peer.ended(5), "a Send on a connection that carries no tests was not dropped"
    peer.close()


def case_leaves_before_accept(server):
    """The peer closes right after its Request: the accept fails and its socket is not leaked."""
    mark = server.mark()
    for _ in range(30):  # below the server's 32 clients at once: none is refused for want of room
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(mpa_request(join()))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    # Each one is over once the server reports it (until then it holds its tests slots); each failed accept
    # closes its socket: the count comes back.
    ends = ("NdkAccept failed", "refused", "left without a Quit", "dropped client")
    deadline = time.monotonic() + 10
    while sum(server.text(mark).count(end) for end in ends) < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    reported = sum(server.text(mark).count(end) for end in ends)
    assert reported >= 30, f"the server reported the end of {reported} of 30 connections that left"
    fds = settle(server, server.base_fds + 2)
    assert fds <= server.base_fds + 2, f"{fds} descriptors after 30 failed accepts, {server.base_fds} before"


def case_quit_is_not_needed(server):
    """A client that leaves without a Quit loses its connection; the server says so and goes on."""
    peer = Peer(server.port)
    peer.handshake()
    mark = server.mark()
    port = peer.sock.getsockname()[1]
    peer.close()
    assert server.wait_for(f"client 127.0.0.1:{port} left without a Quit", mark), "the departure is not reported"


CASES = [name for name in dir() if name.startswith("case_")]


def settle(server, fds_limit, seconds=5.0):
    deadline = time.monotonic() + seconds
    while server.fds() > fds_limit and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.fds()


def main():
    ndkperf = sys.argv[1]
    chosen = ["case_" + name for name in sys.argv[2:]] or sorted(CASES)
    server = Server(ndkperf)
    failures = []
    passed = 0
    try:
        good_client(server)
        base_fds = server.base_fds = settle(server, 0, 1.0)
        base_rss = server.rss_kib()
        for name in chosen:
            start = time.monotonic()
            try:
                globals()[name](server)
                assert server.process.poll() is None, f"the server died (exit {server.process.returncode})"
                good_client(server)
                fds = settle(server, base_fds + 2)
                assert fds <= base_fds + 2, f"{fds} descriptors, {base_fds} before the cases"
                rss = server.rss_kib()
                assert rss <= base_rss + 128 * 1024, f"resident {rss} KiB, {base_rss} KiB before the cases"
                passed += 1
                print(f"ok   {name[5:]} ({time.monotonic() - start:.1f} s; {fds} fds, {rss // 1024} MiB resident)")
            except Exception as error:  # noqa: BLE001 - every case reports, the suite goes on
                print(f"FAIL {name[5:]}: {error!r}")
                failures.append(name)
                if server.process.poll() is not None:
                    print(f"the server is gone (exit {server.process.returncode}): the cases after {name[5:]} are not run")
                    break
        if server.process.poll() is None:  # a real client, whose Quit ends the server
            client = subprocess.run([ndkperf, "--client", "-a", "127.0.0.1", "-p", str(server.port), "--test",
                                     "write", "--sizes", "4096", "--seconds", "0.05", "--latency-sizes", "64"],
                                    capture_output=True, text=True, timeout=60)
            if client.returncode != 0:
                failures.append("ndkperf --client")
                print("FAIL ndkperf --client after the cases:", client.stdout, client.stderr)
            try:
                code = server.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = "still running"
            if code != 0:
                failures.append("server exit")
                print(f"FAIL the server's exit after the Quit: {code}")
    finally:
        if server.process.poll() is None:
            server.process.kill()
        if failures:
            print("---- the server's log (last 40 lines)")
            print("\n".join(server.text().splitlines()[-40:]))
        os.unlink(server.log.name)
    print(f"{passed}/{len(chosen)} hostile-peer cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
