#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q "$@"
