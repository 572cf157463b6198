"""Shifts, math functions and ``T.fma`` that a differential fuzz pass of casts, math and bit
operations found computing different values on different targets (or not lowering at all).

* Shifts by an amount outside ``0 .. width - 1`` (lowering/shift_amounts.py): undefined in C and
  LLVM, they gave 0 on ``c`` (vectorized), the amount modulo 32/64 on ``llvm`` (and in the scalar
  part of a ``c`` loop); a constant such amount stopped the definition with TVM's internal check.
  Now torch's ``bitwise_left_shift``/``bitwise_right_shift`` values on every target.
* ``T.tanh``/``T.atanh`` on ``llvm`` lost every digit for small arguments (``tanh(1e-10)`` was 0);
  ``T.sinh``/``T.cosh`` in a ``T.vectorized`` loop did not lower on ``llvm`` (lowering/cpu_math.py).
* ``T.fma`` did not lower on ``c`` and CUDA ("Unresolved call tirx.fma") and was rounded twice on
  ``llvm`` (lowering/cpu_math.py, lowering/gpu_math.py).
* CUDA sources nvcc refused: ``~`` of integer vectors (lowering/vector_not.py) and float8 vector
  conversions from and to integer vectors (lowering/float8_cuda.py).
* A number constant cast to ``bool`` was truncated first (``T.Cast("bool", 0.5)`` was false;
  lowering/constant_casts.py).
"""

from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "cast_math_semantics_emulator")
# CUDA's unsigned min overloads (the signed right shift clamps its amount with one)
CU._EMU_HEADER += r"""
typedef unsigned char uchar;
typedef unsigned short ushort;
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline uint64_t min(uint64_t a, uint64_t b) { return a < b ? a : b; }
"""

AMOUNTS = [0, 1, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100, -1, -8, 2]
N = len(AMOUNTS)
SHIFT_DTYPES = ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]


def _bits(dtype):
    return int(dtype.lstrip("uint"))


def _wrap(value, dtype):
    bits = _bits(dtype)
    value %= 1 << bits
    return value - (1 << bits) if dtype.startswith("int") and value >= 1 << (bits - 1) else value


def _tensor(values, dtype):
    """values (Python ints, wrapped to dtype) as a tensor of dtype (64-bit ones through int64)."""
    wrapped = [_wrap(v, dtype) for v in values]
    if _bits(dtype) == 64:
        return torch.tensor([_wrap(v, "int64") for v in wrapped], dtype=torch.int64).view(getattr(torch, dtype))
    return torch.tensor(wrapped, dtype=torch.int64).to(getattr(torch, dtype))


def _values(t, dtype):
    if _bits(dtype) == 64:
        return [_wrap(v, dtype) for v in t.view(torch.int64).tolist()]
    return t.to(torch.int64).tolist()


def _shl(x, n, dtype):
    """torch's bitwise_left_shift: the amount read as unsigned, 0 from the width on."""
    n = _wrap(n, "uint" + str(_bits(dtype)))
    return _wrap(x << n, dtype) if n < _bits(dtype) else 0


def _shr(x, n, dtype):
    n = _wrap(n, "uint" + str(_bits(dtype)))
    return x >> min(n, _bits(dtype) - 1) if dtype.startswith("int") else (x >> n if n < _bits(dtype) else 0)


def _shift_kernel(dtype):
    n = T.dynamic("n")

    @T.prim_func
    def shifts(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), L: T.Tensor((n,), dtype), R: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    L[bx * 32 + i] = A[bx * 32 + i] << B[bx * 32 + i]
                    R[bx * 32 + i] = A[bx * 32 + i] >> B[bx * 32 + i]

    return shifts


def _shift_case(dtype):
    x = -5 if dtype.startswith("int") else 5
    a = _tensor([x] * N, dtype)
    b = _tensor(AMOUNTS, dtype)
    amounts = _values(b, dtype)
    want_l = [_shl(_wrap(x, dtype), s, dtype) for s in amounts]
    want_r = [_shr(_wrap(x, dtype), s, dtype) for s in amounts]
    return a, b, want_l, want_r


