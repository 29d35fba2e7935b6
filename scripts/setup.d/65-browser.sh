#!/usr/bin/env bash
# Debian's Chromium, run headless by the report's browser test (tests/test_report_browser.py)
# and by bench/report_render.py.
set -euo pipefail
cd "$(dirname "$0")/../.."

source scripts/lib/apt.sh
ensure_packages chromium
