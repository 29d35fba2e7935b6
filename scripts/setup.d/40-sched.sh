#!/usr/bin/env bash
# Our user-level scheduler (native/sched) and the scheduler benchmark ports
# (native/schedbench): a C toolchain with the sanitizer runtimes, taskset, and the Go
# and Rust toolchains the machine image provides. Builds everything, fetching the
# pinned crates (Cargo.lock) now so that tests and sweeps never download.
set -euo pipefail
cd "$(dirname "$0")/../.."

# gcc-12 brings libasan8 and libtsan2 (AddressSanitizer and ThreadSanitizer builds).
source scripts/lib/apt.sh
ensure_packages gcc make libc6-dev util-linux python3

export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
for tool in go cargo; do
  if ! command -v "$tool" >/dev/null; then
    echo "40-sched: $tool not found; the Go and Rust toolchains are needed for the Go and Tokio ports" >&2
    exit 1
  fi
done

make -s -C native/sched all sanitizers
bash native/schedbench/build.sh
