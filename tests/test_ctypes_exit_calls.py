"""A ctypes kernel still alive at interpreter exit (plugins/ctypes_backend plugin.py,
``_remove_live_folders``; here, not in the plugin, whose own tests stay a short check of its folders).

Before, the finalizer of every live kernel ran at exit: it unloaded the library (``dlclose``),
so an ``atexit`` handler or a ``__del__`` that called the kernel afterwards jumped into unmapped
memory (exit status -11). Now the library stays mapped until the process ends, and the kernel's
folder is still removed. Each case runs in a fresh Python: a crash fails the test."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import atexit, warnings

    state = {}

    @atexit.register  # registered before the backend's own handler: it runs after it
    def call_once_more():
        print("at exit:", state["kernel"](state["a"])[0].item(), flush=True)

    import torch
    import tilelang
    import tilelang.language as T

    warnings.simplefilter("ignore", DeprecationWarning)

    @T.prim_func
    def double(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                C[bx * 32 + i] = A[bx * 32 + i] * 2.0

    state["kernel"] = tilelang.compile(double, out_idx=-1, target="c", execution_backend="ctypes")
    state["a"] = torch.ones(64)
""")


def test_a_live_ctypes_kernel_can_be_called_at_exit_and_its_folder_is_removed(tmp_path):
    pytest.importorskip("tilelang_backend_ctypes", reason="the retired ctypes backend is not installed")
    script = tmp_path / "exit_call.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TILELANG_DISABLE_CACHE": "1", "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"exit status {proc.returncode} (-11: a call into the unloaded library):\n{proc.stdout}{proc.stderr[-2000:]}"
    assert "at exit: 2.0" in proc.stdout, proc.stdout
    left = [p.name for p in tmp_path.iterdir() if p.name != script.name]
    assert not left, f"kernel folders left in TMPDIR: {left}"
