#!/usr/bin/env bash
# Installs the Debian packages softndk needs, if any are missing. Safe to run again.
set -euo pipefail
packages=(g++ gcc cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev libssl-dev clang-format clang-14 python3 tshark iproute2 iputils-ping)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
