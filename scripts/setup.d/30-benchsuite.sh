#!/usr/bin/env bash
# The benchmark suite's system packages (a C toolchain with static glibc for doexec's
# static variants) and a build of the kernel benchmarks (native/benchmarks/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(gcc make libc6-dev)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

make -s -C native/benchmarks
