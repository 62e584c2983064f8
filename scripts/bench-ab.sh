#!/usr/bin/env bash
# A/B of two ndkperf builds (issue 18: a refactor must not cost speed): in-process and over loopback TCP, write,
# read, send at 64 B, 64 KiB, 1 MiB and the 64 B Send ping-pong, 3 interleaved rounds, medians and new/old ratios.
# Usage: scripts/bench-ab.sh OLD_NDKPERF NEW_NDKPERF   (build both the same way, e.g. -DCMAKE_BUILD_TYPE=Release)
set -u
old_bin="$1"; new_bin="$2"
out=$(mktemp -d); export out
for round in 1 2 3; do
  for v in old new; do
    bin=$old_bin; [ "$v" = new ] && bin=$new_bin
    $bin --test all --sizes 64,65536,1048576 --seconds 0.3 --json > $out/inproc-$v-$round.json 2>/dev/null
    port=$((30000 + RANDOM % 20000))
    $bin --server -a 127.0.0.1 -p $port --max-size 1048576 > $out/srv-$v.log 2>&1 &
    for _ in $(seq 50); do grep -q listening $out/srv-$v.log && break; sleep 0.1; done
    $bin --client -a 127.0.0.1 -p $port --sizes 64,65536,1048576 --seconds 0.3 --latency-sizes 64 --json > $out/wire-$v-$round.json 2>/dev/null
    wait
  done
done
python3 - "$out" <<'PY'
import json, glob, statistics as st, sys
out = sys.argv[1]
def load(kind, v):
    runs=[json.load(open(f)) for f in sorted(glob.glob(f"{out}/{kind}-{v}-*.json"))]
    rows={}
    for r in runs:
        for row in r["results"]:
            rows.setdefault((row["test"], row["size"]), []).append(row["gbps"])
        for l in r.get("latency", []):
            rows.setdefault(("pingpong one-way us", l["size"]), []).append(l["one_way_p50_ns"]/1e3)
    return {k: st.median(v) for k, v in rows.items()}
for kind in ("inproc", "wire"):
    old, new = load(kind, "old"), load(kind, "new")
    print(f"{kind}: test size old new new/old (medians of 3 interleaved rounds; GB/s, or us for ping-pong)")
    for k in sorted(old):
        print(f"  {k[0]:>20} {k[1]:>8} {old[k]:9.3f} {new[k]:9.3f} {new[k]/old[k]:6.2f}x")
PY
rm -rf "$out"
