#!/usr/bin/env bash
# Command 2 of the README: set up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-retired
exec .venv/bin/python -m pytest "$@"
