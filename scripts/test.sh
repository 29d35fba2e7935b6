#!/usr/bin/env bash
# Sets up a fresh machine, runs the lint, format and type checks of every language
# (scripts/check.sh), then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/lib/venv.sh
use_venv
bash scripts/check.sh
python3 -m pytest -q "$@"
