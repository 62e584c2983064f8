#!/usr/bin/env python3
"""Issue 7 §6: SOFTNDK_TRACE writes a capture tshark decodes.

Runs ndkping between two processes over TCP loopback with CRC on, each process tracing to its own pcap, then
decodes both with tshark's iwarp_mpa / iwarp_ddp_rdmap dissectors and checks what they show:
  - the MPA Request and Reply, with the CRC flag, and a good CRC32 on every FPDU;
  - the opcodes each side sends, the MSNs of every untagged queue counting 1, 2, 3 … without a gap;
  - every Read Response is tagged with its Read Request's sink STag, and every Send with Invalidate names the
    token the client printed;
  - the two captures (one written by each end) show the same messages: the inbound trace equals the outbound one;
  - each side's FIN (ndkping disconnects gracefully).
The captures stay in OUTDIR for reading after a failure.
Usage: trace_ndkping.py NDKPING OUTDIR
"""
import os
import random
import re
import shutil
import subprocess
import sys
import time
from xml.etree import ElementTree

ndkping, outdir = sys.argv[1], sys.argv[2]
if shutil.which("tshark") is None:
    print("tshark is missing: scripts/install-deps.sh installs it")
    sys.exit(1)
os.makedirs(outdir, exist_ok=True)
port = str(random.randint(20000, 40000))
count = 8
server_pcap = os.path.join(outdir, "server.pcap")
client_pcap = os.path.join(outdir, "client.pcap")
environment = dict(os.environ, SOFTNDK_MPA_CRC="1")

