#!/usr/bin/env bash
# Builds every scheduler benchmark port: ulsched and the C ports (ours, pthreads), the
# Go port and the Tokio port. Idempotent; quick when everything is up to date.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"

make -s -C "$here/../sched" build/libulsched.a
make -s -C "$here/c"
# GOTOOLCHAIN=local: build with the installed Go, never download another toolchain.
(cd "$here/go" && GOTOOLCHAIN=local go build -o bin/schedbench .)
CARGO_TARGET_DIR="$here/rust/target" cargo build -q --release --locked \
  --manifest-path "$here/rust/Cargo.toml"
