#!/usr/bin/env bash
# Run the GPU check kit DIR (made by scripts/gpu-kit-build.sh) on a machine with an NVIDIA GPU, with
# no network: installs from DIR alone into a fresh venv that sees this machine's CUDA torch, loads
# every exported kernel with tilelang.load, runs and checks it on the GPU (results, CUDA graph
# replay), times dispatch against torch.add(out=) and kernels against torch's ops, and writes
# OUT/gpu-kit-report.json and OUT/gpu-kit-report.md. See docs/gpu.md.
#   usage: bash gpu-kit-run.sh DIR [--out OUT] [--full [--wheels WHEELS] [--allow-network]]
#                                  [--python PY] [--budget S] [--keep-work] [--standin-cpu]
# The Python is $PYTHON, else python3: it must import torch (the CUDA build, for a real check).
# Exit status: 0 passed, 1 a check failed, 2 no CUDA device (every kernel loaded, none run),
# 3 the kit could not be installed or read.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-$(command -v python3 || true)}
if [ -z "$PY" ] || ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "gpu-kit-run: no Python 3.10+ found (set PYTHON=/path/to/python, one that imports torch)" >&2
  exit 3
fi
exec "$PY" "$HERE/gpu_kit/run_kit.py" "$@"