server = subprocess.Popen([ndkping, "--server", "-a", "127.0.0.1", "-p", port],
                          env=dict(environment, SOFTNDK_TRACE=server_pcap),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
line = server.stdout.readline()
if "listening" not in line:
    print("server did not start:", line)
    sys.exit(1)
client = subprocess.run([ndkping, "--client", "-a", "127.0.0.1", "-p", port, "-c", str(count), "-s", "3000"],
                        env=dict(environment, SOFTNDK_TRACE=client_pcap), capture_output=True, text=True,
                        timeout=60)
server_out = server.communicate(timeout=30)[0]
print(client.stdout[-300:])
if client.returncode != 0 or server.returncode != 0:
    print("ndkping failed:", client.stdout, client.stderr, server_out)
    sys.exit(1)
tokens = [int(t, 16) for t in re.findall(r"invalidated (0x[0-9a-f]+)", client.stdout)]
assert len(tokens) == count, f"the client printed {len(tokens)} invalidated tokens"

PACKET_FIELDS = ["tcp.srcport", "tcp.flags.fin"]
MPA_FIELDS = ["iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.crc_flag", "iwarp_mpa.crc_check"]
FPDU_FIELDS = ["iwarp_rdma.opcode", "iwarp_ddp.qn", "iwarp_ddp.msn", "iwarp_ddp.stag", "iwarp_ddp.tagged_offset",
               "iwarp_rdma.sinkstag", "iwarp_rdma.inval_stag"]


def number(text):
    """tshark prints some fields in hex (0x…) and some in decimal."""
    return int(text, 0) if text.startswith("0x") else int(text)


def fields_of(element, names):
    found = {name: "" for name in names}
    for field in element.iter("field"):
        if field.get("name") in found and not found[field.get("name")]:
            found[field.get("name")] = field.get("show", "")
    return found


def decode(path):
    """One row per MPA frame and per FPDU, in stream order. PDML keeps each FPDU's fields apart, also when one
    TCP segment carries several FPDUs of different kinds, or an FPDU spans segments."""
    result = subprocess.run(["tshark", "-o", "tcp.try_heuristic_first:TRUE", "-r", path, "-o", "tcp.check_checksum:TRUE", "-T", "pdml"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr)
        sys.exit(1)
    detail = subprocess.run(["tshark", "-o", "tcp.try_heuristic_first:TRUE", "-r", path, "-O", "iwarp_mpa,iwarp_ddp_rdmap"], capture_output=True,
                            text=True).stdout
    with open(path + ".txt", "w") as summary:  # for reading without re-running
        summary.write(detail)
    rows = []
    for packet in ElementTree.fromstring(result.stdout).iter("packet"):
        protos = packet.findall("proto")
        tcp = next((p for p in protos if p.get("name") == "tcp"), None)
        base = fields_of(tcp, PACKET_FIELDS) if tcp is not None else dict.fromkeys(PACKET_FIELDS, "")
        empty = dict.fromkeys(MPA_FIELDS + FPDU_FIELDS, "")
        rows.append(dict(empty, **base))  # the segment itself (its FIN)
        for proto in protos:
            if proto.get("name") == "iwarp_mpa":
                mpa = fields_of(proto, MPA_FIELDS)
                if mpa["iwarp_mpa.key.req"] or mpa["iwarp_mpa.key.rep"]:
                    rows.append(dict(empty, **base, **mpa))
            elif proto.get("name") == "iwarp_ddp_rdmap":
                rows.append(dict(empty, **base, **fields_of(proto, FPDU_FIELDS)))
    return rows, detail


def check(path, client_port):
    rows, detail = decode(path)
    requests = [r for r in rows if r["iwarp_mpa.key.req"]]
    replies = [r for r in rows if r["iwarp_mpa.key.rep"]]
    assert len(requests) == 1 and len(replies) == 1, f"{path}: MPA Request/Reply not decoded"
    assert requests[0]["iwarp_mpa.crc_flag"] in ("1", "True"), f"{path}: the Request does not ask for CRC"
    fpdus = [r for r in rows if r["iwarp_rdma.opcode"]]
    good = detail.count("(Good CRC32)")
    assert fpdus and good == len(fpdus) and "Bad CRC32" not in detail, f"{path}: {good} good CRCs, {len(fpdus)} FPDUs"
    messages = []
    for direction in (client_port, "server"):
        sent = [r for r in fpdus if (r["tcp.srcport"] == client_port) == (direction == client_port)]
        opcodes = {number(r["iwarp_rdma.opcode"]) for r in sent}
        expected = {0x0, 0x1, 0x3, 0x4} if direction == client_port else {0x2, 0x3}
        assert expected <= opcodes, f"{path}: {direction} sent opcodes {sorted(opcodes)}, wanted {expected}"
        for qn in ("0", "1"):
            msns = [int(r["iwarp_ddp.msn"]) for r in sent if r["iwarp_ddp.qn"] == qn]
            assert msns == list(range(1, len(msns) + 1)), f"{path}: {direction} QN {qn} MSNs {msns}"
            assert msns or (qn == "1" and direction == "server"), f"{path}: {direction} sent nothing on QN {qn}"
        messages += [(direction, r["iwarp_rdma.opcode"], r["iwarp_ddp.qn"], r["iwarp_ddp.msn"],
                      r["iwarp_ddp.stag"], r["iwarp_ddp.tagged_offset"], r["iwarp_rdma.inval_stag"]) for r in sent]
    read_sinks = [number(r["iwarp_rdma.sinkstag"]) for r in fpdus if number(r["iwarp_rdma.opcode"]) == 0x1]
    responses = [number(r["iwarp_ddp.stag"]) for r in fpdus if number(r["iwarp_rdma.opcode"]) == 0x2]
    assert read_sinks == responses and len(read_sinks) == count, f"{path}: Read sinks {read_sinks} vs {responses}"
    invalidated = [number(r["iwarp_rdma.inval_stag"]) for r in fpdus if number(r["iwarp_rdma.opcode"]) == 0x4]
    assert invalidated == tokens, f"{path}: Send with Invalidate STags {invalidated}, ndkping printed {tokens}"
    fins = {r["tcp.srcport"] for r in rows if r["tcp.flags.fin"] in ("1", "True")}
    assert len(fins) == 2, f"{path}: FINs from {fins}"
    return messages


def client_port_of(path):
    first = subprocess.run(["tshark", "-o", "tcp.try_heuristic_first:TRUE", "-r", path, "-c", "1", "-T", "fields", "-e", "tcp.srcport"],
                           capture_output=True, text=True).stdout.strip()
    return first


client_port = client_port_of(client_pcap)
client_view = check(client_pcap, client_port)
server_view = check(server_pcap, client_port)
assert client_view == server_view, "the two ends' captures show different messages"
print(f"traces decoded by tshark: {len(client_view)} FPDUs, the same in both captures ({outdir})")
