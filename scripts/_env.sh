# Shared by scripts/demo and scripts/test: make sure a usable virtual environment exists, with the project
# installed (editable) from this checkout, and rebuild it when it is not usable.
# Usage: source scripts/_env.sh EXTRAS   (EXTRAS e.g. "" or "dev,analytics")
#
# A .venv is rebuilt from scratch when it cannot be trusted:
#   - its python does not run (its base interpreter is gone: made on another machine or by a removed Python),
#   - it was made by another Python version than $PYTHON,
#   - it was moved or copied from another folder (its scripts name the old folder in their #! line, and its
#     editable install points at the old checkout, so tests would run the old code),
#   - its creation or the installation into it was interrupted (no pip, or the project does not import).
# The project is (re)installed when pyproject.toml changed since the last complete installation.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VENV="${MSH_VENV:-$ROOT/.venv}"
EXTRAS="${1:-}"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "error: Python 3.11 or newer is needed as '$PYTHON' (set PYTHON=/path/to/python3.11)" >&2
  exit 2
fi
WANT_VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

source "$ROOT/scripts/_venv_check.sh"

PROBLEM="$(_msh_venv_problem "$VENV")"
if [ -n "$PROBLEM" ]; then
  if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ] && [ -n "$(ls -A "$VENV" 2>/dev/null)" ]; then
    echo "error: $VENV exists but is not a virtual environment ($PROBLEM); move it away or set MSH_VENV" >&2
    exit 2
  fi
  echo "== $VENV cannot be used: $PROBLEM; rebuilding it"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating virtual environment in $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# lxml and xmlsec must run on one libxml2 (docs/design.md §7): pyproject.toml pins a pair whose wheels carry the
# same one. Where they do not load together (no wheel for this platform, so xmlsec was built against the
# system libxml2; or a pair that disagrees), build both from source against the system libxml2 (needs
# libxml2-dev, libxmlsec1-dev, libxslt1-dev, pkg-config: installed with apt-get when run as root).
_msh_one_libxml2() {
  if "$VENV/bin/python" -c 'import xmlsec' 2>/dev/null; then return 0; fi
  echo "== lxml and xmlsec do not load together; building both against the system libxml2 (several minutes)"
  if ! pkg-config --exists libxml-2.0 xmlsec1 2>/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    local packages="libxml2-dev libxmlsec1-dev libxslt1-dev pkg-config"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $packages >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $packages >/dev/null 2>&1; } ||
      true
  fi
  local versions
  versions="$("$VENV/bin/python" -c 'import importlib.metadata as m; print("lxml==%s xmlsec==%s" % (m.version("lxml"), m.version("xmlsec")))')"
  # shellcheck disable=SC2086 # two requirement words
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    --no-binary lxml,xmlsec $versions
  if ! "$VENV/bin/python" -c 'import xmlsec' 2>/dev/null; then
    echo "error: lxml and xmlsec still do not load together:" >&2
    "$VENV/bin/python" -c 'import xmlsec' >&2 || true
    echo "install libxml2-dev, libxmlsec1-dev, libxslt1-dev and pkg-config, then run this again" >&2
    exit 2
  fi
}

STAMP="$VENV/.msh-installed-${EXTRAS:-base}"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "== installing the project${EXTRAS:+ with extras [$EXTRAS]} (first run only)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  spec="$ROOT"; [ -n "$EXTRAS" ] && spec="$ROOT[$EXTRAS]"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec"
  _msh_one_libxml2
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
cd "$ROOT"
