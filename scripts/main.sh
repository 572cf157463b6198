#!/usr/bin/env bash
# Command 1 of the README: set up, then compile and run the example kernels on every installed backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/tilelang backends || true
if [ -f examples/run_all.py ]; then
  .venv/bin/python examples/run_all.py
fi
