"""Every float16 and bfloat16 operation rounds to its type (lowering/float16_rounding.py,
lowering/bfloat16_rounding.py).

Silent wrong results found by differential fuzzing, on the CPU pairs:

- float16 on target ``c``: GCC keeps ``_Float16`` arithmetic in float (excess precision), so
  ``T.trunc(X[i] * T.float16(1.1))`` with ``X = 10`` gave 10 (torch and llvm: the float16 product
  is 11.0) and ``(a * b + c) / d`` was rounded once; on ``llvm`` TVM wrote a float16 ``a * b + c``
  as ``llvm.fmuladd`` (one rounding where the CPU has a float16 fma; not on this x86-64);
- bfloat16 everywhere: ``T.cast(T.cast(x, "bfloat16"), "float32")`` returned ``x``, a chain of
  bfloat16 operations was rounded only where it was stored, constants were not rounded (nor
  ``T.float16(v)``/``T.bfloat16(v)`` next to float32 operands), and a NaN whose payload lies in
  the low bits was stored as an infinity;
- a bfloat16 scalar parameter did not lower at all.

The kernels run on every CPU pair (ctypes declares no 16-bit float dtypes and refuses them), with
static and dynamic sizes, and must equal torch's results bit for bit (torch rounds every
operation), or an exact rational reference where torch rounds twice (float64 and integer
values to bfloat16). CUDA sources before sm_80 (bfloat16 computed in float32) are compiled with
nvcc; sm_80 computes bfloat16 natively and keeps its conversions.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import struct
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import BackendCapabilityError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402
from nvrtc_toolchain import nvrtc_available  # noqa: E402

NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)
BLOCK = 64
SIZES = [pytest.param(1024, id="static"), pytest.param(None, id="dynamic")]
DYNAMIC_N = 1000  # not a multiple of the block: the guarded last block runs too
ROWS = 5


def _refused_by_ctypes(backend: str) -> None:
    if backend == "ctypes":
        pytest.skip("ctypes declares no 16-bit float dtypes (checked in test_a_bfloat16_scalar_parameter_lowers)")


def _elementwise(n, dtype: str):
    """Rows of float16/bfloat16 arithmetic whose intermediates must round to ``dtype``."""
    size = n if n is not None else T.dynamic("n")
    c11 = getattr(T, dtype)(1.1)

    @T.prim_func
    def narrow_ops(A: T.Tensor((size,), dtype), B: T.Tensor((size,), dtype), C: T.Tensor((size,), dtype),
                   D: T.Tensor((size,), dtype), Z: T.Tensor((ROWS, size), dtype)):
        with T.Kernel(T.ceildiv(size, BLOCK), threads=BLOCK) as bx:
            for j in T.Parallel(BLOCK):
                i = bx * BLOCK + j
                if i < size:
                    Z[0, i] = T.trunc(A[i] * c11)
                    Z[1, i] = (A[i] * B[i] + C[i]) / D[i]
                    Z[2, i] = A[i] * B[i] * C[i] - D[i]
                    Z[3, i] = T.cast(T.cast(A[i] * B[i], "float32") + T.cast(C[i] - D[i], "float32"), dtype)
                    Z[4, i] = T.max(A[i] * B[i], C[i] * D[i]) + A[i]

    return narrow_ops


def _per_op_reference(a, b, c, d, dtype):
    """torch's results: every operation rounds to ``dtype``."""
    c11 = torch.tensor(1.1, dtype=dtype)
    return torch.stack([
        torch.trunc(a * c11),
        (a * b + c) / d,
        a * b * c - d,
        ((a * b).float() + (c - d).float()).to(dtype),
        torch.maximum(a * b, c * d) + a,
    ])


def _with_max_nans_taken(z, want, a, b, c, d):
    """``want`` with row 4 taken from ``z`` where ``T.max`` had a NaN operand: ``T.max`` of a NaN
    is the NaN or the other operand depending on the target (a C select, LLVM's ``maxnum``)."""
    nan = (a * b).isnan() | (c * d).isnan()
    want = want.clone()
    want[4][nan] = z[4][nan]
    return want


