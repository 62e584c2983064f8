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
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTNDK_BUILD_TESTS=OFF -DSOFTNDK_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr >/dev/null  # the package's prefix; `cmake --install --prefix` below overrides it
cmake --build "$build"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name softndk.pc -print -quit)")/..
libdir=$(cd "$libdir" && pwd)

export PKG_CONFIG_PATH="$libdir/pkgconfig"
# pkg-config prints plain paths under the prefix installed to; man pages and the documentation are there.
cflags=$(pkg-config --cflags softndk | xargs)  # pkgconf ends the line with a space
[ "$cflags" = "-I$prefix/include" ] || { echo "pkg-config --cflags softndk: '$cflags', want '-I$prefix/include'"; exit 1; }
for tool in ndkinfo ndkping ndkperf softndk-kmhost; do
  page="$prefix/share/man/man1/$tool.1"
  grep -q "^\.TH \"$(tr a-z A-Z <<<"$tool")\" 1" "$page" 2>/dev/null || { echo "no man page $page"; exit 1; }
  line=$(env -u LD_LIBRARY_PATH "$prefix/bin/$tool" --help | tail -n 1)  # the page is the tool's own --help
  grep -qF -- "$line" "$page" || { echo "$page does not hold the tool's --help ('$line')"; exit 1; }
done
for doc in README.md CHANGELOG.md tools.md kernel-consumers.md; do
  [ -s "$prefix/share/doc/softndk/$doc" ] || { echo "no $prefix/share/doc/softndk/$doc"; exit 1; }
done
gcc -std=c11 -Wall -Wextra -Werror tests/c_abi/c_consumer.c -o "$work/pc_consumer" $(pkg-config --cflags --libs softndk)
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"

cmake -S tests/install -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake/find_package_consumer"
LD_LIBRARY_PATH="$libdir" "$work/cmake/km_consumer"
# The user-mode sample builds from the installed package too (issue 20 §3).
cmake -S samples/um -B "$work/sample" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/sample" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/sample/first_consumer" | tail -1
# The installed tools run from a non-system prefix with no LD_LIBRARY_PATH (relative run path).
env -u LD_LIBRARY_PATH "$prefix/bin/ndkinfo" >/dev/null
env -u LD_LIBRARY_PATH "$prefix/bin/ndkping" -c 1 >/dev/null
echo "install check: pkg-config, find_package and kernel-layer (softndk::softndk_km) consumers built and ran;"
echo "installed tools run from $prefix"

# The Debian package (issue 20 §5): cpack -G DEB, installed with dpkg, four checks, removed with dpkg -r.
# Installing touches /usr, so only as root, and not over a softndk package someone installed by hand.
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/softndk_*.deb)
contents=$(dpkg-deb --contents "$deb")
grep -qE '/usr/bin/ndkperf$' <<<"$contents" || { echo "the package lacks the tools"; exit 1; }
grep -qE '/usr/share/man/man1/ndkperf.1$' <<<"$contents" || { echo "the package lacks the man pages"; exit 1; }
grep -qE '/usr/share/doc/softndk/CHANGELOG.md$' <<<"$contents" || { echo "the package lacks its documentation"; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
  echo "package: built $(basename "$deb"); not installed (needs root)"
  exit 0
fi
if dpkg -s softndk >/dev/null 2>&1; then
  echo "package: built $(basename "$deb"); a softndk package is installed already, so it was left alone"
  exit 0
fi
removed=0
trap 'rm -rf "$prefix" "$work"; [ "$removed" = 1 ] || dpkg -r softndk >/dev/null 2>&1 || true' EXIT
dpkg -i "$deb" >/dev/null
env -u LD_LIBRARY_PATH ndkinfo >/dev/null                       # 1. the tools run, no LD_LIBRARY_PATH
env -u LD_LIBRARY_PATH ndkping -c 1 >/dev/null
cmake -S tests/install -B "$work/deb-cmake" -G Ninja >/dev/null  # 2. find_package, from /usr
cmake --build "$work/deb-cmake" >/dev/null
env -u LD_LIBRARY_PATH "$work/deb-cmake/find_package_consumer" >/dev/null
# /usr/include is the compiler's own: pkg-config leaves it out (it printed .../pkgconfig/../../../include before)
case "$(env -u PKG_CONFIG_PATH pkg-config --cflags softndk | xargs)" in
  "" | "-I/usr/include") ;;
  *) echo "the package's pkg-config: '$(env -u PKG_CONFIG_PATH pkg-config --cflags softndk)'"; exit 1 ;;
esac
gcc -std=c11 -Wall -Wextra -Werror tests/c_abi/c_consumer.c -o "$work/deb_pc" \
  $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs softndk)   # 3. pkg-config
env -u LD_LIBRARY_PATH "$work/deb_pc" >/dev/null
cmake -S samples/um -B "$work/deb-sample" -G Ninja >/dev/null     # 4. the sample against the package
cmake --build "$work/deb-sample" >/dev/null
env -u LD_LIBRARY_PATH "$work/deb-sample/first_consumer" >/dev/null
files=$(dpkg -L softndk | grep -vE '^/\.$|^/usr(/[a-z0-9_-]+)?$')
dpkg -r softndk >/dev/null
removed=1
left=$(for f in $files; do if [ -e "$f" ] && [ ! -d "$f" ]; then echo "$f"; fi; done)
[ -z "$left" ] || { echo "dpkg -r left files behind: $left"; exit 1; }
echo "package: $(basename "$deb") installed with dpkg; tools, find_package, pkg-config and the sample work from it;"
echo "dpkg -r removed every file"
