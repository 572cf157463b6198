"""A tvm_ffi CPU kernel called in a child made by ``os.fork`` after the parent ran it on TVM's
thread pool (fork_safety.py). Before, the child waited forever for the parent's pool workers,
which a forked child does not have (``multiprocessing`` with ``fork``, torch ``DataLoader``
workers); now its blocks run serially and give the same result.

Each case runs in a fresh Python with ``TVM_NUM_THREADS=2``, so that TVM's pool has a worker
thread whatever the machine's core count (TVM reads it when the pool starts)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import faulthandler, os, sys
    import torch
    import tilelang
    import tilelang.language as T

    torch.set_num_threads(1)  # torch's own OpenMP regions are not fork-safe (DataLoader workers do the same)

    n, block = 1 << 20, 1024  # large enough for the C entry to launch its blocks on the pool

    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(n // block, threads=128) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2.0

    kernel = tilelang.compile(double, out_idx=-1, target=sys.argv[1], execution_backend="tvm_ffi")
    a = torch.arange(n, dtype=torch.float32)
    assert torch.equal(kernel(a), a * 2)  # the pool starts in the parent
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(30, exit=True)  # a hang ends the child with status 1
        ok = torch.equal(kernel(a + 1), (a + 1) * 2) and torch.equal(kernel(a), a * 2)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
    assert torch.equal(kernel(a), a * 2)  # the parent's pool is untouched
""")


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_forked_child_runs_the_kernel_the_parent_ran_on_tvms_pool(target, tmp_path):
    script = tmp_path / "fork_child.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TVM_NUM_THREADS": "2", "TILELANG_DISABLE_CACHE": "1"}
    proc = subprocess.run([sys.executable, str(script), target], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "child 0" in proc.stdout, f"the child did not give the kernel's result (1: it hung): {proc.stdout}{proc.stderr[-2000:]}"