@pytest.mark.parametrize("dtype", SHIFT_DTYPES)
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_shift_by_any_amount_is_torchs_value(path, dtype):
    a, b, want_l, want_r = _shift_case(dtype)
    left, right = torch.zeros_like(a), torch.zeros_like(a)
    compile_on(_shift_kernel(dtype), path)(a, b, left, right)
    assert _values(left, dtype) == want_l
    assert _values(right, dtype) == want_r


def test_shift_values_are_torchs():
    """The reference above is torch's own rule (for the dtypes torch shifts on the CPU)."""
    for dtype in ("int8", "uint8", "int16", "int32", "int64"):
        a, b, want_l, want_r = _shift_case(dtype)
        assert _values(torch.bitwise_left_shift(a, b), dtype) == want_l
        assert _values(torch.bitwise_right_shift(a, b), dtype) == want_r


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_emulated_gpu_shift_by_any_amount(tmp_path, dtype):
    from tilelang_core.lowering import lower

    a, b, want_l, want_r = _shift_case(dtype)
    left, right = torch.zeros_like(a), torch.zeros_like(a)
    CU._emulated(lower(_shift_kernel(dtype), target="cuda"), tmp_path)(a, b, left, right)
    assert _values(left, dtype) == want_l
    assert _values(right, dtype) == want_r


