# Sourced by the scripts that use scalecheck's Python: the project's own virtual
# environment (PEP 668: Debian's python3 refuses a pip install outside one), at
# $SCALECHECK_VENV or .venv in the checkout.
VENV="${SCALECHECK_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.venv}"

# use_venv: puts the environment's python3, scalecheck, pytest, ruff and mypy first on PATH.
use_venv() {
  export VIRTUAL_ENV="$VENV"
  export PATH="$VENV/bin:$PATH"
}
