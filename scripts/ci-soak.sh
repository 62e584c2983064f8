#!/usr/bin/env bash
# Runs CI as CI runs it, again and again, to find flakes: each run is a fresh clone of this checkout's HEAD into an
# empty directory with nothing beside it (the repository must stand alone), then `CI=true bash .ci/run` with no
# standard input. With --hog a busy loop is pinned to each core for the whole run. Each run's log (every line
# timestamped with seconds since its start) goes to OUTDIR/run-N.log, and OUTDIR/summary.txt gets one line per run:
# wall time, exit status, the failed phase. --commit REV runs that commit instead of HEAD, so that runs made hours
# apart test the same code. A failed run's clone stays, with its build and interop captures; its path is printed.
# Usage: scripts/ci-soak.sh [--hog] [--runs N] [--out OUTDIR] [--commit REV]
#        (defaults: 1 run, OUTDIR /tmp/softndk-ci-soak, HEAD)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hog=0 runs=1 out=/tmp/softndk-ci-soak commit=HEAD
while [ $# -gt 0 ]; do
  case "$1" in
    --hog) hog=1 ;;
    --runs) runs="$2"; shift ;;
    --out) out="$2"; shift ;;
    --commit) commit="$2"; shift ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "ci-soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
commit=$(git -C "$root" rev-parse --verify "$commit^{commit}")
parent=$(mktemp -d /tmp/softndk-clone.XXXXXX)
hogs=()
stop_hogs() { ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null; hogs=(); return 0; }
trap stop_hogs EXIT
for n in $(seq 1 "$runs"); do
  clone="$parent/ci-soak-$(basename "$out")-$n"
  rm -rf "$clone"
  git clone -q "$root" "$clone"
  git -C "$clone" checkout -q "$commit"
  if [ "$hog" = 1 ]; then
    for cpu in $(seq 0 $(($(nproc) - 1))); do
      taskset -c "$cpu" bash -c 'while :; do :; done' &
      hogs+=($!)
    done
  fi
  start=$(date +%s)
  set +e
  (cd "$clone" && CI=true bash .ci/run </dev/null 2>&1) |
    while IFS= read -r line; do printf '%5d %s\n' $(($(date +%s) - start)) "$line"; done >"$out/run-$n.log"
  status=${PIPESTATUS[0]}
  set -e
  stop_hogs
  failed=$(grep -o '<- FAILED.*' "$out/run-$n.log" | head -1 || true)
  phase=$(grep -B0 -m1 '<- FAILED' "$out/run-$n.log" | sed -E 's/^ *[0-9]+ +[0-9]+ s  //; s/  <- FAILED.*//' || true)
  line="run $n$([ "$hog" = 1 ] && echo ' (CPU hog on each core)'): commit $(git -C "$clone" rev-parse --short HEAD)"
  line+=", exit $status, $(($(date +%s) - start)) s${phase:+, failed in: $phase} $failed"
  echo "$line" | tee -a "$out/summary.txt"
  [ "$status" -eq 0 ] && rm -rf "$clone"  # a failed run's clone stays, with its build and interop captures
  [ "$status" -eq 0 ] || echo "run $n's clone stays in $clone"
done
