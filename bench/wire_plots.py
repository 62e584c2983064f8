#!/usr/bin/env python3
"""The two plots of scripts/bench-wire.sh's run, drawn with gnuplot: bandwidth against message size, and aggregate
1 MiB write bandwidth against QPs. wire_report.py draws them from a run's medians; run alone, this redraws them
from the tables of the current run in docs/benchmarks.md (the same medians), so a change of style needs no new run.

Usage: wire_plots.py BENCHMARKS_MD BANDWIDTH_PNG QPS_PNG
"""
import os
import re
import subprocess
import sys
import tempfile


def size_name(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def gnuplot(script):
    result = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if result.returncode != 0:
        print("gnuplot failed:", result.stderr, file=sys.stderr)
        sys.exit(1)


def plot_bandwidth(rows, png, rounds, workdir):
    """rows: (size, write, read, send, iperf3, libfabric) in Gb/s."""
    data = os.path.join(workdir, "bandwidth.dat")
    with open(data, "w") as f:
        for row in rows:
            f.write(" ".join(str(value) for value in row) + "\n")
    sizes = [row[0] for row in rows]
    gnuplot(f"""
set terminal pngcairo size 900,540 noenhanced
set output '{png}'
set title 'softndk iWARP/TCP between two processes (loopback): medians of {rounds} interleaved rounds'
set logscale x 2
set xtics ({", ".join(f'"{size_name(size)}" {size}' for size in sizes)})
set xlabel 'message size (bytes)'
set ylabel 'Gb/s'
set key top left
set grid
plot '{data}' using 1:2 with linespoints lw 2 title 'ndkperf write', \\
     '{data}' using 1:3 with linespoints lw 2 title 'ndkperf read', \\
     '{data}' using 1:4 with linespoints lw 2 title 'ndkperf send', \\
     '{data}' using 1:5 with linespoints lw 2 lc rgb '#7f7f7f' dashtype 2 pt 4 title 'iperf3 (one stream, -l size)', \\
     '{data}' using 1:6 with linespoints lw 2 lc rgb '#d62728' dashtype 3 pt 5 ps 1.3 \\
       title 'libfabric tcp RMA write (window 16)'
""")


def plot_qps(rows, png, rounds, sweep_write, sweep_iperf, workdir):
    """rows: (N, ndkperf write -q N, iperf3 -P N) in Gb/s; sweep_*: the same run's 1 MiB figures at one QP."""
    data = os.path.join(workdir, "qps.dat")
    with open(data, "w") as f:
        for row in rows:
            f.write(" ".join(str(value) for value in row) + "\n")
    sweep = os.path.join(workdir, "qps-sweep.dat")
    with open(sweep, "w") as f:
        f.write(f"1 {sweep_write} {sweep_iperf}\n")
    gnuplot(f"""
set terminal pngcairo size 760,460 noenhanced
set output '{png}'
set title '1 MiB writes in all, against QPs (loopback, medians of {rounds} rounds)'
set offsets 0.1, 0.1, 0, 0
set xlabel 'QPs (ndkperf -q N) / streams (iperf3 -P N)'
set ylabel 'Gb/s in all'
set xtics ({", ".join(str(row[0]) for row in rows)})
set key bottom right
set grid
set yrange [0:*]
plot '{data}' using 1:2 with linespoints lw 2 title 'ndkperf write -q N (its own rounds, after the sweep)', \\
     '{data}' using 1:3 with linespoints lw 2 lc rgb '#7f7f7f' dashtype 2 pt 4 title 'iperf3 -P N (the same rounds)', \\
     '{sweep}' using 1:2 with points pt 7 ps 1.6 title 'the sweep: ndkperf 1 MiB write, one QP', \\
     '{sweep}' using 1:3 with points pt 6 ps 1.6 lc rgb '#7f7f7f' title 'the sweep: iperf3 at 1 MiB'
""")


def number(text):
    return float(text.strip().rstrip("×"))


def tables_of(markdown):
    """The current run's sweep rows and QP rows from docs/benchmarks.md, and its number of rounds."""
    sweep, qps, rounds = [], [], 5
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"(\d+) (B|KiB|MiB)", cells[0]) if cells else None
        if match and len(cells) == 8 and not sweep_done(sweep, match, units):
            size = int(match.group(1)) * units[match.group(2)]
            sweep.append((size, number(cells[1]), number(cells[2]), number(cells[3]), number(cells[4]),
                          number(cells[6])))
        elif re.fullmatch(r"\d+", cells[0] if cells else "") and len(cells) == 4 and "×" in cells[3]:
            qps.append((int(cells[0]), number(cells[1]), number(cells[2])))
        found = re.search(r"Medians of (\d+) interleaved rounds", line)
        if found:
            rounds = int(found.group(1))
    return sweep, qps, rounds


def sweep_done(sweep, match, units):
    """The sweep table comes first; a second table with the same first column (pinned runs) is not it."""
    size = int(match.group(1)) * units[match.group(2)]
    return any(row[0] == size for row in sweep)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sweep_rows, qps_rows, rounds = tables_of(f.read())
    if not sweep_rows or not qps_rows:
        print("wire_plots.py: no sweep or QP table found in", sys.argv[1], file=sys.stderr)
        sys.exit(1)
    one_mib = [row for row in sweep_rows if row[0] == 1 << 20][0]
    with tempfile.TemporaryDirectory() as workdir:
        plot_bandwidth(sweep_rows, sys.argv[2], rounds, workdir)
        plot_qps(qps_rows, sys.argv[3], rounds, one_mib[1], one_mib[4], workdir)
    print(f"wire_plots.py: {len(sweep_rows)} sizes and {len(qps_rows)} QP counts redrawn from {sys.argv[1]}")