def _bit_mismatches(got, want):
    """Per row, the elements whose bits differ (two NaNs are equal)."""
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    return (~same).sum(dim=-1).tolist()


def _operands(n, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    a, b, c, d = (torch.randn(n, generator=gen).mul(8).to(dtype) for _ in range(4))
    a[0], b[0], c[0], d[0] = 10.0, 3.0, 2.0, 7.0  # the fuzzer's case: float16 10 * 1.1 is 11.0
    a[1], b[1], c[1], d[1] = 15.25, 19.875, 11.375, 1.0  # bfloat16 a * b * c: 3456, rounded once 3440
    inf, nan = math.inf, math.nan
    specials = [(inf, 0.0, 1.0, 1.0), (inf, 1.0, -inf, 2.0), (0.0, 5.0, 0.0, 0.0), (nan, 1.0, 2.0, 3.0),
                (1.0, -nan, inf, -inf), (-inf, -inf, inf, 0.5)]  # NaN made and propagated on the way
    for k, values in enumerate(specials, start=2):
        a[k], b[k], c[k], d[k] = values
    return a, b, c, d


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype,seed,spot", [("float16", 1, ((0, 0), 11.0)), ("bfloat16", 2, ((2, 1), 3456.0))])
def test_16bit_operations_round_after_each_operation(backend, target, n, dtype, seed, spot):
    _refused_by_ctypes(backend)
    kernel = tilelang.compile(_elementwise(n, dtype), target=target, execution_backend=backend)
    size = n or DYNAMIC_N
    tdt = getattr(torch, dtype)
    a, b, c, d = _operands(size, tdt, seed=seed)
    z = torch.zeros(ROWS, size, dtype=tdt)
    kernel(a, b, c, d, z)
    want = _with_max_nans_taken(z, _per_op_reference(a, b, c, d, tdt), a, b, c, d)
    (row, column), value = spot  # the fuzzer's case: 11.0 (float16 product), 3456 (bfloat16 chain)
    assert z[row, column].item() == value
    assert _bit_mismatches(z, want) == [0] * ROWS


@pytest.mark.parametrize("flags", [["-fexcess-precision=standard"], ["-std=c11", "-fexcess-precision=fast"], ["-O0"]],
                         ids=["standard", "c11-fast", "O0"])
def test_float16_rounds_under_every_excess_precision_mode(flags):
    kernel = tilelang.compile(_elementwise(1024, "float16"), target="c", execution_backend="cython",
                              compile_flags=flags)
    a, b, c, d = _operands(1024, torch.float16, seed=3)
    z = torch.zeros(ROWS, 1024, dtype=torch.float16)
    kernel(a, b, c, d, z)
    want = _with_max_nans_taken(z, _per_op_reference(a, b, c, d, torch.float16), a, b, c, d)
    assert _bit_mismatches(z, want) == [0] * ROWS


def test_the_sources_round_each_float16_operation():
    source = tilelang.lower(_elementwise(1024, "float16"), target="c").kernel_source
    assert "(half)(((float)A_ptr[" in source, source
    assert "(half)1.099609e+00f" in source  # T.float16(1.1), a float16 value, printed exactly
    # llvm: no fused float16 a * b + c (one rounding where the CPU has a float16 fma), plain half ops
    ir = tilelang.lower(_elementwise(1024, "float16"), target="llvm", consumes=["runtime_module"]).runtime_source
    assert "fmuladd" not in ir and re.search(r"fmul <\d+ x half>", ir)


# ----------------------------------------------------------------------------------------------
# exact references: the nearest float16 / bfloat16 of a rational, ties to even
# ----------------------------------------------------------------------------------------------


def _nearest(value: float, bits: int, min_exp: int, max_exp: int) -> float:
    """``value`` rounded once, exactly, to a binary format with ``bits`` significant bits and
    normal exponents ``min_exp..max_exp`` (subnormals below, an infinity from the midpoint past
    the largest finite value on)."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return value
    _, e = math.frexp(abs(value))  # 2**(e - 1) <= abs(value) < 2**e
    step = Fraction(2) ** max(e - bits, min_exp - bits + 1)
    units = abs(Fraction(value)) / step
    low = math.floor(units)
    up = units - low > Fraction(1, 2) or (units - low == Fraction(1, 2) and low % 2 == 1)
    result = (low + up) * step
    return math.copysign(math.inf if result >= 2 ** (max_exp + 1) else float(result), value)


def bf16_nearest(value: float) -> float:
    """The bfloat16 nearest to ``value`` (one rounding)."""
    return _nearest(value, 8, -126, 127)


def f16_nearest(value: float) -> float:
    """The float16 nearest to ``value`` (one rounding)."""
    return _nearest(value, 11, -14, 15)


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def test_the_exact_references_agree_with_torch_on_float32_values():
    values = np.random.default_rng(4).standard_normal(2000).astype(np.float32) * np.float32(1e3)
    values = list(map(float, values)) + [_f32(0x00000001), _f32(0x007FFFFF), _f32(0x7F7FFFFF), 1.0 + 2 ** -8]
    t = torch.tensor(values, dtype=torch.float32)
    assert [bf16_nearest(v) for v in values] == t.bfloat16().float().tolist()
    assert [f16_nearest(v) for v in values] == t.half().float().tolist()


SPECIAL_F32 = [0x3F800000 + 0x8000, 0x3F800000 + 0x18000, 0x3F800001 + 0x8000, 0x7F7FFFFF, 0x7F7F7FFF,
               0x00000001, 0x00008000, 0x00018000, 0x80018000, 0x7F800000, 0xFF800000, 0x80000000]
NAN_F32 = [0x7F800001, 0x7FC00000, 0xFFFFFFFF, 0xFF800001, 0x7F807FFF]


def _bf16_casts(n):
    size = n if n is not None else T.dynamic("n")

    @T.prim_func
    def bf16_casts(X: T.Tensor((size,), "float32"), Xd: T.Tensor((size,), "float64"), Xi: T.Tensor((size,), "int32"),
                   Z: T.Tensor((5, size), "float32"), W: T.Tensor((size,), "bfloat16")):
        with T.Kernel(T.ceildiv(size, BLOCK), threads=BLOCK) as bx:
            for j in T.Parallel(BLOCK):
                i = bx * BLOCK + j
                if i < size:
                    Z[0, i] = T.cast(T.cast(X[i], "bfloat16"), "float32")
                    Z[1, i] = T.cast(T.cast(Xd[i], "bfloat16"), "float32")
                    Z[2, i] = T.cast(T.cast(Xi[i], "bfloat16"), "float32")
                    Z[3, i] = T.cast(T.cast(X[i], "bfloat16") * T.bfloat16(1.1), "float32")
                    Z[4, i] = X[i] * T.bfloat16(1.1)  # a float32 product with the bfloat16 1.1015625
                    W[i] = T.cast(X[i], "bfloat16")

    return bf16_casts


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_cast_to_bfloat16_rounds_once_to_nearest_even(backend, target, n):
    _refused_by_ctypes(backend)
    size = n or DYNAMIC_N
    rng = np.random.default_rng(5)
    bits = np.concatenate([np.array(SPECIAL_F32 + NAN_F32, dtype=np.uint32),
                           rng.standard_normal(size).astype(np.float32).view(np.uint32)])[:size]
    x = torch.from_numpy(bits.view(np.float32).copy())
    # float64 values just off bfloat16 midpoints (rounded twice through float32 they land on the midpoint)
    wide = [1.0 + 2 ** -8 + 2 ** -30, 1.0 + 2 ** -8, -(3.0 + 2 ** -7 + 2 ** -40), 2.0 ** -130 * (1 + 2 ** -30)]
    xd = torch.from_numpy(np.concatenate([wide, rng.standard_normal(size) * 1e3])[:size])
    ints = [257, 2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 31 - 1, -(2 ** 31)]
    xi = torch.from_numpy(np.concatenate([ints, rng.integers(-2 ** 31, 2 ** 31, size)]).astype(np.int32)[:size])
    kernel = tilelang.compile(_bf16_casts(n), target=target, execution_backend=backend)
    z = torch.zeros(5, size)
    w = torch.zeros(size, dtype=torch.bfloat16)
    kernel(x, xd, xi, z, w)

    def check(row, inputs, got):
        for value, out in zip(inputs, got):
            if math.isnan(value):
                assert math.isnan(out), (row, value, out)
            else:
                assert out == bf16_nearest(value), (row, value, out, bf16_nearest(value))

    values = x.tolist()
    check("cast round trip", values, z[0].tolist())
    check("stored", values, w.float().tolist())
    check("float64", xd.tolist(), z[1].tolist())
    check("int32", [float(v) for v in xi.tolist()], z[2].tolist())
    c11 = bf16_nearest(1.1)
    check("constant", [bf16_nearest(v) * c11 for v in values], z[3].tolist())
    torch.testing.assert_close(z[4], x * torch.tensor(1.1, dtype=torch.bfloat16).float(), rtol=0, atol=0,
                               equal_nan=True)
    assert z[1, 0].item() == 1.0078125 and z[2, 1].item() == 16908288.0


def test_16bit_constants_are_values_of_their_type():
    # TVM keeps the double, and folds X_f32 * T.bfloat16(1.1) into a product with 1.1 when parsing
    assert float(T.float16(1.1).value) == 1.099609375 == f16_nearest(1.1)
    assert float(T.bfloat16(1.1).value) == 1.1015625 == bf16_nearest(1.1)
    assert float(T.bfloat16(3.4e38).value) == math.inf and math.isnan(float(T.bfloat16(math.nan).value))
    assert float(T.float32(1.1).value) == 1.1  # other dtypes keep what they are given
    x = T.float32()
    assert float((x * T.bfloat16(1.1)).b.value) == 1.1015625


def test_float16_constants_round_once():
    value = 1.0 + 2 ** -11 + 2 ** -30  # seven digits (TVM's printing) put it on a float16 midpoint

    @T.prim_func
    def scaled(X: T.Tensor((4,), "float16"), Z: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=4) as _:
            for i in T.Parallel(4):
                Z[i] = X[i] * T.float16(value)

    for backend, target in (("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")):
        kernel = tilelang.compile(scaled, target=target, execution_backend=backend)
        z = torch.zeros(4, dtype=torch.float16)
        kernel(torch.ones(4, dtype=torch.float16), z)
        assert z.tolist() == [f16_nearest(value)] * 4 == [1.0009765625] * 4, (backend, target)


# ----------------------------------------------------------------------------------------------
# scalar parameters
# ----------------------------------------------------------------------------------------------


def _scalar_kernels():
    @T.prim_func
    def unused(X: T.Tensor((4,), "float32"), s: T.bfloat16, Z: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                Z[i] = X[i] + 1.0

    @T.prim_func
    def used(X: T.Tensor((4,), "bfloat16"), s: T.bfloat16, h: T.float16, Z: T.Tensor((3, 4), "float32"),
             W: T.Tensor((4,), "bfloat16")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                Z[0, i] = T.cast(s, "float32")
                Z[1, i] = T.cast(h, "float32")
                Z[2, i] = T.cast(X[i] * s, "float32")
                W[i] = X[i] * s * s

    return unused, used


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_bfloat16_scalar_parameter_lowers(backend, target):
    unused, used = _scalar_kernels()
    if backend == "ctypes":  # its declared dtypes have no 16-bit floats: refused before lowering
        for func in (unused, used):
            with pytest.raises(BackendCapabilityError, match="is a bfloat16 (scalar|tensor)"):
                tilelang.compile(func, target=target, execution_backend=backend)
        return
    kernel = tilelang.compile(unused, target=target, execution_backend=backend)
    z = torch.zeros(4)
    kernel(torch.ones(4), 2.0, z)
    assert z.tolist() == [2.0] * 4

    kernel = tilelang.compile(used, target=target, execution_backend=backend)
    x = torch.tensor([1.0, 3.0, -7.5, 100.0], dtype=torch.bfloat16)
    z, w = torch.zeros(3, 4), torch.zeros(4, dtype=torch.bfloat16)
    s_value, h_value = 1.1, 1.001
    kernel(x, s_value, h_value, z, w)
    s16 = torch.tensor(s_value, dtype=torch.bfloat16)
    assert z[0].tolist() == [bf16_nearest(s_value)] * 4
    assert z[1].tolist() == [f16_nearest(h_value)] * 4
    assert z[2].tolist() == (x * s16).float().tolist()
    assert w.view(torch.int16).tolist() == (x * s16 * s16).view(torch.int16).tolist()


# ----------------------------------------------------------------------------------------------
# CUDA: bfloat16 in float32 before sm_80, native from sm_80
# ----------------------------------------------------------------------------------------------


def _cuda_kernel():
    @T.prim_func
    def cuda_bf16(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "bfloat16"), Z: T.Tensor((128,), "float32"),
                  W: T.Tensor((128,), "bfloat16"), Xd: T.Tensor((128,), "float64")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                Z[i] = T.cast(T.cast(X[i], "bfloat16"), "float32") + T.cast(T.cast(Xd[i], "bfloat16"), "float32")
                W[i] = Y[i] * Y[i] * Y[i] + T.bfloat16(1.1)

    return cuda_bf16


def test_cuda_before_sm80_rounds_every_bfloat16_value():
    source = tilelang.lower(_cuda_kernel(), target="cuda -arch=sm_75").kernel_source
    assert "Z_ptr[((int)threadIdx.x)] = (tl_bf16_round(X_ptr[((int)threadIdx.x)])" in source, source
    assert "tl_bf16_round_f64(Xd_ptr[" in source
    assert source.count("tl_bf16_round((tl_bf16_round((tl_bf16_round(") == 2  # three operations, each rounded
    assert "0x1.1ap+0f" in source  # T.bfloat16(1.1) is 1.1015625
    assert source.count("static __device__ __forceinline__ float tl_bf16_round(") == 1
    native = tilelang.lower(_cuda_kernel(), target="cuda -arch=sm_80").kernel_source
    assert "((float)((nv_bfloat16)X_ptr[((int)threadIdx.x)]))" in native  # the GPU rounds: left alone
    assert "tl_bf16_round" not in native


@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
@pytest.mark.parametrize("backend", [
    pytest.param("cython", marks=pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")),
    pytest.param("nvrtc", marks=pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")),
])
def test_the_cuda_sources_compile(backend, arch):
    kernel = tilelang.compile(_cuda_kernel(), target=f"cuda -arch={arch}", execution_backend=backend)
    assert ("tl_bf16_round(" in kernel.get_kernel_source()) == (arch == "sm_75")


def _row_sums(m, n, dtype):
    @T.prim_func
    def row_sums(A: T.Tensor((m, n), dtype), S: T.Tensor((m,), dtype), S2: T.Tensor((m,), dtype), Q: T.Tensor((m,), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((m, n), dtype)
            acc = T.alloc_fragment((m,), dtype)
            T.copy(A, tile)
            T.reduce_sum(tile, acc, dim=1)
            T.copy(acc, S)
            T.reduce_sum(tile, acc, dim=1, clear=False)  # continues from the rounded first sum
            T.copy(acc, S2)
            T.reduce_abssum(tile, acc, dim=1)
            T.copy(acc, Q)

    return row_sums


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_sums_accumulate_in_float32_and_round_once(backend, target, dtype):
    """T.reduce_sum/abssum into a 16-bit tile: the sum of 128 values rounded once, as torch's sum
    (rounded after every addition, a bfloat16 row sum was off by up to 1.8x its size)."""
    _refused_by_ctypes(backend)
    m, n = 16, 128
    kernel = tilelang.compile(_row_sums(m, n, dtype), target=target, execution_backend=backend)
    tdt = getattr(torch, dtype)
    a = torch.randn(m, n, generator=torch.Generator().manual_seed(4)).to(tdt)
    s, s2, q = (torch.zeros(m, dtype=tdt) for _ in range(3))
    kernel(a, s, s2, q)
    exact = a.double().sum(1)
    first = exact.to(tdt)  # one rounding of the float32 sum of 16-bit values: exact here up to 2**-24
    assert torch.equal(s, first), (s, first)
    assert torch.equal(s2, (first.double() + exact).to(tdt))
    assert torch.equal(q, a.double().abs().sum(1).to(tdt))
