"""TileLang-compatibility operators and intrinsics (issue 13) on CPU, compared with torch.

Kernels come from tests/tileops_compat_kernels.py; each bundles several operators. They run on
the three CPU paths: target ``c`` with the cython backend (device source + cc) and with the
tvm_ffi backend (TVM's C module, built with the system C++ compiler), and target ``llvm`` with
the tvm_ffi backend; with static and dynamic (``T.dynamic``) sizes. Atomic kernels run their
blocks in parallel, so their exact totals check that CPU atomics are real atomics.
"""

from __future__ import annotations

import decimal
import functools
import pathlib
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from backend_pairs import CYTHON_C, PATHS, TVMFFI_C, TVMFFI_LLVM, compile_on as _compile, path_id as _path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

KS = load_private("tileops_compat_kernels")


def _tdt(dtype):
    return getattr(torch, dtype)


# -- atomics ----------------------------------------------------------------------------------

_ATOMIC_CASES = [
    ("int32", True, CYTHON_C),
    ("int32", True, TVMFFI_C),
    ("int32", True, TVMFFI_LLVM),
    ("float32", False, CYTHON_C),
    ("float32", False, TVMFFI_C),
    ("float32", False, TVMFFI_LLVM),
    ("float16", True, CYTHON_C),
    ("float16", False, TVMFFI_LLVM),
    ("bfloat16", False, CYTHON_C),
    ("bfloat16", True, TVMFFI_C),
    ("bfloat16", True, TVMFFI_LLVM),
    pytest.param("int64", True, TVMFFI_LLVM, marks=pytest.mark.slow),
    pytest.param("uint32", False, CYTHON_C, marks=pytest.mark.slow),
    pytest.param("uint64", True, TVMFFI_C, marks=pytest.mark.slow),
    pytest.param("float64", False, TVMFFI_LLVM, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("dtype,dynamic,path", _ATOMIC_CASES, ids=lambda v: _path_id(v) if isinstance(v, tuple) else str(v))
def test_atomics_from_parallel_blocks(dtype, dynamic, path):
    """add/max/min/or/and/xor, return_prev, tile form, addx2/addx4, load/store: exact results
    although the blocks run in parallel."""
    bitwise = dtype.startswith(("int", "uint"))
    # exact in every dtype: small integers, totals below 2**8 for bfloat16, 2**11 for float16
    n = {"bfloat16": 200, "float16": 640}.get(dtype, 1000)
    hi = 2 if dtype == "bfloat16" else 4
    kernel = _compile(KS.atomics(n, dtype, dynamic=dynamic, bitwise=bitwise), path)
    tdt = _tdt(dtype)
    for run in range(2):
        a = torch.randint(0, hi, (n,), generator=torch.Generator().manual_seed(run)).to(tdt)
        big = 1000 if dtype != "bfloat16" else 200
        ones = 2**31 - 1 if dtype.startswith("uint") else -1  # the AND start: every bit of the values set
        c = torch.tensor([0, -big if not dtype.startswith("uint") else 0, big, 0, ones, 0, 0, 0]).to(tdt)
        p = torch.zeros(n, dtype=tdt)
        s = torch.zeros(KS.BLOCK, dtype=tdt)
        g = torch.zeros(8, dtype=tdt)
        e = torch.tensor([0, 41]).to(tdt)
        kernel(a, c, p, s, g, e)
        ai = a.to(torch.int64)
        assert c[0].item() == ai.sum().item()
        assert c[1].item() == max(ai.max().item(), -big if not dtype.startswith("uint") else 0)
        assert c[2].item() == min(ai.min().item(), big)
        if bitwise:
            vals = [int(v) for v in ai]
            assert int(c[3]) == functools.reduce(lambda x, y: x | y, vals, 0)
            assert int(c[4]) == functools.reduce(lambda x, y: x & y, vals, ones)
            assert int(c[5]) == functools.reduce(lambda x, y: x ^ y, vals, 0)
        # return_prev: the previous values are the partial sums of some order of the updates
        prev = sorted(p.to(torch.int64).tolist() + [int(c[6])])
        after = sorted((p.to(torch.int64) + ai).tolist() + [0])
        assert prev == after and int(c[6]) == ai.sum().item()
        pad = torch.zeros(-(-n // KS.BLOCK) * KS.BLOCK, dtype=torch.int64)
        pad[:n] = ai
        assert s.to(torch.int64).tolist() == pad.reshape(-1, KS.BLOCK).sum(0).tolist()
        starts = [b * KS.BLOCK for b in range(-(-n // KS.BLOCK)) if b * KS.BLOCK + 6 <= n]
        want_g = [sum(int(ai[s0 + k]) for s0 in starts) for k in range(6)]
        assert g.to(torch.int64).tolist()[:6] == want_g
        assert e.tolist() == [42, 41]


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_vector_atomics_return_prev_is_refused_on_cpu_as_in_tilelang(target):
    """``P[j:j+2] = T.atomic_addx2(..., return_prev=True)`` lowers for cuda (one atomic per lane,
    tests/test_tileops_compat_cuda.py) and is refused on CPU targets with the statement's line."""
    from tilelang_core.errors import LoweringError
    from tilelang_core.lowering import lower

    with pytest.raises(LoweringError, match=r"tileops_compat_kernels\.py:\d+: T\.atomic_addx2\(\.\.\., return_prev=True\) is not supported on CPU"):
        lower(KS.vector_prev(40, "float32"), target=target)


# -- reductions -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS, ids=_path_id)
def test_bitwise_reductions(path):
    M, N, bm = 37, 12, 8  # dynamic rows, last tile partial
    kernel = _compile(KS.reductions(M, N, bm, "int32", dynamic=True), path)
    a = torch.randint(-(2**30), 2**30, (M, N), dtype=torch.int32)
    o = torch.zeros(M, 6, dtype=torch.int32)
    kernel(a, o)
    rows = a.tolist()
    for r, row in enumerate(rows):
        want_and = functools.reduce(lambda x, y: x & y, row)
        want_or = functools.reduce(lambda x, y: x | y, row)
        want_xor = functools.reduce(lambda x, y: x ^ y, row)
        assert o[r, :4].tolist() == [want_and, want_or, want_xor, want_xor ^ 0x0F], r


@pytest.mark.parametrize(
    "dtype,style,path",
    [("float32", "gpu", CYTHON_C), ("float32", "cpu", TVMFFI_C), ("float32", "gpu", TVMFFI_LLVM),
     ("float16", "cpu", CYTHON_C), ("bfloat16", "gpu", TVMFFI_LLVM)],
    ids=lambda v: _path_id(v) if isinstance(v, tuple) else str(v),
)
def test_max_min_absmax_nan_handling(dtype, style, path):
    """Default: NaN elements are ignored (a row of only NaN gives the identity); nan_propagate=True:
    any NaN makes the result NaN. Static rows."""
    M, N, bm = 16, 10, 8
    kernel = _compile(KS.reductions(M, N, bm, dtype, style=style), path)
    a = torch.randn(M, N).to(_tdt(dtype))
    a[1, 0] = float("nan")  # first element NaN
    a[2, 7] = float("nan")
    a[3, :] = float("nan")
    a[4, 9] = float("-inf")
    o = torch.zeros(M, 6, dtype=_tdt(dtype))
    kernel(a, o)
    af = a.float()
    want = [
        # NaN ignored: a row of only NaN gives the identity (-inf, +inf, 0), as TileLang
        torch.nan_to_num(af, nan=float("-inf"), posinf=float("inf"), neginf=float("-inf")).amax(1),
        torch.nan_to_num(af, nan=float("inf"), posinf=float("inf"), neginf=float("-inf")).amin(1),
        torch.nan_to_num(af.abs(), nan=0.0, posinf=float("inf")).amax(1),
        af.amax(1), af.amin(1), af.abs().amax(1),
    ]
    for k, w in enumerate(want):
        torch.testing.assert_close(o[:, k].float(), w, equal_nan=True, rtol=0, atol=0, msg=f"column {k}")


# -- scans ------------------------------------------------------------------------------------


def _cumsum(x, dim, reverse=False):
    return x.flip(dim).cumsum(dim).flip(dim) if reverse else x.cumsum(dim)


@pytest.mark.parametrize(
    "style,dynamic,path",
    [("cpu", True, CYTHON_C), ("cpu", True, TVMFFI_C), ("cpu", True, TVMFFI_LLVM), ("gpu", False, CYTHON_C)],
    ids=lambda v: _path_id(v) if isinstance(v, tuple) else str(v),
)
def test_cumsum_cummax(style, dynamic, path):
    M, N, bm = 32, 24, 8
    kernel = _compile(KS.scans(M, N, bm, dynamic=dynamic, style=style), path)
    a = torch.randn(M, N)
    s0, s1, s2, v = (torch.zeros(M, N) for _ in range(4))
    kernel(a, s0, s1, s2, v)
    tiles = a.reshape(M // bm, bm, N)
    torch.testing.assert_close(s0, _cumsum(a, 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s1, _cumsum(tiles, 1, reverse=True).reshape(M, N), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s2, a.flip(1).cummax(1).values.flip(1))
    rows = v.reshape(M // bm, bm, N)[:, 0, :]
    torch.testing.assert_close(rows, tiles[:, 0, :].cumsum(1), rtol=1e-5, atol=1e-5)


# -- transpose / reshape / view -------------------------------------------------------------


@pytest.mark.parametrize(
    "style,dynamic,path",
    [("cpu", True, CYTHON_C), ("cpu", True, TVMFFI_C), ("cpu", True, TVMFFI_LLVM), ("gpu", False, TVMFFI_LLVM)],
    ids=lambda v: _path_id(v) if isinstance(v, tuple) else str(v),
)
def test_transpose_reshape_view(style, dynamic, path):
    B, M, N = 3, 5, 4
    kernel = _compile(KS.layout(B, M, N, dynamic=dynamic, style=style), path)
    a = torch.randn(B, M, N)
    tr, edge = torch.zeros(B, N, M), torch.zeros(B, N, M)
    r = torch.zeros(B, M * N)
    bits = torch.zeros(B, M, N, dtype=torch.int32)
    kernel(a, tr, edge, r, bits)
    torch.testing.assert_close(tr, a.transpose(1, 2))
    want = torch.full((B, N, M), -1.0)
    want[:, :, 2:] = a[:, 1 : M - 1, :].transpose(1, 2)
    torch.testing.assert_close(edge, want)
    torch.testing.assert_close(r, a.reshape(B, M * N))
    assert torch.equal(bits, a.view(torch.int32))


# -- alloc_var / alloc_global ---------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS, ids=_path_id)
def test_alloc_var_and_alloc_global(path):
    kernel = _compile(KS.variables(50, dynamic=True), path)
    for n in (50, 7):
        a = torch.randint(-9, 9, (n,), dtype=torch.int32)
        o = torch.zeros(n, dtype=torch.int32)
        tot = torch.zeros(1, dtype=torch.int32)
        kernel(a, o, tot)
        assert tot.item() == a.sum().item()
        assert torch.equal(o, a * 2 + 100)


def _eager_workspace_kernel():
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def tripled_plus_one(A, block: int = 16):
        N = T.const("N")
        A: T.Tensor[(N,), T.int32]
        B = T.empty((N,), T.int32)
        W = T.alloc_global((N,), T.int32)  # a workspace declared before the kernel, as TileLang allows
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    W[bx * block + i] = A[bx * block + i] * 3
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = W[bx * block + i] + 1
        return B

    return tripled_plus_one


def test_alloc_global_in_an_eager_jit_function():
    kernel = _eager_workspace_kernel()
    for n in (40, 9):
        a = torch.randint(-9, 9, (n,), dtype=torch.int32)
        assert torch.equal(kernel(a), a * 3 + 1)


# -- math intrinsics --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,dynamic,path",
    [("float32", True, CYTHON_C), ("float32", True, TVMFFI_C), ("float32", True, TVMFFI_LLVM), ("float16", False, CYTHON_C),
     ("bfloat16", False, TVMFFI_LLVM)],
    ids=lambda v: _path_id(v) if isinstance(v, tuple) else str(v),
)
def test_fast_math_clamp_align_up_dp4a(dtype, dynamic, path):
    n = 200
    kernel = _compile(KS.math(n, dtype, dynamic=dynamic), path)
    a = (torch.rand(n) * 4 - 2).to(_tdt(dtype))
    a[5] = float("nan")
    f = torch.zeros(n, 10, dtype=_tdt(dtype))
    q = torch.randint(-128, 128, (n, 4), dtype=torch.int8)
    d = torch.zeros(n, dtype=torch.int32)
    u = torch.zeros(n, dtype=torch.int32)
    kernel(a, f, q, d, u)
    x = a.float()
    one = torch.ones_like(x)
    want = [x.exp(), torch.pow(10.0, x), (x.abs() + one).log(), (x.abs() + one).log2(), (x.abs() + one).log10(),
            x.tan(), x.cos(), x.sin(), 1.0 / (x + 4), x.clamp(-0.5, 0.5)]
    tol = 1e-5 if dtype == "float32" else 2e-2
    for k, w in enumerate(want):
        w = w.to(_tdt(dtype)).float()
        torch.testing.assert_close(f[:, k].float(), w, rtol=tol, atol=tol, equal_nan=True, msg=f"column {k}")
    assert torch.isnan(f[5, 9])  # clamp propagates NaN
    assert u.tolist() == [-(-g // 8) * 8 for g in range(n)]
    qi = q.to(torch.int64)
    assert d.tolist() == [g + int((qi[g] * qi[g]).sum()) for g in range(n)]


def _directed(exact: Fraction, mode: str, ftype) -> float:
    """``exact`` rounded to ``ftype`` (np.float32 / np.float64) in ``mode``."""
    r = ftype(float(exact)) if ftype is np.float64 else ftype(np.float64(float(exact)))
    if ftype is np.float32 and Fraction(float(np.float64(float(exact)))) != exact:
        # float(exact) rounded to float64 first: redo the nearest rounding exactly
        lo = ftype(r)
        cands = [np.nextafter(lo, ftype(-np.inf)), lo, np.nextafter(lo, ftype(np.inf))]
        r = min(cands, key=lambda c: (abs(Fraction(float(c)) - exact), int(np.asarray(c).view(np.int32)) & 1))
    fr = Fraction(float(r))
    if mode == "ru" and fr < exact:
        r = np.nextafter(r, ftype(np.inf))
    elif mode == "rd" and fr > exact:
        r = np.nextafter(r, ftype(-np.inf))
    elif mode == "rz" and abs(fr) > abs(exact):
        r = np.nextafter(r, ftype(0))
    return r


def _ieee_reference(op, mode, a, b, c, ftype):
    if op == "frsqrt":  # CPU: correctly rounded sqrt, then a correctly rounded division
        return ftype(1) / np.sqrt(ftype(a))
    x, y, z = Fraction(float(a)), Fraction(float(b)), Fraction(float(c))
    if op == "fsqrt":
        decimal.getcontext().prec = 80
        exact = Fraction(decimal.Decimal(float(a)).sqrt())
    else:
        exact = {"add": x + y, "sub": x - y, "mul": x * y, "fdiv": x / y, "frcp": 1 / x, "fmaf": x * y + z}[op]
    return _directed(exact, mode, ftype)


@pytest.mark.parametrize(
    "dtype,dynamic,path",
    [("float32", False, CYTHON_C), ("float32", False, TVMFFI_C), ("float32", False, TVMFFI_LLVM),
     ("float64", True, TVMFFI_LLVM), pytest.param("float64", True, CYTHON_C, marks=pytest.mark.slow)],
    ids=lambda v: _path_id(v) if isinstance(v, tuple) else str(v),
)
def test_ieee_rounding_modes_are_correctly_rounded(dtype, dynamic, path):
    """Every IEEE operation in rn/rz/ru/rd, bit for bit against exact rational arithmetic."""
    n = 128
    kernel = _compile(KS.ieee(n, dtype, dynamic=dynamic), path)
    ftype = np.float32 if dtype == "float32" else np.float64
    rng = np.random.default_rng(3)
    a = (np.abs(rng.standard_normal(n)) * 3 + 1e-3).astype(ftype)  # positive: sqrt and rsqrt defined
    b = (rng.standard_normal(n) * 3).astype(ftype)
    c = (rng.standard_normal(n) * 3).astype(ftype)
    a[:4] = [1.0, 2.0, 0.5, 3.0]  # a few exact cases
    if dtype == "float64":
        # fma cases whose rounding direction lies in bits below the rounded product a*b: a plain
        # "fma, then compare with a*b + c in float64" gets them wrong
        e = 2.0**-52
        a[4:8] = [1 + e, 1 + e, 1 + 2.0**-30, 1 + e]
        b[4:8] = [1 + e, -(1 + e), 1 - 2.0**-30, 1 - e]
        c[4:8] = [2.0**-200, -(2.0**-200), -1.0, -(2.0**-120)]
    o = torch.zeros(n, len(KS.IEEE_OPS) * 4, dtype=_tdt(dtype))
    kernel(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c), o)
    got = o.numpy()
    bits = np.int32 if ftype is np.float32 else np.int64
    for k, op in enumerate(KS.IEEE_OPS):
        for r, mode in enumerate(KS.ROUNDING):
            if op == "frsqrt" and mode != "rn":
                continue  # frsqrt has round-to-nearest only: the same value in every column
            want = np.array([_ieee_reference(op, mode, a[i], b[i], c[i], ftype) for i in range(n)], dtype=ftype)
            col = np.ascontiguousarray(got[:, k * 4 + r])
            mism = np.nonzero(col.view(bits) != want.view(bits))[0]
            assert len(mism) == 0, (op, mode, a[mism[0]], b[mism[0]], col[mism[0]], want[mism[0]])


@functools.lru_cache(maxsize=None)
def _finite_16bit(dtype):
    """Every finite value of a 16-bit float format, ascending: (Fractions, bit patterns)."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # the NaN patterns, dropped below
        if dtype == "float16":
            values = bits.astype(np.uint16).view(np.float16).astype(np.float64)
        else:  # bfloat16: the top half of a float32
            values = (bits << 16).view(np.float32).astype(np.float64)
    keep = np.isfinite(values) & ~((values == 0) & (bits >= 0x8000))  # one zero
    pairs = sorted((Fraction(float(v)), int(b)) for v, b in zip(values[keep], bits[keep]))
    return [f for f, _ in pairs], [b for _, b in pairs]


def _nearest_16bit(exact, dtype):
    """The bit pattern of ``exact`` rounded to nearest (ties to even) in a 16-bit format."""
    import bisect

    values, patterns = _finite_16bit(dtype)
    if abs(exact) > values[-1]:  # past the largest finite value: it, or infinity from half an ulp on
        top, below = values[-1], values[-2]
        big = abs(exact) >= top + (top - below) / 2
        magnitude = (0x7C00 if dtype == "float16" else 0x7F80) if big else patterns[-1]
        return magnitude | (0x8000 if exact < 0 else 0)
    k = bisect.bisect_left(values, exact)
    if values[k] == exact:
        return patterns[k]
    lo, hi = k - 1, k  # exact lies between values[lo] and values[hi]
    dlo, dhi = exact - values[lo], values[hi] - exact
    if dlo != dhi:
        return patterns[lo] if dlo < dhi else patterns[hi]
    return patterns[lo] if patterns[lo] % 2 == 0 else patterns[hi]


def _16bit_inputs(dtype, n, rng):
    """Operands for ieee_half: random values of moderate size and a few subnormal-sized ones,
    ``a`` positive (sqrt, rcp), and in row 0 an fma whose exact result lies just below a float16
    midpoint with the part below float32's precision: a float32 fma rounded to float16 gives the
    wrong neighbour there."""
    tdt = _tdt(dtype)
    a = (torch.from_numpy(np.abs(rng.standard_normal(n)) * 4 + 1e-3)).to(tdt)
    b = torch.from_numpy(rng.standard_normal(n) * 4).to(tdt)
    c = torch.from_numpy(rng.standard_normal(n) * 4).to(tdt)
    b[1:6] = torch.tensor([2.0 ** -20, -(2.0 ** -18), 3.0, -0.5, 1.0], dtype=tdt)
    if dtype == "float16":
        a[0], b[0], c[0] = 2.0 ** -11 * (1 + 2.0 ** -10), 1 - 2.0 ** -10, 1 + 2.0 ** -10
    else:
        # fma: 9 * 29 = 261 is a bfloat16 midpoint (between 260 and 262) and 261 +- 2**-100 is not
        # a float64: the sum's rounding error decides the direction (262 / 260), so it must survive
        a[6:8], b[6:8], c[6:8] = 9.0, 29.0, torch.tensor([2.0 ** -100, -(2.0 ** -100)], dtype=tdt)
    return a, b, c


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_C, TVMFFI_LLVM], ids=_path_id)
def test_16bit_ieee_operations_are_correctly_rounded(dtype, dynamic, path):
    """IEEE operations of float16/bfloat16 (round to nearest) bit for bit against exact rational
    arithmetic; frsqrt (two roundings, as for float32) within one unit in the last place."""
    n = 200
    kernel = _compile(KS.ieee_half(n, dtype, dynamic=dynamic), path)
    a, b, c = _16bit_inputs(dtype, n, np.random.default_rng(7))
    o = torch.zeros(n, len(KS.IEEE_OPS), dtype=_tdt(dtype))
    kernel(a, b, c, o)
    got = o.view(torch.int16).numpy().astype(np.int64) & 0xFFFF
    decimal.getcontext().prec = 80
    for k, op in enumerate(KS.IEEE_OPS):
        for i in range(n):
            x, y, z = (Fraction(float(v[i])) for v in (a, b, c))
            if op in ("fsqrt", "frsqrt"):
                root = Fraction(decimal.Decimal(float(a[i])).sqrt())
                exact = root if op == "fsqrt" else 1 / root
            else:
                exact = {"add": x + y, "sub": x - y, "mul": x * y, "fdiv": x / y, "frcp": 1 / x,
                         "fmaf": x * y + z}[op]
            want = _nearest_16bit(exact, dtype)
            if got[i, k] == want or (exact == 0 and got[i, k] & 0x7FFF == 0):
                continue
            off = abs(int(got[i, k]) - want) if (got[i, k] ^ want) & 0x8000 == 0 else None
            assert op == "frsqrt" and off == 1, (op, i, float(a[i]), float(b[i]), float(c[i]), hex(got[i, k]), hex(want))


# -- vector dtypes ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_packed_x2_helpers_on_llvm(dtype):
    n = 16
    kernel = _compile(KS.vectors(n, dtype), TVMFFI_LLVM)
    a = torch.randn(n).to(_tdt(dtype))
    b = torch.randn(n).to(_tdt(dtype))
    o = torch.zeros(8, n, dtype=_tdt(dtype))
    lanes = torch.zeros(n, dtype=_tdt(dtype))
    kernel(a, b, o, lanes)
    tol = 1e-5 if dtype == "float32" else 2e-2
    want = [a + b, a - b, a * b, a * b + a, torch.maximum(a, b), torch.minimum(a, b), a.abs(), a]
    for k, w in enumerate(want):
        torch.testing.assert_close(o[k].float(), w.float(), rtol=tol, atol=tol, msg=f"row {k}")
    assert torch.equal(lanes, b.reshape(-1, 2).flip(1).reshape(-1))


def test_vector_values_are_refused_for_target_c_with_a_clear_error():
    from tilelang_core.errors import LoweringError
    from tilelang_core.lowering import lower

    with pytest.raises(LoweringError, match="target 'c' cannot express"):
        lower(KS.vectors(8, "float16"), target="c")


# -- GPU-only intrinsics on CPU ---------------------------------------------------------------


@pytest.mark.parametrize("target,consumes", [("c", "device_source"), ("llvm", "runtime_module")])
def test_gpu_only_intrinsics_are_refused_on_cpu_targets(target, consumes):
    from tilelang_core.errors import LoweringError
    from tilelang_core.lowering import lower

    with pytest.raises(LoweringError) as info:
        lower(KS.gpu_only(), target=target, consumes=[consumes])
    text = str(info.value)
    assert "is a GPU intrinsic" in text and "tileops_compat_kernels.py:" in text, text


# -- reducers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_LLVM], ids=_path_id)
def test_reducers_v1_and_v2(path):
    m, n = 8, 40
    kernel = _compile(KS.reducers(m, n), path)
    a = torch.randn(m, n)
    ints = torch.randint(0, 2**20, (m, n), dtype=torch.int32)
    s, x, b = torch.zeros(m), torch.zeros(m), torch.zeros(m, dtype=torch.int32)
    kernel(a, s, x, b, ints)
    torch.testing.assert_close(s, a.sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x, torch.clamp(a.amax(1), min=0.5))  # the seed 0.5 takes part once
    assert b.tolist() == [functools.reduce(lambda p, q: p | q, row) for row in ints.tolist()]
