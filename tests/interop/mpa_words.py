#!/usr/bin/env python3
"""Issue 8 §3: the MPA negotiation in a capture (tshark 4.0 does not decode the RFC 6581 words). For each
connection prints one line:  request rev R [C] IRD i ORD o [P2P rtr=...] | reply ... | first FPDU: opcode, size
The first FPDU is the initiator's first after the Reply (the RTR when P2P: a zero-length Write or Read Request).
Usage: mpa_words.py CAPTURE.pcap"""
import struct
import sys


def segments(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    link = struct.unpack_from(endian + "I", data, 20)[0]
    at = 24
    while at + 16 <= len(data):
        _, _, caplen, _ = struct.unpack_from(endian + "IIII", data, at)
        packet = data[at + 16:at + 16 + caplen]
        at += 16 + caplen
        if link == 1:  # Ethernet
            packet = packet[14:]
        if not packet or packet[0] >> 4 != 4:
            continue
        ihl = (packet[0] & 15) * 4
        if packet[9] != 6:
            continue
        src, dst = packet[12:16], packet[16:20]
        tcp = packet[ihl:]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        payload = tcp[(tcp[12] >> 4) * 4:]
        yield (src, sport, dst, dport), seq, payload


def words(frame):
    flags, rev = frame[16], frame[17]
    pd_length = struct.unpack_from(">H", frame, 18)[0]
    text = "rev %d%s%s" % (rev, " C" if flags & 0x40 else "", " R" if flags & 0x20 else "")
    if flags & 0x10 and pd_length >= 4:
        ird, ord_ = struct.unpack_from(">HH", frame, 20)
        rtr = [n for n, bit in (("send", ird & 0x4000), ("write", ord_ & 0x8000), ("read", ord_ & 0x4000)) if bit]
        text += " IRD %d ORD %d" % (ird & 0x3FFF, ord_ & 0x3FFF)
        if ird & 0x8000:
            text += " P2P rtr=%s" % ("+".join(rtr) or "none")
    return text, 20 + pd_length


def main(path):
    streams = {}
    for key, seq, payload in segments(path):
        stream = streams.setdefault(key, {})
        if payload:
            stream.setdefault(seq, payload)
    joined = {}
    for key, pieces in streams.items():
        data, expect = b"", None
        for seq in sorted(pieces):
            if expect is None or seq == expect:
                data += pieces[seq]
                expect = seq + len(pieces[seq])
        joined[key] = data
    for key, data in joined.items():
        if not data.startswith(b"MPA ID Req Frame"):
            continue
        request, size = words(data)
        reply_key = (key[2], key[3], key[0], key[1])
        reply_data = joined.get(reply_key, b"")
        reply = words(reply_data)[0] if reply_data.startswith(b"MPA ID Rep Frame") else "none"
        first = "none"
        rest = data[size:]
        if len(rest) >= 4:
            ulpdu = struct.unpack_from(">H", rest, 0)[0]
            opcode = rest[3] & 15
            size_text = ""
            if opcode == 1 and len(rest) >= 2 + 34:  # Read Request: the message size at ULPDU offset 30
                size_text = " read size %d" % struct.unpack_from(">I", rest, 2 + 30)[0]
            first = "opcode 0x%02x ulpdu %d%s" % (opcode, ulpdu, size_text)
        print("port %d: request %s | reply %s | first FPDU %s" % (key[3], request, reply, first))


if __name__ == "__main__":
    main(sys.argv[1])
