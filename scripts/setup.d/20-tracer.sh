#!/usr/bin/env bash
# The conflict tracer's system packages: QEMU (TCG plugins), Debian's stock kernel,
# busybox for the guest's initramfs, a static C toolchain and Rust for the QEMU plugin.
# bpftool reads the kernel's BTF (struct layouts, for naming conflicting data); dwarves
# (pahole) makes the small BTF blob the unit tests read.
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
# qemu-user: qemu-x86_64 runs the user-space target (`--target lib:PATH`) with the same plugin.
ensure_packages qemu-system-x86 qemu-user linux-image-amd64 busybox-static gcc libc6-dev make \
  bpftool dwarves

if ! command -v cargo >/dev/null && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "20-tracer: cargo not found; install Rust (rustup) to build the QEMU plugin" >&2
  exit 1
fi
export PATH="$HOME/.cargo/bin:$PATH"
# Build the plugin and the guest driver now, so the first `scalecheck run` and CI's
# tests do not pay for it inside a timed test.
cargo build --release --locked -q --manifest-path tracer/plugin/Cargo.toml
make -s -C tracer/guest
make -s -C tracer/user
make -s -C tracer/sharing
