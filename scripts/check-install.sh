#!/usr/bin/env bash
# Installs softndk to a temporary prefix, then builds consumers the two documented ways:
# pkg-config with gcc -std=c11 -Wall -Wextra -Werror, and find_package(softndk CONFIG) -> softndk::softndk.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
# What a package builds: the libraries and the tools, in release, without the test suites and benchmarks.
build=build/install-check
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTNDK_BUILD_TESTS=OFF -DSOFTNDK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name softndk.pc -print -quit)")/..
libdir=$(cd "$libdir" && pwd)

export PKG_CONFIG_PATH="$libdir/pkgconfig"
gcc -std=c11 -Wall -Wextra -Werror tests/c_abi/c_consumer.c -o "$work/pc_consumer" $(pkg-config --cflags --libs softndk)
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"

cmake -S tests/install -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake/find_package_consumer"
LD_LIBRARY_PATH="$libdir" "$work/cmake/km_consumer"
# The installed tools run from a non-system prefix with no LD_LIBRARY_PATH (relative run path).
env -u LD_LIBRARY_PATH "$prefix/bin/ndkinfo" >/dev/null
env -u LD_LIBRARY_PATH "$prefix/bin/ndkping" -c 1 >/dev/null
echo "install check: pkg-config, find_package and kernel-layer (softndk::softndk_km) consumers built and ran;"
echo "installed tools run from $prefix"
