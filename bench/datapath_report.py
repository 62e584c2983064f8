#!/usr/bin/env python3
"""Turns datapath_bench JSON (median aggregates) into the tables of docs/benchmarks.md: RDMA write/read
bandwidth beside memcpy of the same size from the same run, message rate, latency, fast-register round trip."""
import json
import sys


def main():
    with open(sys.argv[1]) as handle:
        data = json.load(handle)
    med = {}
    for bench in data["benchmarks"]:
        if bench.get("aggregate_name", "median") != "median":
            continue
        med[bench["run_name"]] = bench
    sizes = sorted({int(name.split("/")[1]) for name in med if name.startswith("BM_Memcpy/")})
    print("| size | memcpy GB/s | write GB/s | write / memcpy | read GB/s | read / memcpy |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        base = med[f"BM_Memcpy/{size}"]["bytes_per_second"] / 1e9
        write = med[f"BM_RdmaWrite/{size}"]["bytes_per_second"] / 1e9
        read = med[f"BM_RdmaRead/{size}"]["bytes_per_second"] / 1e9
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1024 else f"{size} B"
        print(f"| {label} | {base:.2f} | {write:.2f} | {write / base:.2f}× | {read:.2f} | {read / base:.2f}× |")
    rate = med["BM_Write64MessageRate"]["items_per_second"] / 1e6
    print(f"\n64 B write message rate: {rate:.2f} M/s (one completion per 64 writes)")
    latency = med["BM_WriteLatency"]["real_time"]
    print(f"64 B write, post to completion: {latency:.0f} ns (median of repetitions of the mean per iteration)")
    for pages in (1, 4, 16):
        name = f"BM_FastRegisterInvalidate/{pages}"
        if name in med:
            print(f"FastRegister + Invalidate, {pages} page(s), both completed: {med[name]['real_time']:.0f} ns")


if __name__ == "__main__":
    main()
