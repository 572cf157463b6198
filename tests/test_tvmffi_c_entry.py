"""tvm_ffi on target ``c``: TVM's packed function around the kernel's C entry (lowering/c_runtime.py).

The runtime module runs the C entry every C backend compiles (parallel block loops on TVM's
thread pool, ``#pragma omp simd`` loops, code for this CPU) behind TVM's own argument checks.
Real pipeline, real tvm_ffi plugin, real compiler; the thread-pool tests run in a fresh process
with ``TVM_NUM_THREADS=2`` (TVM reads it when its pool starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.backends import get_registry
from tilelang_core.errors import ArtifactError

pytestmark = pytest.mark.skipif("tvm_ffi" not in get_registry().names(), reason="tvm_ffi backend not installed")

BLOCKS, BLOCK = 7, 16384  # 7 blocks over 2 workers: ranges of 3 and 4 blocks; work over the threshold


def scaled_plus_block(n_blocks=BLOCKS, block=BLOCK):
    @T.prim_func
    def main(A: T.Tensor((n_blocks * block,), T.float32), B: T.Tensor((n_blocks * block,), T.float32)):
        with T.Kernel(n_blocks) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0 + T.cast(bx, T.float32)

    return main


def _expected(a, n_blocks=BLOCKS, block=BLOCK):
    return a * 2 + torch.arange(n_blocks, dtype=torch.float32).repeat_interleave(block)


FRESH_PROCESS = textwrap.dedent(
    """
    import json, os, sys, torch
    sys.path.insert(0, {test_dir!r})
    import tilelang
    from test_tvmffi_c_entry import scaled_plus_block, asserting_kernel, _expected
    threads = lambda: len(os.listdir("/proc/self/task"))
    out = {{}}
    k = tilelang.compile(scaled_plus_block(), target="c", execution_backend="tvm_ffi")
    a = torch.randn(7 * 16384); b = torch.empty_like(a)
    before = threads()
    k(a, b)
    out["threads_added"] = threads() - before
    out["correct"] = bool(torch.equal(b, _expected(a)))
    k2 = tilelang.compile(asserting_kernel(), target="c", execution_backend="tvm_ffi")
    x = torch.ones(7 * 16384); x[-1] = -1.0; y = torch.empty_like(x)
    try:
        k2(x, y)
        out["raised"] = None
    except Exception as exc:
        out["raised"] = [type(exc).__name__, str(exc)]
    x[-1] = 1.0
    k2(x, y)
    out["after_failure"] = bool(torch.equal(y, x + 1))
    print(json.dumps(out))
    """
)


def asserting_kernel(n_blocks=BLOCKS, block=BLOCK):
    @T.prim_func
    def main(X: T.Tensor((n_blocks * block,), T.float32), Y: T.Tensor((n_blocks * block,), T.float32)):
        with T.Kernel(n_blocks) as bx:
            for i in T.serial(block):
                T.device_assert(X[bx * block + i] > 0, "inputs must be positive")
                Y[bx * block + i] = X[bx * block + i] + 1.0

    return main


@pytest.fixture(scope="module")
def fresh_process_result():
    env = dict(os.environ, TVM_NUM_THREADS="2")
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS.format(test_dir=os.path.dirname(os.path.abspath(__file__)))],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tvm_ffi_c_runs_parallel_blocks_on_tvm_thread_pool_workers(fresh_process_result):
    # before: TVM's C host code ran the block loop as a plain for loop, no worker ever started
    assert fresh_process_result["threads_added"] >= 1
    assert fresh_process_result["correct"]


def test_tvm_ffi_c_failed_assertion_in_a_parallel_block_names_it(fresh_process_result):
    kind, text = fresh_process_result["raised"]
    assert kind == "RuntimeError"
    assert "T.device_assert failed at" in text and "inputs must be positive" in text
    assert "test_tvmffi_c_entry.py" in text
    assert fresh_process_result["after_failure"]


def test_tvm_ffi_c_kernel_source_is_the_c_entry_inside_a_packed_function():
    k = tilelang.compile(scaled_plus_block(), target="c", execution_backend="tvm_ffi")
    source = k.get_kernel_source()
    assert "__tvm_ffi_main" in source  # TVM's packed function, with its argument checks
    assert "int32_t main_kernel(" in source and "#pragma omp simd" in source
    assert "TVMBackendParallelLaunch(main_kernel_pool_task" in source
    a = torch.randn(BLOCKS * BLOCK)
    b = torch.empty_like(a)
    k(a, b)
    torch.testing.assert_close(b, _expected(a))
    with pytest.raises(Exception, match="float32"):  # TVM's own dtype check still runs first
        k(a.double(), b.double())


def test_tvm_ffi_c_small_kernel_with_dynamic_size_and_scalar():
    n = T.dynamic("n")

    @T.prim_func
    def axpy(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), alpha: T.float32):
        with T.Kernel(T.ceildiv(n, 64)) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    Y[bx * 64 + i] = alpha * X[bx * 64 + i] + Y[bx * 64 + i]

    k = tilelang.compile(axpy, target="c", execution_backend="tvm_ffi")
    for size in (1, 63, 64, 1000, 70001):
        x, y = torch.randn(size), torch.randn(size)
        expected = 0.5 * x + y
        k(x, y, 0.5)
        torch.testing.assert_close(y, expected)


def test_tvm_ffi_c_kernel_loaded_on_a_stand_in_for_another_cpu_is_refused(tmp_path, monkeypatch):
    k = tilelang.compile(scaled_plus_block(2, 64), target="c", execution_backend="tvm_ffi")
    path = k.export(tmp_path / "exported")
    plans = list(path.rglob("tvmffi_plan.json"))
    assert len(plans) == 1
    from tilelang_core import devices

    assert json.loads(plans[0].read_text())["cpu"] == devices.instruction_set_id()  # -march=native
    a = torch.randn(128)
    b = torch.empty_like(a)
    tilelang.load(path)(a, b)
    torch.testing.assert_close(b, _expected(a, 2, 64))
    # another CPU cannot exist here: its instruction set is a stand-in
    monkeypatch.setattr(devices, "instruction_set_id", lambda: "0" * 16)
    with pytest.raises(ArtifactError, match="built for another CPU"):
        tilelang.load(path)
