"""Comparisons of two dtypes in kernels (language/mixed_comparisons.py).

``if bx * 64 + i < m:`` with an int16 scalar parameter ``m`` (used in the grid too,
``T.Kernel(T.ceildiv(m, 64))``) stopped the kernel's definition with TVM's "mismatched types.
int32 vs. int16", on every target. Comparisons now match their operands' dtypes as arithmetic
does. The kernels run on the CPU targets with both backends; the CUDA one is compiled with nvcc
and run on the GPU emulator of test_tileops_cuda.py.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_mixed_comparisons")

N = 40000
CPU = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


def _int16_grid():
    @T.prim_func
    def fill(A: T.Tensor((N,), "float32"), m: T.int16):
        with T.Kernel(T.ceildiv(m, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < m:
                    A[bx * 64 + i] = 1.0

    return fill


@pytest.mark.parametrize("backend,target", CPU)
@pytest.mark.parametrize("m", [100, 32767, 0, -3])
def test_an_int16_scalar_in_the_grid_and_a_comparison_on_cpu(backend, target, m):
    kernel = tilelang.compile(_int16_grid(), target=target, execution_backend=backend)
    a = torch.zeros(N)
    kernel(a, m)
    assert a.sum().item() == max(m, 0) and a[: max(m, 0)].eq(1).all()


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_an_int16_scalar_in_the_grid_compiles_with_nvcc(tmp_path):
    CU.compile_translation_units({"int16_grid": lower(_int16_grid(), target="cuda")}, tmp_path)


@CU.emulator
@pytest.mark.parametrize("m", [100, 32767])
def test_emulated_gpu_an_int16_scalar_in_the_grid(tmp_path, m):
    art = lower(_int16_grid(), target="cuda")
    run = CU._emulated(art, tmp_path)
    a = torch.zeros(N)
    run(a, m)
    assert a.sum().item() == m and a[:m].eq(1).all()


def _comparisons():
    """Y[k, i] = 1 where the k-th comparison of two dtypes holds."""

    @T.prim_func
    def compare(I16: T.Tensor((8,), "int16"), I32: T.Tensor((8,), "int32"), U32: T.Tensor((8,), "uint32"),
                F16: T.Tensor((8,), "float16"), F32: T.Tensor((8,), "float32"), Y: T.Tensor((6, 8), "int32")):
        with T.Kernel(1, threads=8) as _:
            for i in T.Parallel(8):
                Y[0, i] = T.if_then_else(I32[i] < I16[i], 1, 0)
                Y[1, i] = T.if_then_else(I16[i] >= I32[i], 1, 0)
                Y[2, i] = T.if_then_else(F16[i] == F32[i], 1, 0)
                Y[3, i] = T.if_then_else(F32[i] > F16[i], 1, 0)
                Y[4, i] = T.if_then_else(I32[i] != F32[i], 1, 0)
                Y[5, i] = T.if_then_else(U32[i] > I32[i], 1, 0)  # C's rule: the int32 becomes uint32

    return compare


@pytest.mark.parametrize("backend,target", CPU)
def test_comparisons_of_two_dtypes_match_torch(backend, target):
    kernel = tilelang.compile(_comparisons(), target=target, execution_backend=backend)
    i16 = torch.tensor([-30000, -1, 0, 1, 5, 300, 32767, -7], dtype=torch.int16)
    i32 = torch.tensor([-30000, 0, 0, -70000, 6, 299, 40000, -7], dtype=torch.int32)
    u32 = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8], dtype=torch.uint32)
    f16 = torch.tensor([0.1, 1.5, -2.0, 65504.0, 0.0, -0.0, 3.0, 1e-4], dtype=torch.float16)
    f32 = torch.tensor([0.1, 1.5, -2.0, 65504.0, -0.0, 0.0, 3.0000002, 1e-4], dtype=torch.float32)
    y = torch.zeros(6, 8, dtype=torch.int32)
    kernel(i16, i32, u32, f16, f32, y)
    i32_as_u32 = i32.to(torch.int64) % (1 << 32)
    expected = torch.stack([
        i32 < i16.to(torch.int32),
        i16.to(torch.int32) >= i32,
        f16.to(torch.float32) == f32,
        f32 > f16.to(torch.float32),
        i32.to(torch.float32) != f32,
        u32.to(torch.int64) > i32_as_u32,
    ]).to(torch.int32)
    torch.testing.assert_close(y, expected)


def _with_numbers(dtype):
    @T.prim_func
    def compare(A: T.Tensor((4,), dtype), B: T.Tensor((7, 4), "int32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                B[0, i] = T.Select(A[i] < 70000.0, 1, 0)
                B[1, i] = T.Select(A[i] <= 70000, 1, 0)
                B[2, i] = T.Select(A[i] > -1e39, 1, 0)
                B[3, i] = T.Select(A[i] == 1e300, 1, 0)
                B[4, i] = T.Select(1e300 != A[i], 1, 0)
                B[5, i] = T.Select(A[i] <= 7, 1, 0)
                B[6, i] = T.Select(A[i] < 0.1, 1, 0)

    return compare


@pytest.mark.parametrize("backend,target", CPU)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_float_compared_with_python_numbers(backend, target, dtype):
    """A number the operand's dtype cannot hold (``A_f16 < 70000.0``, ``F_f32 == 1e300``) stopped
    with "Literal value ... exceeds maximum of float16"; it is compared exactly now. A Python int
    beside a bfloat16 (``A_bf16 <= 7``) stopped with "'int' object has no attribute 'expr_ty'".
    Numbers in range are constants of the operand's dtype, as in torch (``A < 0.1``)."""
    kernel = tilelang.compile(_with_numbers(dtype), target=target, execution_backend=backend)
    a = torch.tensor([1.0, float("inf"), -float("inf"), 0.0999755859375], dtype=getattr(torch, dtype))
    b = torch.zeros(7, 4, dtype=torch.int32)
    kernel(a, b)
    x = a.double()
    want = torch.stack([x < 70000.0, x <= 70000, x > -1e39, x == 1e300, x != 1e300, a <= 7, a < 0.1]).int()
    assert b.tolist() == want.tolist()
