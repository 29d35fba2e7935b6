#!/usr/bin/env bash
# Lint, format and type checks for every language in the project, quick when nothing
# changed. Runs every check even after one fails, then exits 1 naming the failed ones.
#
# usage: scripts/check.sh [python] [rust] [go] [c]     (no argument: all sections)
#
#   python  ruff check, ruff format --check, mypy (configuration in pyproject.toml)
#   rust    cargo fmt --check and cargo clippy -D warnings, for each crate below
#   go      gofmt -l (must list nothing) and go vet
#   c       every C build: the Makefiles compile with -Werror and the warnings in
#           native/warnings.mk, so a build is the check
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
# ruff and mypy from the project's virtual environment (scripts/setup.d/10-python.sh).
source scripts/lib/venv.sh
use_venv

RUST_CRATES=(tracer/plugin native/schedbench/rust)
GO_MODULE=native/schedbench/go
# Each C build, as make's arguments: the same targets setup builds, sanitizer variants
# included (they compile at -O1, where the compiler finds other things than at -O2).
C_BUILDS=(
  "-C native/sched all sanitizers"
  "-C native/schedbench/c"
  "-C native/benchmarks"
  "-C native/ldu all checks"
  "-C native/libsv6 all checks"
  "-C tracer/guest"
  "-C tracer/user"
  "-C tracer/sharing"
  "-C bench/fidelity"
)

failed=()

# check NAME COMMAND...: runs COMMAND; a failure is remembered under NAME.
check() {
  local name=$1
  shift
  echo "-- $name"
  if ! "$@"; then
    echo "FAILED: $name"
    failed+=("$name")
  fi
}

gofmt_lists_nothing() {
  local unformatted
  unformatted=$(gofmt -l "$GO_MODULE") || return 1
  if [ -n "$unformatted" ]; then
    echo "gofmt: not formatted (run gofmt -w): $unformatted"
    return 1
  fi
}

python_checks() {
  echo "versions: $(python3 --version), $(ruff --version), $(mypy --version)"
  check "ruff check" ruff check .
  check "ruff format" ruff format --check .
  check "mypy" mypy
}

rust_checks() {
  echo "versions: $(rustc --version), $(cargo fmt --version), $(cargo clippy --version)"
  local crate
  for crate in "${RUST_CRATES[@]}"; do
    check "cargo fmt $crate" cargo fmt --check --manifest-path "$crate/Cargo.toml"
    check "cargo clippy $crate" cargo clippy -q --release --locked --all-targets \
      --manifest-path "$crate/Cargo.toml" -- -D warnings
  done
  # The plugin's unit tests run outside QEMU: a static test binary in which QEMU's plugin
  # API (which the tests never call) stays unresolved.
  check "cargo test tracer/plugin" env CARGO_TARGET_DIR=tracer/plugin/target/unit-tests \
    RUSTFLAGS="-C link-arg=-Wl,--unresolved-symbols=ignore-all -C target-feature=+crt-static" \
    cargo test -q --locked --target x86_64-unknown-linux-gnu \
    --manifest-path tracer/plugin/Cargo.toml
}

go_checks() {
  echo "versions: $(go version)"
  check "gofmt $GO_MODULE" gofmt_lists_nothing
  # GOTOOLCHAIN=local: use the installed Go, never download another toolchain.
  check "go vet $GO_MODULE" env -C "$GO_MODULE" GOTOOLCHAIN=local go vet ./...
}

c_checks() {
  echo "versions: $(gcc --version | head -n 1), cc is $(readlink -f "$(command -v cc)")," \
    "$(make --version | head -n 1)"
  local build
  for build in "${C_BUILDS[@]}"; do
    # shellcheck disable=SC2086  # each entry is a list of make arguments
    check "make $build" make -s $build
  done
}

declare -A SECTIONS=([python]=python_checks [rust]=rust_checks [go]=go_checks [c]=c_checks)
ORDER=(python rust go c)

selected=("$@")
if ((${#selected[@]} == 0)); then
  selected=("${ORDER[@]}")
fi
for section in "${selected[@]}"; do
  if [ -z "${SECTIONS[$section]:-}" ]; then
    echo "check.sh: unknown section '$section' (choose from: ${ORDER[*]})" >&2
    exit 2
  fi
done
for section in "${selected[@]}"; do
  echo "== $section"
  "${SECTIONS[$section]}"
done

if ((${#failed[@]})); then
  printf 'check.sh: %d check(s) failed:' "${#failed[@]}"
  printf ' [%s]' "${failed[@]}"
  echo
  exit 1
fi
echo "check.sh: all checks passed (${selected[*]})"
