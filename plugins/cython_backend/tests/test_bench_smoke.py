"""bench/dispatch.py keeps working (a tiny run; the figures themselves are not checked here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "dispatch.py"


@pytest.mark.skipif(not BENCH.exists(), reason="bench/dispatch.py is not in this checkout")
def test_bench_runs(tmp_path):
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(BENCH), "--number", "300", "--repeat", "1"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "reference torch.add(a, b, out=c)" in out and "16 tensors / add(out=)" in out
    assert "cython target 3 tensors" in out and "cython target out_idx" in out
