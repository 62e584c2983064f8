#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++ and ASan+UBSan: the wire-layer parsers (MPA; FPDU/DDP/RDMAP/Terminate)
# straight from the wire sources, seeded from tests/data/captures, and the whole receive state machine
# (fuzz_receive: the library over loopback TCP against registered memory), the whole connection with its MPA
# handshake (fuzz_connection), and consumer, peer and timer events in random order against one stream's state
# machine (fuzz_stream_events), seeded by make_receive_seeds.py.
# Runs each for a bounded time. Usage: scripts/fuzz.sh [seconds per target, default 30]. Exits non-zero if a target crashes.
# Corpora, crash artifacts and binaries stay under build/fuzz (git-ignored).
set -euo pipefail
seconds=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/fuzz
captures=${SOFTNDK_CAPTURES:-$root/tests/data/captures}
cxx=${SOFTNDK_FUZZ_CXX:-clang++-14}
if ! command -v "$cxx" >/dev/null; then
    echo "fuzz.sh: $cxx not found" >&2
    exit 1
fi
mkdir -p "$out/corpus/mpa" "$out/corpus/fpdu" "$out/artifacts"
common=(-std=c++20 -g -O1 -Wall -Wextra -Werror -I"$root/src" -I"$root/tests")
wire=("$root"/src/wire/*.cpp)
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)

echo "== fuzz: build"
"$cxx" "${common[@]}" "$root/tests/fuzz/extract_seeds.cpp" "$root/tests/support/pcap_reader.cpp" "${wire[@]}" \
    -o "$out/extract_seeds"
for target in mpa fpdu; do
    "$cxx" "${common[@]}" "${sanitize[@]}" -fsanitize=fuzzer "$root/tests/fuzz/fuzz_$target.cpp" "${wire[@]}" \
        -o "$out/fuzz_$target"
done

# The receive state machine (tests/fuzz/fuzz_receive.cpp) needs the whole library built with clang and coverage.
echo "== fuzz: build fuzz_receive (the library with clang)"
CC=${SOFTNDK_FUZZ_CC:-clang-14} CXX="$cxx" cmake -S "$root" -B "$out/receive-build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DSOFTNDK_SANITIZE=address,undefined -DSOFTNDK_BUILD_TESTS=OFF -DSOFTNDK_BUILD_TOOLS=OFF \
    -DSOFTNDK_BUILD_RECEIVE_FUZZER=ON >"$out/receive-configure.log"
cmake --build "$out/receive-build" --target fuzz_receive fuzz_connection fuzz_stream_events >"$out/receive-build.log"
cp "$out/receive-build/fuzz_receive" "$out/receive-build/fuzz_connection" "$out/receive-build/fuzz_stream_events" \
    "$out/"
mkdir -p "$out/corpus/receive" "$out/corpus/connection" "$out/corpus/stream_events"
python3 "$root/tests/fuzz/make_receive_seeds.py" "$out/corpus/receive" "$out/corpus/connection" \
    "$out/corpus/stream_events"

if [[ -d "$captures" ]]; then
    "$out/extract_seeds" "$captures" "$out/corpus/mpa" "$out/corpus/fpdu"
else
    echo "fuzz.sh: no captures at $captures; starting from the existing corpus"
fi

status=0
for target in mpa fpdu receive connection stream_events; do
    echo "== fuzz: $target for ${seconds}s"
    # -timeout: a step that hangs (a callback run with a lock held deadlocks) is a finding, not a stuck CI
    if ! "$out/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 -max_len=4096 -timeout=60 \
        -artifact_prefix="$out/artifacts/$target-" "$out/corpus/$target" 2>"$out/$target.log"; then
        echo "fuzz.sh: fuzz_$target FAILED; see $out/$target.log and $out/artifacts/" >&2
        tail -40 "$out/$target.log" >&2
        status=1
    else
        grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+[[:space:]]+DONE)" "$out/$target.log" || true
    fi
done
exit $status
