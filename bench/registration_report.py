#!/usr/bin/env python3
"""Turns registration_bench JSON (median aggregates) into the markdown table of docs/benchmarks.md:
ns per call, ns per page, and each operation's ratio to its baseline from the same run."""
import json
import sys

BASELINE = {
    "BM_RegisterDeregister": "BM_PageTableFloor",
    "BM_BuildReleaseLam": "BM_PageTableFloor",
    "BM_InitializeFastRegisterMr": "BM_PageTableFloor",
    "BM_ProbeAndLockUnlock": "BM_MlockMunlock",
}


def load(path):
    with open(path) as handle:
        data = json.load(handle)
    results = {}
    for bench in data["benchmarks"]:
        if bench.get("aggregate_name", "median") != "median":
            continue
        name, _, pages = bench["run_name"].partition("/")
        results[(name, int(pages))] = bench["real_time"]  # ns per iteration
    return data["context"], results


def main():
    context, results = load(sys.argv[1])
    names = sorted({name for name, _ in results}, key=lambda n: list(BASELINE).index(n) if n in BASELINE else -1)
    sizes = sorted({pages for _, pages in results})
    print(f"Host: {context.get('num_cpus')} CPUs, {context.get('mhz_per_cpu')} MHz; median of repetitions.\n")
    print("| operation | pages | ns/call | ns/page | baseline | baseline ns/call | ratio |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: |")
    for name in names:
        for pages in sizes:
            if (name, pages) not in results:
                continue
            ns = results[(name, pages)]
            base = BASELINE.get(name)
            if base and (base, pages) in results:
                base_ns = results[(base, pages)]
                tail = f"{base.removeprefix('BM_')} | {base_ns:,.0f} | {ns / base_ns:.2f}×"
            else:
                tail = "— | — | —"
            print(f"| {name.removeprefix('BM_')} | {pages} | {ns:,.0f} | {ns / pages:,.2f} | {tail} |")


if __name__ == "__main__":
    main()
