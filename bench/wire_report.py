#!/usr/bin/env python3
"""Issue 7 §8: the table and the plot of scripts/bench-wire.sh's run.

Usage: wire_report.py OUTDIR PNG
Reads OUTDIR/ndkperf.json, ndkperf-connections.json, iperf3-SIZE.json, fi_pingpong-SIZE.txt, tcp_pingpong.json;
prints a Markdown report (tables and the targets, each as a ratio against its baseline of the same run) and draws
bandwidth against message size into PNG with gnuplot.
"""
import glob
import json
import os
import re
import subprocess
import sys

out, png = sys.argv[1], sys.argv[2]


def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


def size_name(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


ndk = load("ndkperf.json")
bandwidth = {(r["test"], r["size"]): r["gbits_per_s"] for r in ndk["results"]}
sizes = sorted({r["size"] for r in ndk["results"]})
iperf = {}
for path in glob.glob(os.path.join(out, "iperf3-*.json")):
    size = int(re.search(r"iperf3-(\d+)\.json", path).group(1))
    with open(path) as f:
        iperf[size] = json.load(f)["end"]["sum_received"]["bits_per_second"] / 1e9
fabric = {}
for path in glob.glob(os.path.join(out, "fi_pingpong-*.txt")):
    size = int(re.search(r"fi_pingpong-(\d+)\.txt", path).group(1))
    with open(path) as f:
        rows = [line.split() for line in f if re.match(r"^\s*\d+[kmg]?\s", line)]
    if rows:  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
        fabric[size] = {"mbytes": float(rows[-1][5]), "usec": float(rows[-1][6])}
rma = {}
rma_path = os.path.join(out, "fi_rma_write_bw.jsonl")
if os.path.exists(rma_path):
    with open(rma_path) as f:
        rma = {r["size"]: r["gbits_per_s"] for r in map(json.loads, f)}
raw = load("tcp_pingpong.json")
scale = load("ndkperf-connections.json").get("connections", {})

print("| size | write Gb/s | read Gb/s | send Gb/s | iperf3 Gb/s | write / iperf3 | libfabric tcp RMA write Gb/s "
      "| write / libfabric |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for size in sizes:
    w, r, s = (bandwidth.get((t, size), 0) for t in ("write", "read", "send"))
    base = iperf.get(size, 0)
    fab = rma.get(size, 0)
    print(f"| {size_name(size)} | {w:.2f} | {r:.2f} | {s:.2f} | {base:.2f} | {w / base if base else 0:.2f}× | "
          f"{fab:.2f} | {w / fab if fab else 0:.2f}× |")
print()
if fabric:
    print("| size | libfabric tcp fi_pingpong MB/s | its one-way µs |")
    print("| ---: | ---: | ---: |")
    for size in sorted(fabric):
        print(f"| {size_name(size)} | {fabric[size]['mbytes']:.1f} | {fabric[size]['usec']:.1f} |")
    print()
latency = next(l for l in ndk["latency"] if l["size"] == 64)
print(f"- 64 B one-way (Send ping-pong): ndkperf p50 {latency['one_way_p50_ns'] / 1e3:.1f} µs, raw TCP busy-poll "
      f"p50 {raw['one_way_p50_ns'] / 1e3:.1f} µs: {latency['one_way_p50_ns'] / raw['one_way_p50_ns']:.2f}× "
      f"(target ≤ 1.5×)")
busy0 = load("ndkperf-busy0.json")["latency"][0]
print(f"- the same with the progress threads' busy-poll window off (SOFTNDK_BUSY_POLL_US=0): p50 "
      f"{busy0['one_way_p50_ns'] / 1e3:.1f} µs: {busy0['one_way_p50_ns'] / raw['one_way_p50_ns']:.2f}× raw TCP")
if 1048576 in iperf:
    w = bandwidth.get(("write", 1048576), 0)
    print(f"- 1 MiB write: {w:.2f} Gb/s = {w / iperf[1048576]:.2f}× iperf3 (target ≥ 0.9×)", end="")
    if 1048576 in rma:
        print(f", {w / rma[1048576]:.2f}× libfabric tcp RMA write (target ≥ 1.0×)")
    else:
        print()
if 64 in fabric:
    print(f"- libfabric tcp fi_pingpong 64 B one-way: {fabric[64]['usec']:.1f} µs")
if "idle_cpu_percent" in ndk:
    print(f"- idle adapter with one connection open: {ndk['idle_cpu_percent']:.3f} % of a core (target < 1 %)")
if scale:
    print(f"- {scale['count']} connections between two processes: {scale['setup_us_per_connection']:.0f} µs each to "
          f"set up (one after another); {scale['client_kib_per_connection']:.1f} KiB per connection on the client, "
          f"{scale['server_kib_per_connection']:.1f} KiB on the server (resident memory)")

rounds = sorted(glob.glob(os.path.join(out, "round-*-ndkperf.json")))
if rounds:
    def median(values):
        values = sorted(values)
        return values[len(values) // 2]

    def each(pattern, read):
        return [read(path) for path in sorted(glob.glob(os.path.join(out, pattern)))]

    def jsonl(path):
        with open(path) as f:
            return json.loads(f.readline())

    ndk_write = each("round-*-ndkperf.json",
                     lambda p: next(r["gbits_per_s"] for r in load(os.path.basename(p))["results"] if r["test"] == "write"))
    ndk_latency = each("round-*-ndkperf.json", lambda p: load(os.path.basename(p))["latency"][0]["one_way_p50_ns"])
    iperf_write = each("round-*-iperf3.json",
                       lambda p: load(os.path.basename(p))["end"]["sum_received"]["bits_per_second"] / 1e9)
    fabric_write = each("round-*-fi_rma_write_bw.jsonl", lambda p: jsonl(p)["gbits_per_s"])
    raw_latency = each("round-*-tcp_pingpong.json", lambda p: load(os.path.basename(p))["one_way_p50_ns"])

    def spread(values, unit, scale=1.0):
        return ", ".join(f"{v * scale:.1f}" for v in values) + f" {unit}"

    print()
    print(f"Medians of {len(rounds)} interleaved rounds (each value: one run of 1 s):")
    print(f"- 1 MiB write: ndkperf {median(ndk_write):.1f} Gb/s ({spread(ndk_write, 'Gb/s')}), iperf3 "
          f"{median(iperf_write):.1f} ({spread(iperf_write, 'Gb/s')}), libfabric tcp RMA write "
          f"{median(fabric_write):.1f} ({spread(fabric_write, 'Gb/s')}): "
          f"{median(ndk_write) / median(iperf_write):.2f}× iperf3 (target ≥ 0.9×), "
          f"{median(ndk_write) / median(fabric_write):.2f}× libfabric (target ≥ 1.0×)")
    print(f"- 64 B one-way: ndkperf {median(ndk_latency) / 1e3:.1f} µs ({spread(ndk_latency, 'µs', 1e-3)}), raw TCP "
          f"busy-poll {median(raw_latency) / 1e3:.1f} µs ({spread(raw_latency, 'µs', 1e-3)}): "
          f"{median(ndk_latency) / median(raw_latency):.2f}× (target ≤ 1.5×)")

data = os.path.join(out, "bandwidth.dat")
with open(data, "w") as f:
    for size in sizes:
        f.write(f"{size} {bandwidth.get(('write', size), 0)} {bandwidth.get(('read', size), 0)} "
                f"{bandwidth.get(('send', size), 0)} {iperf.get(size, 0)}\n")
script = f"""
set terminal pngcairo size 900,540 noenhanced
set output '{png}'
set title 'softndk iWARP/TCP between two processes (loopback) vs iperf3, one run'
set logscale x 2
set xtics ({", ".join(f'"{size_name(size)}" {size}' for size in sizes)})
set xlabel 'message size (bytes)'
set ylabel 'Gb/s'
set key top left
set grid
plot '{data}' using 1:2 with linespoints title 'ndkperf write', \\
     '{data}' using 1:3 with linespoints title 'ndkperf read', \\
     '{data}' using 1:4 with linespoints title 'ndkperf send', \\
     '{data}' using 1:5 with linespoints dashtype 2 title 'iperf3 (one stream, -l size)'
"""
result = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
if result.returncode != 0:
    print("gnuplot failed:", result.stderr, file=sys.stderr)
    sys.exit(1)
