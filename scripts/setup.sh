#!/usr/bin/env bash
# Create .venv (if missing) and install the core plus every supported backend plugin under
# plugins/, with the tested versions from constraints.txt. Safe to run again: it only re-installs.
#   --with-retired   also install the retired plugins (those with a RETIRED file: ctypes), which
#                    the test suite checks; the main command leaves them out.
# Quiet: pip reports errors only (-qq), and the last line says what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_RETIRED=0
for arg in "$@"; do
  case "$arg" in
    --with-retired) WITH_RETIRED=1 ;;
    *) echo "usage: bash scripts/setup.sh [--with-retired]" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check -qq "$@"; }
pip install --upgrade pip setuptools wheel
# Build tools first: plugins build without isolation, against these exact versions.
pip install -c constraints.txt cython torch apache-tvm pluggy pydantic importlib-metadata packaging tqdm pytest pytest-xdist hypothesis distributed
pip install -c constraints.txt -e .
installed=()
for plugin in plugins/*/; do
  [ -f "$plugin/pyproject.toml" ] || continue
  if [ -f "$plugin/RETIRED" ] && [ "$WITH_RETIRED" = 0 ]; then
    continue
  fi
  pip install -c constraints.txt --no-build-isolation "$plugin"
  installed+=("$(basename "$plugin")")
done
# pip byte-compiles what it installs from a wheel, but not an editable install: compile the core
# here so a fresh process does not recompile it from source on every start (that showed up as
# ~40 ms in bench/cache.py wherever PYTHONDONTWRITEBYTECODE is set).
.venv/bin/python -m compileall -q tilelang_core tilelang >/dev/null
echo "set up .venv: tilelang-core (editable) and ${installed[*]}"
