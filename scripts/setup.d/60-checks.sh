#!/usr/bin/env bash
# The tools scripts/check.sh needs beyond the toolchains installed above: rustfmt and
# clippy (parts of rustup's default profile) and gofmt (part of Go). ruff and mypy come
# with the Python package's dev dependencies (10-python.sh).
set -euo pipefail

export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"

# require TOOL HOW PROBE...: stops setup with one line when PROBE does not answer.
require() {
  local tool=$1 how=$2
  shift 2
  if ! "$@" >/dev/null 2>&1; then
    echo "60-checks: $tool not found (scripts/check.sh needs it); $how" >&2
    exit 1
  fi
}
require rustfmt "install it with: rustup component add rustfmt" cargo fmt --version
require clippy "install it with: rustup component add clippy" cargo clippy --version
require gofmt "it comes with Go, in /usr/local/go/bin" command -v gofmt
