"""``T.unroll`` / ``T.Unroll`` over a run-time extent (lowering/dynamic_unroll.py).

TVM's UnrollLoop stopped on them ("Cannot unroll non-constant loop"). They now run on the three
CPU paths against torch, print ``#pragma unroll`` on CUDA (compiled with ``nvcc -c``), and
constant-extent unrolls are still unrolled.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import CYTHON_C, PATHS, compile_on, path_id  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_unroll")


def sums_kernel():
    """Row sums of a run-time number of columns with ``T.unroll``, and of the first 4 with ``T.Unroll``."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def sums(A: T.Tensor((M, N), "float32"), Out: T.Tensor((M, 2), "float32")):
        with T.Kernel(M, threads=32) as bx:
            acc = T.alloc_var("float32")
            acc = 0.0
            for j in T.unroll(N):
                acc = acc + A[bx, j]
            Out[bx, 0] = acc
            head = T.alloc_var("float32")
            head = 0.0
            for j in T.Unroll(4, explicit=True):
                head = head + A[bx, j]
            Out[bx, 1] = head

    return sums


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_run_time_unroll_runs_on_cpu_paths(path):
    kernel = compile_on(sums_kernel(), path)
    for m, n in ((3, 37), (2, 4)):
        a = torch.randn(m, n)
        out = torch.empty(m, 2)
        kernel(a, out)
        torch.testing.assert_close(out[:, 0], a.sum(1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out[:, 1], a[:, :4].sum(1), rtol=1e-5, atol=1e-5)


def test_constant_unroll_is_still_unrolled_on_c():
    source = compile_on(sums_kernel(), CYTHON_C).get_kernel_source()
    loops = [line.strip() for line in source.splitlines() if line.strip().startswith("for (int32_t j")]
    assert loops == ["for (int32_t j = 0; j < N; ++j) {"], loops  # the run-time loop only


@pytest.fixture(scope="module")
def cuda_artifact():
    return lower(sums_kernel(), target="cuda")


def test_cuda_prints_a_pragma_unroll_before_the_run_time_loop(cuda_artifact):
    lines = [line.strip() for line in cuda_artifact.device_source.splitlines()]
    loop = next(i for i, line in enumerate(lines) if line.startswith("for (") and "< N" in line)
    assert lines[loop - 1] == "#pragma unroll", lines[loop - 2: loop + 1]


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_compiles_with_nvcc(cuda_artifact, tmp_path):
    CU.compile_translation_units({"sums": cuda_artifact}, tmp_path)


def _long_unroll(n: int):
    @T.prim_func
    def doubled(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.unroll(n):
                A[i] = A[i] * 2

    return doubled


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_very_long_constant_unroll_is_left_to_the_compiler(path):
    """``T.unroll(1 << 20)`` copied its body a million times: minutes of lowering and compiling."""
    from tilelang_core.lowering.dynamic_unroll import MAX_UNROLLED_ITERATIONS

    n = 1 << 20
    kernel = compile_on(_long_unroll(n), path)
    a = torch.randn(n)
    expected = a * 2
    kernel(a)
    assert torch.equal(a, expected)
    source = lower(_long_unroll(n), target="c").device_source
    assert "1048576" in source and len(source) < 50_000  # one loop, not a million statements
    unrolled = lower(_long_unroll(MAX_UNROLLED_ITERATIONS), target="c").device_source
    assert unrolled.count("A_ptr[") >= 2 * MAX_UNROLLED_ITERATIONS  # up to the limit, still copied out


def test_a_very_long_constant_unroll_is_a_pragma_on_cuda():
    lines = [line.strip() for line in lower(_long_unroll(1 << 20), target="cuda").device_source.splitlines()]
    loop = next(i for i, line in enumerate(lines) if line.startswith("for (") and "1048576" in line)
    assert lines[loop - 1] == "#pragma unroll", lines[loop - 2: loop + 1]


def _nested_unroll(n):
    @T.prim_func
    def doubled(A: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.unroll(n):
                for j in T.unroll(n):
                    A[i, j] = A[i, j] * 2

    return doubled


@pytest.mark.parametrize("path", [CYTHON_C], ids=path_id)
def test_nested_unrolls_count_their_copies_together(path):
    """Two nested ``T.unroll(64)``: 4096 copies of the store, under a limit that looked at each
    loop alone (GCC took 25 s to build them, 162 s for two ``T.unroll(128)``). The inner loop is
    copied out; the outer one is left to the compiler."""
    from tilelang_core.lowering.dynamic_unroll import MAX_UNROLLED_ITERATIONS

    n = 64
    assert n < MAX_UNROLLED_ITERATIONS < n * n
    source = lower(_nested_unroll(n), target="c").device_source
    assert n <= source.count("A_ptr[") < 4 * n
    kernel = compile_on(_nested_unroll(n), path)
    a = torch.randn(n, n)
    expected = a * 2
    kernel(a)
    assert torch.equal(a, expected)
    small = lower(_nested_unroll(8), target="c").device_source
    assert small.count("A_ptr[") >= 2 * 8 * 8  # within the limit, both loops are copied out
