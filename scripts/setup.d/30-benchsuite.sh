#!/usr/bin/env bash
# The benchmark suite's system packages (a C toolchain with static glibc for doexec's
# static variants; perf for bench/thread_cost.py) and a build of the kernel benchmarks
# (native/benchmarks/bin).
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
ensure_packages gcc make libc6-dev linux-perf

make -s -C native/benchmarks
