"""``%`` and ``//`` of floats, ``T.truncmod`` and ``T.nextafter`` of 16-bit and 8-bit floats, on every target.

Before: ``A[i] % B[i]`` of floats stopped the kernel's definition with TVM's "MatchesCode(kDLInt,
kDLUInt) is false" (every target); ``T.truncmod`` of float16 failed on ``c`` and CUDA, of
bfloat16 on every target, of float8 on CUDA, with bare TVM check failures; ``T.nextafter`` of
float16/bfloat16 failed on CUDA ("Unresolved call") and gave ``x`` itself on the CPU targets;
``A[i] // B[i]`` of floats stopped the definition like ``%`` (now Python's and torch's floor
quotient, checked against ``torch.div(..., rounding_mode="floor")``).
Now ``%`` is Python's floor remainder (language/float_modulo.py), ``truncmod`` C's ``fmod``
computed in float32 for narrow floats and ``nextafter`` steps on the value's bits
(lowering/narrow_float_math.py). References: Python's ``math.fmod`` in float64 (exact), NumPy's
float16 ``nextafter``, and the bit patterns themselves for bfloat16 and float8. The CUDA
kernels are compiled with nvcc and run on the GPU emulator of test_tileops_cuda.py.
"""

from __future__ import annotations

import math
import pathlib
import sys

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_float_remainders")
#: float8 kernels use CUDA's own types (cuda_fp8.h, its host conversions), as test_float8_cuda.py does.
CUDA_INCLUDE = next((p for p in (pathlib.Path(CU.NVCC).resolve().parent.parent / "include" if CU.NVCC else None,
                                 pathlib.Path("/usr/local/cuda/include")) if p and (p / "cuda_fp8.h").exists()), None)
FLOAT8_HEADER = CU._EMU_HEADER.replace("typedef _Float16 half;\n", "#include <cuda_fp8.h>\n").replace(
    "static inline half __float2half_rn(float x) { return (half)x; }\n"
    "static inline float __half2float(half x) { return (float)x; }\n", "") + "typedef unsigned char uchar;\n"
#: bfloat16 for the emulator: float's upper half, converted with round-to-nearest-even.
PLAIN_HEADER = CU._EMU_HEADER + r"""
typedef unsigned short ushort;
typedef unsigned char uchar;
struct nv_bfloat16 {
  unsigned short b;
  nv_bfloat16() = default;
  nv_bfloat16(float f) {
    unsigned u; __builtin_memcpy(&u, &f, 4);
    b = (f != f) ? (unsigned short)0x7FC0 : (unsigned short)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
  }
  operator float() const { unsigned u = (unsigned)b << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
};
"""

N = 64
CPU = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]
OPS = ("percent", "truncmod", "nextafter", "floordiv")


