#!/usr/bin/env python3
"""The table, the targets and the plot of scripts/bench-wire.sh's run (issue 7 §8, issue 20 §4).

Usage: wire_report.py OUTDIR PNG [QPS_PNG]
Reads OUTDIR/round-N-{ndkperf.json, iperf3-SIZE.json, fi_rma_write_bw.jsonl, tcp_pingpong.json} and the single
runs ndkperf-idle.json, ndkperf-busy0.json, ndkperf-connections.json, fi_pingpong-SIZE.txt. Every figure is the
median of the rounds, so the table, the targets and the plot agree; prints Markdown and draws bandwidth against
message size into PNG with gnuplot (ndkperf write/read/send, iperf3 and libfabric's tcp RMA write). Issue 21:
pinned-ndkperf.json and pinned-fi_rma_write_bw.jsonl (each process on one core), qps-ROUND-N-{ndkperf,iperf3}.json
(ndkperf -q N against iperf3 -P N); QPS_PNG plots aggregate bandwidth against N.
"""
import glob
import json
import os
import re
import statistics
import sys

from wire_plots import plot_bandwidth, plot_qps, size_name

out, png = sys.argv[1], sys.argv[2]
qps_png = sys.argv[3] if len(sys.argv) > 3 else None


def load(path):
    with open(path) as f:
        return json.load(f)


def rounds_of(pattern):
    return sorted(glob.glob(os.path.join(out, pattern)))


def median(values):
    return statistics.median(values) if values else 0.0


ndk_runs = [load(p) for p in rounds_of("round-*-ndkperf.json")]
if not ndk_runs:
    sys.exit("wire_report: no round-*-ndkperf.json in " + out)
rounds = len(ndk_runs)
bandwidth = {}  # (test, size) -> [Gb/s per round]
for run in ndk_runs:
    for r in run["results"]:
        bandwidth.setdefault((r["test"], r["size"]), []).append(r["gbits_per_s"])
sizes = sorted({size for _, size in bandwidth})
ndk_latency = [run["latency"][0]["one_way_p50_ns"] for run in ndk_runs]
iperf = {}
for path in rounds_of("round-*-iperf3-*.json"):
    size = int(re.search(r"iperf3-(\d+)\.json", path).group(1))
    iperf.setdefault(size, []).append(load(path)["end"]["sum_received"]["bits_per_second"] / 1e9)
rma = {}
for path in rounds_of("round-*-fi_rma_write_bw.jsonl"):
    with open(path) as f:
        for row in map(json.loads, f):
            rma.setdefault(row["size"], []).append(row["gbits_per_s"])
raw_latency = [load(p)["one_way_p50_ns"] for p in rounds_of("round-*-tcp_pingpong.json")]
fabric = {}
for path in glob.glob(os.path.join(out, "fi_pingpong-*.txt")):
    size = int(re.search(r"fi_pingpong-(\d+)\.txt", path).group(1))
    with open(path) as f:
        rows = [line.split() for line in f if re.match(r"^\s*\d+[kmg]?\s", line)]
    if rows:  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
        fabric[size] = {"mbytes": float(rows[-1][5]), "usec": float(rows[-1][6])}


def cell(test, size):
    return median(bandwidth.get((test, size), []))


