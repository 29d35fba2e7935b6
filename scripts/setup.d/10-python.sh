#!/usr/bin/env bash
# The Python package with its pinned dependencies (pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install --disable-pip-version-check -q -e '.[dev]'