def _constant_shift_kernel(dtype):
    @T.prim_func
    def constant_shifts(A: T.Tensor((4,), dtype), C: T.Tensor((4, 5), dtype)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(4):
                C[i, 0] = A[i] << 40
                C[i, 1] = A[i] >> 40
                C[i, 2] = T.shift_left(A[i], T.Cast(dtype, 64))
                C[i, 3] = T.shift_right(A[i], T.Cast(dtype, 100))
                C[i, 4] = A[i] >> 3

    return constant_shifts


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_constant_shift_amount_outside_the_width(path, dtype):
    """A constant amount outside the width is the run-time amount's value (TVM stopped the
    definition with "Shift amount must be non-negative and less than 32")."""
    xs = [-5, 5, 0, -1]
    a = _tensor(xs, dtype)
    c = torch.zeros(4, 5, dtype=a.dtype)
    compile_on(_constant_shift_kernel(dtype), path)(a, c)
    got = [_values(row, dtype) for row in c]
    xs = _values(a, dtype)
    want = [[_shl(x, 40, dtype), _shr(x, 40, dtype), _shl(x, 64, dtype), _shr(x, 100, dtype), x >> 3] for x in xs]
    assert got == want


def test_shifts_by_constants_in_range_stay_plain():
    """Only a shift whose amount may leave the range gets the guard: ``x >> 3`` prints as itself."""
    from tilelang_core.lowering import lower

    src = lower(_constant_shift_kernel("int32"), target="c").device_source
    assert "(A_ptr[i] >> 3)" in src
    assert "(A_ptr[i] >> 31)" in src  # the right shift by 40 / 100: the sign
    guarded = lower(_shift_kernel("int32"), target="c").device_source
    assert "< 32)) ?" in guarded, guarded


def _nibbles_kernel():
    @T.prim_func
    def nibbles(A: T.Tensor((64,), "int32"), B: T.Tensor((512,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            for i, j in T.Parallel(64, 8):
                B[i * 8 + j] = (A[i] >> (j * 4)) & 15

    return nibbles


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_shift_amounts_proved_in_range_stay_plain(target):
    """``j * 4`` of ``j < 8`` is in range: the simplifier removes the guard (no cost in dequant loops)."""
    from tilelang_core.lowering import lower

    src = lower(_nibbles_kernel(), target=target).device_source
    line = next(ln for ln in src.splitlines() if "B_ptr[" in ln and ">>" in ln and "=" in ln)
    assert "?" not in line and "min(" not in line, line


SMALL = [1e-10, -1e-20, 1e-30, 1e-5, -2e-3, 0.3, -0.7, 1e-38]


def _unary_kernel(op, dtype, vectorized=False):
    n = len(SMALL)

    if vectorized:
        @T.prim_func
        def unary(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
            with T.Kernel(n // 4, threads=1) as bx:
                for i in T.vectorized(4):
                    C[bx * 4 + i] = op(A[bx * 4 + i])

        return unary

    @T.prim_func
    def unary(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                C[i] = op(A[i])

    return unary


@pytest.mark.parametrize("name", ["tanh", "atanh", "sinh", "cosh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorized", [False, True], ids=["serial", "vectorized"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_hyperbolic_functions_of_small_arguments(path, dtype, name, vectorized):
    a = torch.tensor(SMALL, dtype=getattr(torch, dtype))
    c = torch.zeros_like(a)
    compile_on(_unary_kernel(getattr(T, name), dtype, vectorized), path)(a, c)
    want = getattr(torch, name)(a.double())
    eps = 2.0 ** -23 if dtype == "float32" else 2.0 ** -52
    for x, got, w in zip(a.tolist(), c.tolist(), want.tolist()):
        assert abs(got - w) <= 4 * eps * abs(w), (name, x, got, w)


def _fma_kernel(dtype):
    @T.prim_func
    def fused(A: T.Tensor((4,), dtype), B: T.Tensor((4,), dtype), D: T.Tensor((4,), dtype), C: T.Tensor((4,), dtype)):
        with T.Kernel(1, threads=4) as bx:
            for i in T.Parallel(4):
                C[i] = T.fma(A[i], B[i], D[i])

    return fused


def _fma_case(dtype):
    td = getattr(torch, dtype)
    a = torch.tensor([3.0, 1 + 2.0 ** -10, 0.1, -2.0], dtype=td)
    b = torch.tensor([1.0, 1 - 2.0 ** -10, 10.0, 0.5], dtype=td) / torch.tensor([3.0, 1.0, 1.0, 1.0], dtype=td)
    d = torch.tensor([-1.0, -1.0, -1.0, 1.0], dtype=td)
    from fractions import Fraction

    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a.tolist(), b.tolist(), d.tolist())]
    if dtype == "float64":
        want = [float(e) for e in exact]  # Fraction -> float rounds once, to nearest even
    else:  # float32: exact in float64 (48-bit product), then one rounding
        want = torch.tensor([float(e) for e in exact], dtype=torch.float64).to(td).tolist()
    return a, b, d, want


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_fma_rounds_once(path, dtype):
    a, b, d, want = _fma_case(dtype)
    c = torch.zeros_like(a)
    compile_on(_fma_kernel(dtype), path)(a, b, d, c)
    assert c.tolist() == want
    assert want[0] != 0.0  # 3 * fl(1/3) - 1: a product rounded first gives 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_fma_of_16_bit_floats(path, dtype):
    """Computed in float32 (``fmaf``) and rounded back, the same on every target."""
    td = getattr(torch, dtype)
    a, b, d = (torch.tensor(v, dtype=td) for v in ([1.5, -2.0, 0.25, 3.0], [2.0, 0.5, 4.0, -1.0], [0.5, 1.0, -1.0, 3.0]))
    c = torch.zeros_like(a)
    compile_on(_fma_kernel(dtype), path)(a, b, d, c)
    assert c.tolist() == [3.5, 0.0, 0.0, 0.0]


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_fma_cuda_sources_compile(tmp_path):
    from tilelang_core.lowering import lower

    arts = {dtype: lower(_fma_kernel(dtype), target="cuda") for dtype in ("float32", "float64", "float16", "bfloat16")}
    assert "fmaf(" in arts["float32"].device_source and "fma(" in arts["float64"].device_source
    CU.compile_translation_units(arts, tmp_path)


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
def test_emulated_gpu_fma_rounds_once(tmp_path):
    from tilelang_core.lowering import lower

    a, b, d, want = _fma_case("float32")
    c = torch.zeros_like(a)
    CU._emulated(lower(_fma_kernel("float32"), target="cuda"), tmp_path)(a, b, d, c)
    assert c.tolist() == want
    assert not math.isnan(c[0].item())


def _vector_not_kernel(dtype, lanes):
    @T.prim_func
    def vector_not(A: T.Tensor((16,), dtype), C: T.Tensor((16,), dtype)):
        with T.Kernel(16 // lanes, threads=1) as bx:
            for i in T.vectorized(lanes):
                C[bx * lanes + i] = ~A[bx * lanes + i]

    return vector_not


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_vector_bitwise_not_values(path):
    a = torch.tensor(list(range(-8, 8)), dtype=torch.int32)
    c = torch.zeros_like(a)
    compile_on(_vector_not_kernel("int32", 4), path)(a, c)
    assert torch.equal(c, ~a)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_vector_bitwise_not_cuda_sources_compile(tmp_path):
    """CUDA's vector types have no ``~``: ``~*(int4*)...`` did not compile (now ``^`` lane by lane)."""
    from tilelang_core.lowering import lower

    arts = {f"{dtype}x{lanes}": lower(_vector_not_kernel(dtype, lanes), target="cuda")
            for dtype in ("int8", "uint8", "int16", "int32", "uint32", "int64", "uint64") for lanes in (2, 4)}
    assert "make_int4(-1, -1, -1, -1)" in arts["int32x4"].device_source
    CU.compile_translation_units(arts, tmp_path)


def _float8_vector_cast_kernel(src, dst):
    @T.prim_func
    def vector_cast(A: T.Tensor((16,), src), C: T.Tensor((16,), dst)):
        with T.Kernel(4, threads=1) as bx:
            for i in T.vectorized(4):
                C[bx * 4 + i] = T.Cast(dst, A[bx * 4 + i])

    return vector_cast


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_float8_vector_conversions_with_integers_compile(tmp_path):
    """cuda_fp8.h has no ``__nv_fp8x4_*`` conversion from or to integer vectors (nor to double4):
    ``(__nv_fp8x4_e4m3)(*(ushort4*)...)`` did not compile. They go through float32 vectors now."""
    from tilelang_core.lowering import lower

    arts = {}
    for f8 in ("float8_e4m3fn", "float8_e5m2"):
        for other in ("int8", "uint8", "int16", "uint16", "int32", "int64", "bool"):
            arts[f"{other}_to_{f8}"] = lower(_float8_vector_cast_kernel(other, f8), target="cuda")
            arts[f"{f8}_to_{other}"] = lower(_float8_vector_cast_kernel(f8, other), target="cuda")
        arts[f"{f8}_to_float64"] = lower(_float8_vector_cast_kernel(f8, "float64"), target="cuda")
    CU.compile_translation_units(arts, tmp_path)


def _constant_to_bool_kernel(values):
    import tvm

    c0, c1, c2, c3, c4, c5, c6 = (tvm.tirx.const(v, dtype) for v, dtype in values)

    @T.prim_func
    def constant_to_bool(C: T.Tensor((7,), "bool")):
        with T.Kernel(1, threads=1) as bx:
            C[0] = T.Cast("bool", c0)
            C[1] = T.Cast("bool", c1)
            C[2] = T.Cast("bool", c2)
            C[3] = T.Cast("bool", c3)
            C[4] = T.Cast("bool", c4)
            C[5] = T.Cast("bool", c5)
            C[6] = T.Cast("bool", c6)

    return constant_to_bool


BOOL_CONSTANTS = [(0.5, "float32"), (-0.10009765625, "bfloat16"), (1e-30, "float64"), (2.0, "float16"),
                  (float("nan"), "float32"), (0.0, "float32"), (2, "int32")]


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_constant_to_bool_is_nonzero(path):
    """TVM folded a float constant's cast to bool by truncating it first: 0.5 gave false, 2.0
    and NaN stopped lowering."""
    c = torch.zeros(7, dtype=torch.bool)
    compile_on(_constant_to_bool_kernel(BOOL_CONSTANTS), path)(c)
    assert c.tolist() == [True, True, True, True, True, False, True]
