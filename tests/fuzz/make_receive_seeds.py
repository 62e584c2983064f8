#!/usr/bin/env python3
"""Seeds for fuzz_receive: FPDU streams (CRC off) using the harness's placeholders; with a second directory also
for fuzz_connection: [2-byte length][an MPA Request][the FPDU stream], rev 2 (IRD/ORD 2) and rev 1 Requests, and
a few broken ones.

DE AD BE EF stands for the MR's remote token, 0B AD C0 DE 0B AD C0 DE for its base address.
Usage: make_receive_seeds.py OUTPUT_DIR [CONNECTION_OUTPUT_DIR]
"""
import os
import struct
import sys

TOKEN = bytes.fromhex("DEADBEEF")
BASE = bytes.fromhex("0BADC0DE0BADC0DE")


def fpdu(ulpdu: bytes) -> bytes:
    pad = (-(2 + len(ulpdu))) % 4
    return struct.pack(">H", len(ulpdu)) + ulpdu + b"\0" * pad + b"\0" * 4  # zero CRC: CRC is off


def untagged(opcode: int, qn: int, msn: int, mo: int = 0, last: bool = True) -> bytes:
    return bytes([0x41 if last else 0x01, 0x40 | opcode]) + b"\0" * 4 + struct.pack(">III", qn, msn, mo)


write = fpdu(bytes([0xC1, 0x40]) + TOKEN + BASE + bytes(range(64)))
write_first = fpdu(bytes([0x81, 0x40]) + TOKEN + BASE + bytes(range(32)))  # L clear: more follows
send = fpdu(untagged(3, 0, 1) + b"hello softndk send" * 2)
send2 = fpdu(untagged(3, 0, 2) + b"second")
read_request = fpdu(untagged(1, 1, 1) + struct.pack(">I", 0x1234) + b"\0" * 8 + struct.pack(">I", 64) + TOKEN + BASE)
terminate = fpdu(untagged(7, 2, 1) + bytes([0x12, 0x03, 0x00, 0x00]))
seeds = {
    "write": write,
    "send": send,
    "read": read_request,
    "mixed": write + send + read_request + send2,
    "terminate": send + terminate,
    "interleaved": write_first + send + write,
}
os.makedirs(sys.argv[1], exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(sys.argv[1], name), "wb") as out:
        out.write(data)

if len(sys.argv) > 2:
    key = b"MPA ID Req Frame"
    requests = {
        "rev2": key + bytes([0x10, 2]) + struct.pack(">HHH", 4, 2, 2),
        "rev2crc": key + bytes([0x50, 2]) + struct.pack(">HHH", 4, 2, 2),
        "rev1": key + bytes([0x00, 1]) + struct.pack(">H", 5) + b"hello",
        "rev2rtr": key + bytes([0x10, 2]) + struct.pack(">HHH", 4, 0x8002, 0x8002),
    }
    os.makedirs(sys.argv[2], exist_ok=True)
    for request_name, request in requests.items():
        for name, data in seeds.items():
            with open(os.path.join(sys.argv[2], f"{request_name}-{name}"), "wb") as out:
                out.write(struct.pack(">H", len(request)) + request + data)
    for name, data in {"truncated": requests["rev2"][:12], "huge-pd": key + bytes([0x10, 2, 0xFF, 0xFF]),
                       "bytes-behind": requests["rev2"] + seeds["send"]}.items():
        with open(os.path.join(sys.argv[2], name), "wb") as out:
            out.write(struct.pack(">H", len(data)) + data)

if len(sys.argv) > 3:
    # fuzz_stream_events: [step, argument] pairs (the step numbers of fuzz_stream_events.cpp's Step enum).
    (POST_SEND, POST_WRITE, POST_READ, POST_RECEIVE, RING, PEER_SEND, PEER_WRITE, PEER_READ_REQUEST, PEER_TERMINATE,
     PEER_GARBAGE, PEER_READ, PEER_FIN, PEER_RESET, DISCONNECT, CLOSE_CONNECTOR, WAIT) = range(16)
    DEFER = 1
    streams = {
        "posts-then-disconnect": [POST_RECEIVE, 8, POST_SEND, 8, POST_WRITE, 16, PEER_READ, 0, DISCONNECT, 0,
                                  PEER_FIN, 0, WAIT, 20],
        "deferred-read-past-stall": [POST_READ, 8 | DEFER, WAIT, 63, WAIT, 63, RING, 8, PEER_READ, 0],
        "peer-terminates": [POST_SEND, 8, PEER_TERMINATE, 0, POST_WRITE, 8, WAIT, 5],
        "bad-token-write": [POST_RECEIVE, 4, PEER_WRITE, 9, POST_SEND, 4, DISCONNECT, 0, WAIT, 10],
        "reset-mid-burst": [POST_WRITE, 200 | DEFER, POST_WRITE, 200 | DEFER, PEER_RESET, 0, RING, 8, WAIT, 10],
        "read-requests": [PEER_READ_REQUEST, 16, PEER_READ_REQUEST, 32, PEER_READ, 0, WAIT, 5, PEER_READ, 0],
        "close-with-everything-open": [POST_RECEIVE, 4, POST_READ, 8, POST_WRITE, 200 | DEFER, CLOSE_CONNECTOR, 0,
                                       POST_SEND, 4],
        "garbage": [PEER_GARBAGE, 7, POST_SEND, 8, WAIT, 10],
        "both-fin": [PEER_FIN, 0, DISCONNECT, 0, WAIT, 30, POST_SEND, 2],
    }
    os.makedirs(sys.argv[3], exist_ok=True)
    for name, steps in streams.items():
        with open(os.path.join(sys.argv[3], name), "wb") as out:
            out.write(bytes(steps))
