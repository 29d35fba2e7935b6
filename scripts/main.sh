#!/usr/bin/env bash
# Sets up a fresh machine and runs the main job: the whole pipeline on the shipped POSIX
# model and Debian's stock kernel under QEMU. Extra arguments go to `scalecheck pipeline`
# (e.g. --full for all 18 operations, --out DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/lib/venv.sh
use_venv
scalecheck pipeline "$@"
