# Shared by scripts/demo and scripts/test: create .venv and install the project when pyproject.toml changed.
# Usage: source scripts/_env.sh EXTRAS   (EXTRAS e.g. "" or "dev,analytics")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MSH_VENV:-$ROOT/.venv}"
EXTRAS="${1:-}"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "error: Python 3.11 or newer is needed as '$PYTHON' (set PYTHON=/path/to/python3.11)" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating virtual environment in $VENV"
  "$PYTHON" -m venv "$VENV"
fi
STAMP="$VENV/.msh-installed-${EXTRAS:-base}"
WANT="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "== installing the project${EXTRAS:+ with extras [$EXTRAS]} (first run only)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  spec="$ROOT"; [ -n "$EXTRAS" ] && spec="$ROOT[$EXTRAS]"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec"
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
cd "$ROOT"
