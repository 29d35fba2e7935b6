#!/usr/bin/env bash
# Runs both implementations of one example through the whole pipeline (model, analysis,
# tests, trace under qemu-x86_64, report with heat map) and compares them.
#
# usage: examples/run.sh refcount|kvstore|cktable [OUT]      (default OUT: out/examples)
#
# cktable is one library as Debian installs it (libck-dev): one run, no comparison.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A IMPLEMENTATIONS=([refcount]="shared sharded" [kvstore]="locked striped")
example=${1:-}
out=${2:-out/examples}
if [ "$example" = cktable ]; then
  exec scalecheck pipeline --target lib:examples/cktable --out "$out/cktable"
fi
if [ -z "$example" ] || [ -z "${IMPLEMENTATIONS[$example]:-}" ]; then
  echo "usage: examples/run.sh refcount|kvstore|cktable [OUT]" >&2
  exit 2
fi
read -r first second <<<"${IMPLEMENTATIONS[$example]}"
for implementation in "$first" "$second"; do
  scalecheck pipeline --target "lib:examples/$example/$implementation.toml" \
    --out "$out/$example-$implementation"
done
# The second implementation against the first: which tests it makes conflict-free.
scalecheck report "$out/$example-$second" --diff "$out/$example-$first"