print(f"Medians of {rounds} interleaved rounds; Gb/s.")
print()
print("| size | write | read | send | iperf3 | write / iperf3 | libfabric tcp RMA write | write / libfabric |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for size in sizes:
    w, r, s = (cell(t, size) for t in ("write", "read", "send"))
    base, fab = median(iperf.get(size, [])), median(rma.get(size, []))
    print(f"| {size_name(size)} | {w:.2f} | {r:.2f} | {s:.2f} | {base:.2f} | {w / base if base else 0:.2f}× | "
          f"{fab:.2f} | {w / fab if fab else 0:.2f}× |")
print()


# Issue 21: Write, Read and Send each ≥ 1.0× libfabric's RMA write at every size.
below = []
lowest = {}
for test in ("write", "read", "send"):
    for size in sizes:
        fab = median(rma.get(size, []))
        if not fab or not bandwidth.get((test, size)):
            continue
        ratio = cell(test, size) / fab
        if test not in lowest or ratio < lowest[test][0]:
            lowest[test] = (ratio, size)
        if ratio < 1.0:
            below.append(f"{test} {size_name(size)} {ratio:.2f}×")
if lowest:
    print("- Write, Read and Send against libfabric's tcp RMA write, every size (issue 21: ≥ 1.0×): lowest "
          + ", ".join(f"{test} {ratio:.2f}× at {size_name(size)}" for test, (ratio, size) in lowest.items())
          + ("; below 1.0×: " + ", ".join(below) if below else "; none below 1.0×"))


def spread(values, unit, scale=1.0):
    return ", ".join(f"{v * scale:.1f}" for v in values) + f" {unit}"


write_1m = bandwidth.get(("write", 1048576), [])
if write_1m and 1048576 in iperf and 1048576 in rma:
    print(f"- 1 MiB write: ndkperf {median(write_1m):.1f} Gb/s ({spread(write_1m, 'Gb/s')}), iperf3 "
          f"{median(iperf[1048576]):.1f} ({spread(iperf[1048576], 'Gb/s')}), libfabric tcp RMA write "
          f"{median(rma[1048576]):.1f} ({spread(rma[1048576], 'Gb/s')}): "
          f"{median(write_1m) / median(iperf[1048576]):.2f}× iperf3 (target ≥ 0.9×), "
          f"{median(write_1m) / median(rma[1048576]):.2f}× libfabric (target ≥ 1.0×)")
rate_64 = [r["million_ops_per_s"] for run in ndk_runs for r in run["results"] if r["test"] == "write" and r["size"] == 64]
if rate_64 and 64 in rma:
    fabric_rates = [g * 1e9 / (64 * 8) / 1e6 for g in rma[64]]
    print(f"- 64 B write message rate, one QP, window 16 posted in NDK_OP_FLAG_DEFER bursts (one doorbell per "
          f"burst): {median(rate_64):.2f} M/s ({spread(rate_64, 'M/s')}); libfabric tcp RMA write, window 16: "
          f"{median(fabric_rates):.2f} M/s (target ≥ 2 M/s)")
print(f"- 64 B one-way (Send ping-pong p50): ndkperf {median(ndk_latency) / 1e3:.1f} µs "
      f"({spread(ndk_latency, 'µs', 1e-3)}), raw TCP busy-poll {median(raw_latency) / 1e3:.1f} µs "
      f"({spread(raw_latency, 'µs', 1e-3)}): {median(ndk_latency) / median(raw_latency):.2f}× (issue 21's target ≤ 1.3×)")
busy0_path = os.path.join(out, "ndkperf-busy0.json")
if os.path.exists(busy0_path):
    busy0 = load(busy0_path)["latency"][0]["one_way_p50_ns"]
    print(f"- the same with the progress threads' busy-poll window off (SOFTNDK_BUSY_POLL_US=0, one run): "
          f"{busy0 / 1e3:.1f} µs: {busy0 / median(raw_latency):.2f}× raw TCP")
if fabric:
    print("- libfabric tcp fi_pingpong (one run): " + ", ".join(
        f"{size_name(size)} {fabric[size]['usec']:.1f} µs one-way" for size in sorted(fabric)))
idle_path = os.path.join(out, "ndkperf-idle.json")
if os.path.exists(idle_path) and "idle_cpu_percent" in load(idle_path):
    print(f"- idle adapter with one connection open: {load(idle_path)['idle_cpu_percent']:.3f} % of a core "
          f"(target < 1 %)")
scale_path = os.path.join(out, "ndkperf-connections.json")
scale = load(scale_path).get("connections", {}) if os.path.exists(scale_path) else {}
if scale:
    print(f"- {scale['count']} connections between two processes: {scale['setup_us_per_connection']:.0f} µs each to "
          f"set up (one after another); {scale['client_kib_per_connection']:.1f} KiB per connection on the client, "
          f"{scale['server_kib_per_connection']:.1f} KiB on the server (resident memory)")

pinned_path = os.path.join(out, "pinned-ndkperf.json")
pinned_fabric_path = os.path.join(out, "pinned-fi_rma_write_bw.jsonl")
if os.path.exists(pinned_path):
    pinned = {(r["test"], r["size"]): r["gbits_per_s"] for r in load(pinned_path)["results"]}
    pinned_fabric = {}
    if os.path.exists(pinned_fabric_path):
        with open(pinned_fabric_path) as f:
            pinned_fabric = {row["size"]: row["gbits_per_s"] for row in map(json.loads, f)}
    print()
    print("Each process pinned to one core (taskset; one run): Gb/s, and unpinned beside it (the medians above).")
    print()
    print("| size | write pinned | read pinned | send pinned | libfabric pinned | write / libfabric, pinned | "
          "write unpinned | write / libfabric, unpinned |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sorted({size for _, size in pinned}):
        w, r, s_ = (pinned.get((t, size), 0) for t in ("write", "read", "send"))
        fab = pinned_fabric.get(size, 0)
        free, free_fab = cell("write", size), median(rma.get(size, []))
        print(f"| {size_name(size)} | {w:.2f} | {r:.2f} | {s_:.2f} | {fab:.2f} | {w / fab if fab else 0:.2f}× | "
              f"{free:.2f} | {free / free_fab if free_fab else 0:.2f}× |")
    pinned_latency = load(pinned_path)["latency"]
    if pinned_latency:
        print(f"- 64 B one-way, pinned: {pinned_latency[0]['one_way_p50_ns'] / 1e3:.1f} µs")

qps = {}  # n -> {"ndkperf": [Gb/s], "iperf3": [Gb/s]}
for path in rounds_of("qps-*-ndkperf.json"):
    n = int(re.search(r"qps-\d+-(\d+)-ndkperf\.json", path).group(1))
    qps.setdefault(n, {"ndkperf": [], "iperf3": []})["ndkperf"].append(load(path)["results"][0]["gbits_per_s"])
for path in rounds_of("qps-*-iperf3.json"):
    n = int(re.search(r"qps-\d+-(\d+)-iperf3\.json", path).group(1))
    qps.setdefault(n, {"ndkperf": [], "iperf3": []})["iperf3"].append(
        load(path)["end"]["sum_received"]["bits_per_second"] / 1e9)
if qps:
    print()
    print("N QPs on one adapter (ndkperf -q N, N progress threads each side), 1 MiB writes, against iperf3 -P N; "
          "medians of the rounds, Gb/s in all.")
    print()
    print("| QPs / streams | ndkperf write | iperf3 -P N | ratio (target ≥ 0.9×) |")
    print("| ---: | ---: | ---: | ---: |")
    for n in sorted(qps):
        ndk, base = median(qps[n]["ndkperf"]), median(qps[n]["iperf3"])
        print(f"| {n} | {ndk:.2f} | {base:.2f} | {ndk / base if base else 0:.3f}× |")  # 0.896 is not 0.90
    if qps_png:
        plot_qps([(n, median(qps[n]["ndkperf"]), median(qps[n]["iperf3"])) for n in sorted(qps)], qps_png, rounds,
                 median(write_1m), median(iperf[1048576]), out)

plot_bandwidth([(size, cell('write', size), cell('read', size), cell('send', size), median(iperf.get(size, [])),
                 median(rma.get(size, []))) for size in sizes], png, rounds, out)
