# Sourced by scripts/_env.sh (and by tests/integration/test_setup_scripts.py): decides whether a virtual environment
# can be used. Needs ROOT (the checkout, physical path) and WANT_VERSION (e.g. "3.11") to be set.

# _msh_venv_problem VENV: why the environment at VENV cannot be used (empty when it can, or when there is none yet).
_msh_venv_problem() {
  local venv="$1" real version first
  [ -e "$venv" ] || return 0
  if [ ! -f "$venv/pyvenv.cfg" ]; then echo "it has no pyvenv.cfg"; return 0; fi
  if ! version="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"; then
    echo "its python does not run (made on another machine, or its base Python was removed)"; return 0
  fi
  if [ "$version" != "$WANT_VERSION" ]; then
    echo "it was made by Python $version, not $WANT_VERSION ($PYTHON)"; return 0
  fi
  real="$(cd "$venv" && pwd -P)"
  if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "it has no working pip (its creation was interrupted)"; return 0
  fi
  first="$(head -n 1 "$venv/bin/pip" 2>/dev/null || true)"
  case "$first" in
    "#!$real/bin/python"* | "#!$venv/bin/python"*) ;;
    *) echo "it was moved or copied from another folder (bin/pip starts with '$first')"; return 0 ;;
  esac
  if [ -n "$(ls "$venv"/.msh-installed-* 2>/dev/null)" ]; then
    local where
    where="$(cd / && "$venv/bin/python" -c 'import msh, os; print(os.path.dirname(os.path.dirname(os.path.realpath(msh.__file__))))' 2>/dev/null || true)"
    if [ "$where" != "$ROOT" ]; then
      echo "its installed project is ${where:-missing}, not this checkout ($ROOT)"; return 0
    fi
  fi
  return 0
}

