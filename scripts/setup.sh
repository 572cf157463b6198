#!/usr/bin/env bash
# Create .venv (if missing) and install the core plus every backend plugin under plugins/,
# with the tested versions from constraints.txt. Safe to run again: it only re-installs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@"; }
pip install -q --upgrade pip setuptools wheel
# Build tools first: plugins build without isolation, against these exact versions.
pip install -q -c constraints.txt cython torch apache-tvm pluggy pydantic importlib-metadata tqdm pytest hypothesis distributed
pip install -q -c constraints.txt -e .
for plugin in plugins/*/; do
  [ -f "$plugin/pyproject.toml" ] || continue
  pip install -q -c constraints.txt --no-build-isolation "$plugin"
done
# pip byte-compiles what it installs from a wheel, but not an editable install: compile the core
# here so a fresh process does not recompile it from source on every start (that showed up as
# ~40 ms in bench/cache.py wherever PYTHONDONTWRITEBYTECODE is set).
.venv/bin/python -m compileall -q tilelang_core tilelang >/dev/null
