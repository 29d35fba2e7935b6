#!/usr/bin/env bash
# The Python package with its pinned dependencies (pyproject.toml), installed editable into
# the project's virtual environment (scripts/lib/venv.sh), made with the python3 first on
# the PATH (Debian's own, or any other 3.11+).
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
source scripts/lib/venv.sh
ensure_packages python3 python3-venv

if [ ! -x "$VENV/bin/python3" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python3" -m pip install --disable-pip-version-check -q -e '.[dev]'
