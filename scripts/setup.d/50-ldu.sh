#!/usr/bin/env bash
# LDU library, baselines, checks and benchmark (native/ldu): a C compiler with the
# ThreadSanitizer and AddressSanitizer/LeakSanitizer runtimes, then the build.
set -euo pipefail
cd "$(dirname "$0")/../.."

needed=(gcc make libc6-dev libtsan2 libasan8 liblsan0 libubsan1)
missing=()
for package in "${needed[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

make -s -C native/ldu all checks
