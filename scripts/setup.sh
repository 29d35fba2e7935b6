#!/usr/bin/env bash
# Installs everything scalecheck needs on a fresh Debian 12 machine (idempotent).
# Each part of the project keeps its own steps in scripts/setup.d/NN-*.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
for step in scripts/setup.d/*.sh; do
  echo "== setup: $(basename "$step")"
  bash "$step"
done
