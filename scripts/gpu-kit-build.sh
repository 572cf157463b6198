#!/usr/bin/env bash
# Build the GPU check kit into DIR on this machine (no GPU needed): every CUDA kernel of the
# examples, the tile-operator tests and the dispatch bench, for each installed CUDA backend and for
# sm_90 and sm_80, exported with their inputs' seeds and expected outputs, plus the wheels the run
# needs. Run it on a GPU machine with scripts/gpu-kit-run.sh DIR (see docs/gpu.md).
#   usage: bash scripts/gpu-kit-build.sh DIR [--reduced] [--only IDS] [--backends B,..] [--archs sm_90,sm_80]
#                                            [--jobs N] [--pythons 3.12] [--python312 PY] [--cpu-standin]
#                                            [--no-wheels] [--no-cpu-check] [--max-mib 48]
# Exit status: 0 complete, 1 written with failures (see DIR/MANIFEST.json) or over 48 MiB, 2 not written.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
if [ ! -x "$PY" ]; then
  echo "gpu-kit-build: $PY not found; run bash scripts/setup.sh first (or set PYTHON)" >&2
  exit 2
fi
exec "$PY" "$ROOT/scripts/gpu_kit/build_kit.py" "$@"