def kernel(op: str, dtype: str):
    @T.prim_func
    def remainder(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                if op == "percent":
                    C[i] = A[i] % B[i]
                elif op == "truncmod":
                    C[i] = T.truncmod(A[i], B[i])
                elif op == "floordiv":
                    C[i] = A[i] // B[i]
                else:
                    C[i] = T.nextafter(A[i], B[i])

    return remainder


def _pairs(op: str, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    inf, nan = math.inf, math.nan
    if op == "nextafter":
        big = float(torch.finfo(getattr(torch, dtype)).max)
        tiny = float(torch.finfo(getattr(torch, dtype)).smallest_normal)
        a = [5.5, -5.5, 5.5, -5.5, 0.0, 0.0, -0.0, 1.0, big, -big, inf, -inf, nan, 1.0, 2.0, tiny, -tiny, 0.0]
        b = [2.0, 2.0, 9.0, -9.0, 1.0, -1.0, 1.0, 1.0, inf, -inf, 0.0, 0.0, 1.0, nan, 2.0, 0.0, 0.0, -0.0]
    else:
        a = [5.5, -5.5, 5.5, -5.5, 6.0, -6.0, 0.75, -0.75, 100.0, -100.0, 3.0, -3.0, inf, nan, 7.0, 1.5, 0.0, -0.0]
        b = [2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.5, -0.5, 0.375, 0.375, inf, inf, 2.0, 2.0, 0.0, -3.0, 5.0, -5.0]
        if dtype.startswith("float8"):  # in the format's range
            a = [x if abs(x) < 50 or x != x else x / 8 for x in a]
    g = torch.Generator().manual_seed(3)
    fill = N - len(a)
    a = a + (torch.randn(fill, generator=g) * 20).tolist()
    b = b + (torch.randn(fill, generator=g) * 3).tolist()
    t = getattr(torch, dtype)
    return torch.tensor(a).to(t), torch.tensor(b).to(t)


def _fmod(x: float, y: float) -> float:
    try:
        return math.fmod(x, y)
    except ValueError:  # fmod(inf, y), fmod(x, 0): NaN in C
        return math.nan


def _python_floor_remainder(x: float, y: float) -> float:
    r = _fmod(x, y)
    return r + y if r != 0 and r == r and (r < 0) != (y < 0) else r


def _bits_nextafter(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """C's nextafter in ``x``'s own format, from its bits (sign and magnitude)."""
    width = x.element_size() * 8
    view = {16: torch.int16, 8: torch.uint8}[width]
    xb = x.view(view).to(torch.int64) & ((1 << width) - 1)
    yb = y.view(view).to(torch.int64) & ((1 << width) - 1)
    out = []
    for xv, yv, xi, yi in zip(x.double().tolist(), y.double().tolist(), xb.tolist(), yb.tolist()):
        if xv != xv or yv != yv:
            out.append(None)
        elif xv == yv:
            out.append(yi)
        elif xv == 0:
            out.append((yi & (1 << (width - 1))) | 1)
        else:
            out.append(xi + 1 if (yv > xv) == (xv > 0) else xi - 1)
    nan_bits = torch.tensor(math.nan).to(x.dtype).view(view).to(torch.int64).item() & ((1 << width) - 1)
    bits = torch.tensor([nan_bits if b is None else b for b in out], dtype=torch.int64)
    signed = torch.where(bits >= 1 << (width - 1), bits - (1 << width), bits) if view is torch.int16 else bits
    return signed.to(view).view(x.dtype)


def expected(op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if op == "nextafter":
        if a.dtype == torch.float16:
            with np.errstate(over="ignore"):  # nextafter(65504, inf) is inf
                steps = torch.from_numpy(np.nextafter(a.numpy(), b.numpy()))
        elif a.element_size() >= 4:
            steps = torch.nextafter(a, b)
        else:
            steps = _bits_nextafter(a, b)
        return torch.where(a == b, b, steps)  # C: y when x == y (nextafter(0.0, -0.0) is -0.0; NumPy gives x)
    if op == "floordiv":  # torch's floor division; 16-bit and 8-bit floats through float32, as the kernels
        wide = a.to(torch.float32) if a.element_size() < 4 else a
        exact = torch.div(wide, b.to(wide.dtype), rounding_mode="floor")
        if a.element_size() == 1:  # CUDA's float8 conversion saturates, an infinity too
            big = float(torch.finfo(a.dtype).max)
            exact = exact.clamp(-big, big)
        return exact.to(a.dtype)
    rule = _python_floor_remainder if op == "percent" else _fmod
    exact = torch.tensor([rule(x, y) for x, y in zip(a.double().tolist(), b.double().tolist())], dtype=torch.float64)
    if a.element_size() == 1:  # CUDA's float8 conversion saturates, an infinity too (lowering/float8_cuda.py)
        big = float(torch.finfo(a.dtype).max)
        exact = exact.clamp(-big, big)
    return exact.to(a.dtype)  # one rounding of the exact value


def _same(c: torch.Tensor, e: torch.Tensor, op: str) -> None:
    if op == "nextafter":  # bit for bit (zeros' signs and the steps themselves), NaN as NaN
        nan = e.float().isnan()
        assert torch.equal(c.float().isnan(), nan), (c, e)
        width = {2: torch.int16, 1: torch.uint8, 4: torch.int32, 8: torch.int64}[c.element_size()]
        assert torch.equal(c[~nan].view(width), e[~nan].view(width)), (c, e)
    else:
        torch.testing.assert_close(c.float() if c.element_size() == 1 else c, e.float() if e.element_size() == 1 else e,
                                   rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend,target", CPU)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op", OPS)
def test_float_remainders_and_nextafter_on_cpu_targets(op, dtype, backend, target):
    k = tilelang.compile(kernel(op, dtype), target=target, execution_backend=backend)
    a, b = _pairs(op, dtype)
    c = torch.zeros_like(a)
    k(a, b, c)
    _same(c, expected(op, a, b), op)


CUDA_DTYPES = ["float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]


@pytest.fixture(scope="module")
def cuda_artifacts():
    return {f"{op}_{dtype}": lower(kernel(op, dtype), target="cuda") for op in OPS for dtype in CUDA_DTYPES}


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_float_remainders_and_nextafter_compile_with_nvcc(cuda_artifacts, tmp_path):
    CU.compile_translation_units(cuda_artifacts, tmp_path)


@CU.emulator
@pytest.mark.parametrize("dtype", CUDA_DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_emulated_gpu_float_remainders_and_nextafter(cuda_artifacts, tmp_path, op, dtype, monkeypatch):
    """Mock GPU device (the OpenMP emulation of a CUDA block of test_tileops_cuda.py)."""
    if dtype.startswith("float8"):
        if CUDA_INCLUDE is None:
            pytest.skip("needs CUDA's cuda_fp8.h")
        monkeypatch.setenv("CPLUS_INCLUDE_PATH", str(CUDA_INCLUDE))
    monkeypatch.setattr(CU, "_EMU_HEADER", FLOAT8_HEADER if dtype.startswith("float8") else PLAIN_HEADER)
    run = CU._emulated(cuda_artifacts[f"{op}_{dtype}"], tmp_path)
    a, b = _pairs(op, dtype)
    c = torch.zeros_like(a)
    run(a, b, c)
    _same(c, expected(op, a, b), op)


def test_percent_of_a_float_and_a_python_number():
    """As in arithmetic, ``A[i] % 2.5`` of a float16 ``A`` is float32 (TVM makes the Python float a
    float32 constant: ``A[i] * 2.5`` is float32 too) and ``7 % A[i]`` float16."""

    @T.prim_func
    def mixed(A: T.Tensor((N,), "float16"), C: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                C[i] = A[i] % 2.5 + 7 % A[i]

    k = tilelang.compile(mixed, target="c", execution_backend="cython")
    a = torch.linspace(-6, 6, N).to(torch.float16)
    c = torch.zeros_like(a)
    k(a, c)
    values = a.double().tolist()
    by_float = torch.tensor([_python_floor_remainder(x, 2.5) for x in values]).to(torch.float32)
    by_int = torch.tensor([_python_floor_remainder(7.0, x) for x in values], dtype=torch.float64).to(torch.float16)
    torch.testing.assert_close(c, (by_float + by_int.float()).to(torch.float16), rtol=0, atol=0, equal_nan=True)


def test_nextafter_of_a_float8_without_ieee_encodings_is_refused():
    with pytest.raises(LoweringError, match=r"T\.nextafter of float8_e8m0fnu is not supported.*float32"):
        lower(kernel("nextafter", "float8_e8m0fnu"), target="cuda")


def test_floor_quotient_and_remainder_of_floats_agree():
    """``x == (x // y) * y + x % y`` up to rounding, and ``T.floordiv`` is ``//``."""

    @T.prim_func
    def both(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), Q: T.Tensor((N,), "float32"),
             Q2: T.Tensor((N,), "float32"), R: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                Q[i] = A[i] // B[i]
                Q2[i] = T.floordiv(A[i], 0.75)
                R[i] = A[i] % B[i]

    k = tilelang.compile(both, target="llvm", execution_backend="tvm_ffi")
    g = torch.Generator().manual_seed(5)
    a = torch.randn(N, generator=g) * 50
    b = torch.randn(N, generator=g) * 2
    q, q2, r = torch.zeros(N), torch.zeros(N), torch.zeros(N)
    k(a, b, q, q2, r)
    torch.testing.assert_close(q * b + r, a, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(q2, torch.div(a, 0.75, rounding_mode="floor"), rtol=0, atol=0)


def _quotient_by_constant_zero(dtype: str, zero: float):
    @T.prim_func
    def by_zero(A: T.Tensor((6,), dtype), B: T.Tensor((6,), dtype)):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(6):
                B[i] = A[i] // T.cast(zero, dtype)

    return by_zero


@pytest.mark.parametrize("backend,target", CPU)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("zero", [0.0, -0.0])
def test_floor_quotient_by_a_constant_zero_is_torchs(backend, target, dtype, zero):
    """``x // T.float32(0)`` stopped the compile with TVM's bare "Check failed: fb->value != 0 ...
    Divide by zero" (printing the kernel's cache key folds the division); it is the infinity or
    NaN torch gives."""
    kernel = tilelang.compile(_quotient_by_constant_zero(dtype, zero), execution_backend=backend, target=target)
    tdt = getattr(torch, dtype)
    a = torch.tensor([1.5, -2.0, 0.0, -0.0, math.nan, math.inf], dtype=tdt)
    b = torch.zeros_like(a)
    kernel(a, b)
    expected = torch.div(a, torch.full_like(a, zero), rounding_mode="floor")
    assert torch.equal(b.isnan(), expected.isnan()) and torch.equal(b.nan_to_num(7.0), expected.nan_to_num(7.0)), b


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_floor_quotient_by_a_constant_zero_compiles_with_nvcc(tmp_path):
    artifacts = {f"by_zero_{dtype}": lower(_quotient_by_constant_zero(dtype, 0.0), target="cuda")
                 for dtype in ("float32", "float16")}
    CU.compile_translation_units(artifacts, tmp_path)
