#!/usr/bin/env bash
# Builds and runs every test: ASan+UBSan (all tests), TSan (concurrency tests), the interop suite against Linux
# siw in the repository's own Linux guest (tests/interop/guest; when it cannot be prepared, one line says why), the fuzzers for a bounded time,
# the install check and the formatting check. Exits non-zero on any failure.
# Each phase prints its wall time as it ends, and the run ends with a table of them; a failing phase is named in
# the last lines together with what failed in it (ctest's failed tests, the interop suite's failed cases).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

phase_names=() phase_seconds=() phase_name="" phase_start=$SECONDS run_start=$SECONDS
phase() {  # ends the running phase (if any) and starts the one named $1
  if [ -n "$phase_name" ]; then
    phase_names+=("$phase_name") phase_seconds+=($((SECONDS - phase_start)))
    echo "-- $phase_name: $((SECONDS - phase_start)) s"
  fi
  phase_name="${1:-}" phase_start=$SECONDS
  [ -n "$phase_name" ] && echo "== $phase_name"
  return 0
}
report() {
  local status=$?
  echo "== where the time went"
  local i
  for i in "${!phase_names[@]}"; do printf '%6d s  %s\n' "${phase_seconds[$i]}" "${phase_names[$i]}"; done
  [ -n "$phase_name" ] && printf '%6d s  %s%s\n' $((SECONDS - phase_start)) "$phase_name" \
    "$([ "$status" -ne 0 ] && echo "  <- FAILED (exit $status)")"
  printf '%6d s  total\n' $((SECONDS - run_start))
}
trap report EXIT

# ctest: failing tests print their output (GoogleTest's brief mode keeps a whole-suite test's output to its
# failures), and the summary lists the failed tests by name.
export GTEST_BRIEF=1
# ctest pads each result line with dots to its longest test name (250 characters here); the padding goes, the
# names and verdicts stay. pipefail keeps ctest's status.
run_ctest() { ctest "$@" --output-on-failure -j "$jobs" | sed -u -E 's/ \.{4,} *(Passed|\*\*\*|Not Run|Failed|Exception|Skipped)/ ... \1/'; }

phase "format"
git ls-files '*.c' '*.h' '*.cpp' '*.hpp' | xargs clang-format --dry-run -Werror

phase "ASan + UBSan: build"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
phase "ASan + UBSan: every test"
run_ctest --preset asan -LE interop

phase "interop: softndk against Linux soft-iWARP (siw), Linux NVMe-oF and ksmbd in a Linux guest (tests/interop/guest)"
tools=build/asan/tools
for suite in "tests/interop/guest/vm_test.sh $tools/ndkperf" "tests/interop/siw_rping.sh $tools/ndkping" \
             "tests/interop/siw_perftest.sh $tools/ndkperf" "tests/interop/siw_errors.sh $tools/ndkperf" \
             "tests/nvmeof/host_against_linux_target.sh $tools/softndk-kmhost build/asan/tests/nvmeof-host.so" \
             "tests/nvmeof/linux_host_against_target.sh $tools/softndk-kmhost build/asan/tests/nvmeof-target.so" \
             "tests/smbdirect/client_against_ksmbd.sh $tools/softndk-kmhost build/asan/tests/smbdirect-client.so"; do
  status=0
  read -r script arguments <<<"$suite"
  # shellcheck disable=SC2086  # the arguments are words
  $script $arguments build/asan/interop || status=$?
  [ "$status" -eq 77 ] && break  # the suite said why in one line; the others would say the same
  export SOFTNDK_SIW_GUEST_BOOTED=1  # from now on a guest that does not boot is a failure (siw_common.sh)
  if [ "$status" -ne 0 ]; then
    echo "interop failed ($script, its failed cases listed just above); captures, logs and tshark summaries are" \
      "in build/asan/interop"
    exit "$status"
  fi
done

phase "TSan: build the concurrency tests"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target concurrency_tests transport_tests km_tests remote_peer_tests ndk_test_peer ndkping
phase "TSan: concurrency tests"
run_ctest --preset tsan

phase "fuzz"
scripts/fuzz.sh 20

phase "install: headers, library, CMake package, pkg-config"
scripts/check-install.sh
phase ""
