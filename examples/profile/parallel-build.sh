#!/bin/sh
# A parallel build for `scalecheck profile` (the seed's buildkernel row, small): copies
# native/benchmarks and the harness it links (with the marker header) (a dozen C programs, one Makefile) to the
# scratch directory and runs `make -j JOBS` there; says "completed: N programs" (built).
# Usage: parallel-build.sh [JOBS] (default 2).
set -e
jobs=${1:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
work=${TMPDIR:-/tmp}/parallel-build
rm -rf "$work"
mkdir -p "$work/native" "$work/tracer"
cp -r "$here/native/benchmarks" "$here/native/harness" "$here/native/warnings.mk" "$work/native/"
cp -r "$here/tracer/include" "$work/tracer/"
rm -rf "$work/native/benchmarks/bin"
make -s -C "$work/native/benchmarks" -j "$jobs" >/dev/null
echo "completed: $(ls "$work/native/benchmarks/bin" | wc -l) programs"
