#!/usr/bin/env bash
# A/B of two ndkperf builds (issue 18: a refactor must not cost speed): in-process and over loopback TCP, write,
# read, send at 64 B, 64 KiB, 1 MiB and the 64 B Send ping-pong, 3 interleaved rounds, medians and new/old ratios.
# Usage: [AB_ROUNDS=3] [AB_SECONDS=0.3] scripts/bench-ab.sh OLD_NDKPERF NEW_NDKPERF
#   (build both the same way, e.g. -DCMAKE_BUILD_TYPE=Release -DSOFTNDK_BUILD_TESTS=OFF, target ndkperf)
set -u
old_bin="$1"; new_bin="$2"
out=$(mktemp -d); export out
rounds=${AB_ROUNDS:-3}; seconds=${AB_SECONDS:-0.3}
for round in $(seq "$rounds"); do
  for v in old new; do
    bin=$old_bin; [ "$v" = new ] && bin=$new_bin
    $bin --test all --sizes 64,65536,1048576 --seconds "$seconds" --json > $out/inproc-$v-$round.json 2>/dev/null
    port=$((30000 + RANDOM % 20000))
    $bin --server -a 127.0.0.1 -p $port --max-size 1048576 > $out/srv-$v.log 2>&1 &
    for _ in $(seq 50); do grep -q listening $out/srv-$v.log && break; sleep 0.1; done
    $bin --client -a 127.0.0.1 -p $port --sizes ${AB_SIZES:-64,65536,1048576} --seconds "$seconds" --latency-sizes 64 --json > $out/wire-$v-$round.json 2>/dev/null
    wait
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, glob, statistics as st, sys
out, rounds = sys.argv[1], sys.argv[2]
def load(kind, v):
    runs=[json.load(open(f)) for f in sorted(glob.glob(f"{out}/{kind}-{v}-*.json"))]
    rows={}
    for r in runs:
        for row in r["results"]:
            rows.setdefault((row["test"], row["size"]), []).append(row.get("gbytes_per_s", row.get("gbps")))  # gbps: before issue 20
        for l in r.get("latency", []):
            rows.setdefault(("pingpong one-way us", l["size"]), []).append(l["one_way_p50_ns"]/1e3)
    return rows
# noise: the spread of old's own rounds, (max - min) / median; a ratio inside it is no change
for kind in ("inproc", "wire"):
    old, new = load(kind, "old"), load(kind, "new")
    print(f"{kind}: test size old new new/old old-spread (medians of {rounds} interleaved rounds; GB/s, or us for ping-pong)")
    for k in sorted(old):
        o, n = st.median(old[k]), st.median(new[k])
        spread = (max(old[k]) - min(old[k])) / o if o else 0
        print(f"  {k[0]:>20} {k[1]:>8} {o:9.3f} {n:9.3f} {n/o:6.2f}x {spread:6.0%}")
PY
rm -rf "$out"
