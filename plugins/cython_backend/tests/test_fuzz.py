"""Thousands of wrong calls, in a subprocess: it must exit 0 (no crash, only TypeError/ValueError)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_fuzz_wrong_calls_in_subprocess():
    script = os.path.join(os.path.dirname(__file__), "fuzz_calls.py")
    env = {**os.environ, "TL_FUZZ_EXAMPLES": os.environ.get("TL_FUZZ_EXAMPLES", "1500")}
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f"exit code {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert "no crash" in proc.stdout
