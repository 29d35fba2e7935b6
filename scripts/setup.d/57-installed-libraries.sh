#!/usr/bin/env bash
# Libraries as a distribution installs them, tested through their pkg-config files
# (docs/usertarget.md): Concurrency Kit's hash table (examples/cktable) and the tests'
# installed-library cases; pkg-config and binutils (nm, ar, objcopy) to link and read them.
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
ensure_packages pkg-config binutils libck-dev
