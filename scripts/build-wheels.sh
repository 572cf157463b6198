#!/usr/bin/env bash
# Build the wheels users install: the core and every plugin under plugins/ (the cython wheel
# carries its compiled extension), plus the wheels of their dependencies at the tested versions
# of constraints.txt (torch: the CPU build), so that
#     pip install --no-index --find-links OUT [--find-links DEPS] tilelang-core tilelang-backend-<name>
# works from the wheel folders alone, offline.
#   usage: bash scripts/build-wheels.sh [OUT [DEPS]]    (default OUT: dist/wheels; DEPS: OUT)
# Builds with .venv's tools (no build isolation: nothing is downloaded to build). Dependency
# wheels already in DEPS are not fetched again, so a kept DEPS folder makes reruns cheap.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-dist/wheels}")
DEPS=$(realpath -m "${2:-$OUT}")
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT" "$DEPS"
pip() { "$PY" -m pip --disable-pip-version-check -qq "$@"; }
projects=(. plugins/*_backend)
pip wheel --no-deps --no-build-isolation -w "$OUT" "${projects[@]}"
names=()
for wheel in "$OUT"/tilelang*.whl; do
  name=$(basename "$wheel"); names+=("${name%%-*}")
done
# The dependency closure of the project wheels; only-binary: no source builds, -c: torch==2.13.0
# (the CPU wheel, so no nvidia-* packages come along).
pip download -d "$DEPS" -c constraints.txt --only-binary=:all: --find-links "$OUT" "${names[@]}"
if [ "$DEPS" != "$OUT" ]; then
  rm -f "$DEPS"/tilelang*.whl  # the project's own wheels live in OUT only (never a stale copy)
fi
ls "$OUT"/tilelang*.whl
