#!/usr/bin/env bash
# A second kernel to trace beside the installed 6.1: Debian 12's 6.12 package, downloaded
# and unpacked into ~/.cache/scalecheck/kernels/ (never installed, /boot untouched) by
# `scalecheck kernel fetch`. The VM test that checks names on a second kernel boots it.
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/venv.sh
use_venv
scalecheck kernel fetch 6.12
