#!/usr/bin/env bash
# libsv6 (native/libsv6): the POSIX model's operations on sv6's scalable components, and
# their checks: a C compiler with the ThreadSanitizer and AddressSanitizer/LeakSanitizer
# runtimes, then the build.
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
ensure_packages gcc make libc6-dev libtsan2 libasan8 liblsan0 libubsan1

make -s -C native/libsv6 all checks
