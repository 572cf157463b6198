"""Packed float16/bfloat16 max/min reductions of per-thread tiles on CUDA (lowering/packed_reductions.py).

One kernel per (reduction, dtype, nan_propagate) holds the three per-thread shapes TileLang
packs (``local (8, 4) -> local (4,)`` over dim 0, ``local (8,) -> local (1,)``, ``local (8,) ->
T.alloc_var``) plus an odd extent (``(7,) -> (1,)``: the last element by the scalar code) and a
``clear=False`` reduction over the last dim of ``(4, 8)``. Checked: the CUDA source for sm_80 calls
the packed helpers, sm_75 and the CPU targets keep the scalar code, ``nvcc -c`` compiles them,
and the emulated GPU (its packed helpers written here after CUDA's documented ``__hmax2``/
``__hmin2``/``_nan`` rules) gives torch's amax/amin (NaN rows included) and the CPU paths'
results bit for bit.
"""

from __future__ import annotations

import functools
import pathlib
import re
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge, the GPU emulator
_PAIRS = load_private("backend_pairs")  # CPU (backend, target) paths
_EMU_HEADER = CU._EMU_HEADER

_TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_CASES = [(op, dtype, nan) for op in ("max", "min") for dtype in ("float16", "bfloat16") for nan in (False, True)]


def _case_id(case) -> str:
    op, dtype, nan = case
    return f"{op}-{dtype}" + ("-nan" if nan else "")


@functools.lru_cache(maxsize=None)
def _kernel(op: str, dtype: str, nan: bool):
    import tilelang.language as T

    red = getattr(T, f"reduce_{op}")
    kw = {"nan_propagate": True} if nan else {}

    @T.prim_func
    def main(A: T.Tensor((8, 4), dtype), X: T.Tensor((8,), dtype), Y: T.Tensor((7,), dtype), Z: T.Tensor((4, 8), dtype),
             B: T.Tensor((4,), dtype), C: T.Tensor((1,), dtype), D: T.Tensor((1,), dtype), E: T.Tensor((1,), dtype),
             F: T.Tensor((4,), dtype)):
        with T.Kernel(1, threads=1):
            a = T.alloc_local((8, 4), dtype)
            x = T.alloc_local((8,), dtype)
            y = T.alloc_local((7,), dtype)
            z = T.alloc_local((4, 8), dtype)
            b = T.alloc_local((4,), dtype)
            c = T.alloc_local((1,), dtype)
            d = T.alloc_var(dtype)
            e = T.alloc_local((1,), dtype)
            f = T.alloc_local((4,), dtype)
            for i, j in T.grid(8, 4):
                a[i, j] = A[i, j]
                z[j, i] = Z[j, i]
            for i in T.serial(8):
                x[i] = X[i]
            for i in T.serial(7):
                y[i] = Y[i]
            for i in T.serial(4):
                f[i] = F[i]
            red(a, b, dim=0, **kw)
            red(x, c, dim=0, **kw)
            red(x, d, dim=0, **kw)
            red(y, e, dim=0, **kw)
            red(z, f, dim=1, clear=False, **kw)
            for i in T.serial(4):
                B[i] = b[i]
                F[i] = f[i]
            C[0] = c[0]
            D[0] = d
            E[0] = e[0]

    return main


def _lower(case, arch: str = "sm_80"):
    from tilelang_core.lowering import lower

    return lower(_kernel(*case), target={"kind": "cuda", "arch": arch})


@pytest.fixture(scope="module")
def sources():
    return {_case_id(case): _lower(case) for case in _CASES}


def _reductions(source: str) -> str:
    """The kernels of a CUDA source (without the prelude and helpers)."""
    return source[source.index('extern "C" __global__') :]


@pytest.mark.parametrize("case", _CASES, ids=_case_id)
def test_sm80_source_calls_the_packed_helpers(sources, case):
    op, dtype, nan = case
    src = sources[_case_id(case)].device_source
    helper = f"tl::{op}2" + ("_nan" if nan else "")
    body = _reductions(src)
    # one packed loop per reduction: (8, 4) dim 0, (8,) -> (1,), (8,) -> var, (7,) -> (1,), (4, 8) dim 1
    assert len(re.findall(re.escape(helper) + r"\(", body)) == 5, body
    element = {"float16": "half", "bfloat16": "__nv_bfloat16"}[dtype]
    pair = {"float16": "half2", "bfloat16": "__nv_bfloat162"}[dtype]
    intrinsic = ("__hmax2" if op == "max" else "__hmin2") + ("_nan" if nan else "")
    assert f"{pair} {helper[4:]}(const {pair} a, const {pair} b) {{ return {intrinsic}(a, b); }}" in src
    assert f"void {helper[4:]}({element}* acc, const {element}* x)" in src
    # helpers only when used: the other reduction and the other NaN rule are not defined
    other = f"tl::{'min' if op == 'max' else 'max'}2"
    assert other not in src and f"{helper[4:]}{'' if nan else '_nan'}(" not in src.replace(helper[4:] + "(", "")
    # the (8, 4) dim-0 reduction pairs destination columns: the kept loop runs twice
    assert re.search(r"for \(int \w+_pair = 0; \w+_pair < 2; \+\+\w+_pair\)", body), body
    # sums are not packed: float32 accumulation (docs/tile-operators.md)
    assert "tl::add2" not in src


def test_sm75_and_cpu_targets_keep_the_scalar_code():
    from tilelang_core.lowering import lower

    for case in (("max", "float16", False), ("min", "bfloat16", True)):
        scalar = _lower(case, "sm_75").device_source
        assert "tl::" not in scalar and "__hmax2" not in scalar and "__hmin2" not in scalar
        assert "for (int v_1 = 0; v_1 < 8; ++v_1)" in scalar
        c_source = lower(_kernel(*case), target="c").device_source
        assert "max2" not in c_source and "min2" not in c_source and "tl.packed_reduce" not in c_source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_packed_sources_compile_with_nvcc(sources, tmp_path):
    CU.compile_translation_units({k.replace("-", "_"): v for k, v in sources.items()}, tmp_path, arch="sm_80")


# -- results -------------------------------------------------------------------------------------

#: g++ stand-ins of the CUDA types and intrinsics the packed kernels use, after CUDA's documented
#: rules (cuda_fp16.h / cuda_bf16.h): __hmax2/__hmin2 return the other input when one is NaN and
#: the canonical NaN when both are; the _nan forms return the canonical NaN when either is; two
#: zeros order +0.0 above -0.0. The emulator's half is _Float16; bfloat16 is a 16-bit pattern.
_STANDINS = r"""
#include <string.h>
struct nv_bfloat16 {
  uint16_t bits;
  nv_bfloat16() = default;
  nv_bfloat16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if (f != f) { bits = (uint16_t)((u >> 16) | 0x40); return; }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = (uint16_t)(u >> 16);
  }
  operator float() const { uint32_t u = (uint32_t)bits << 16; float f; memcpy(&f, &u, 4); return f; }
};
typedef nv_bfloat16 __nv_bfloat16;
struct half2 { half x, y; };
struct nv_bfloat162 { nv_bfloat16 x, y; };
typedef nv_bfloat162 __nv_bfloat162;
static inline half2 make_half2(half x, half y) { half2 r = {x, y}; return r; }
static inline nv_bfloat162 make_nv_bfloat162(nv_bfloat16 x, nv_bfloat16 y) { nv_bfloat162 r = {x, y}; return r; }
template <class T> static inline T tl_canonical_nan() { T r; uint16_t b = 0x7fff; memcpy(&r, &b, 2); return r; }
template <class T> static inline bool tl_negative(T v) { uint16_t b; memcpy(&b, &v, 2); return b >> 15; }
template <class T> static inline T tl_pick(T a, T b, bool bigger, bool nan_through) {
  float fa = (float)a, fb = (float)b;
  if (fa != fa || fb != fb) {
    if (nan_through || (fa != fa && fb != fb)) return tl_canonical_nan<T>();
    return fa != fa ? b : a;
  }
  if (fa == 0.0f && fb == 0.0f) return (tl_negative(a) == bigger) ? b : a;  // +0.0 > -0.0
  return bigger ? (fa > fb ? a : b) : (fa < fb ? a : b);
}
namespace tl {
#define TL_STANDIN(NAME, BIGGER, NAN_THROUGH) \
  template <class T> static inline void NAME(T* acc, const T* x) { \
    acc[0] = tl_pick(acc[0], x[0], BIGGER, NAN_THROUGH); acc[1] = tl_pick(acc[1], x[1], BIGGER, NAN_THROUGH); }
TL_STANDIN(max2, true, false)
TL_STANDIN(min2, false, false)
TL_STANDIN(max2_nan, true, true)
TL_STANDIN(min2_nan, false, true)
}
"""


def _emulate(art, tmp_path, monkeypatch):
    """The emulator's runner of ``art`` with the stand-ins above (the kernel's forward declaration
    dropped: the emulator turns the first one into its definition)."""
    import types

    monkeypatch.setattr(CU, "_EMU_HEADER", _EMU_HEADER + _STANDINS)
    source = re.sub(r'^extern "C" __global__ [^{\n]*\);\n', "", art.device_source, flags=re.M)
    view = types.SimpleNamespace(device_source=source, device_kernels=art.device_kernels, symbols=art.symbols)
    return CU._emulated(view, tmp_path)


def _inputs(dtype: str, seed: int):
    """Inputs with NaN: a NaN-only column of A, NaN in X and Y and in rows of Z (one NaN-only)."""
    g = torch.Generator().manual_seed(seed)
    t = _TORCH[dtype]
    a = torch.randn(8, 4, generator=g).to(t)
    a[:, 1] = float("nan")
    a[5, 2] = float("nan")
    x = torch.randn(8, generator=g).to(t)
    x[3] = float("nan")
    y = torch.randn(7, generator=g).to(t)
    y[0] = float("nan")
    z = torch.randn(4, 8, generator=g).to(t)
    z[1] = float("nan")
    z[2, 6] = float("nan")
    f = torch.randn(4, generator=g).to(t)
    return a, x, y, z, f


def _expected(op: str, nan: bool, a, x, y, z, f):
    def red(v, dim):
        if nan:
            return v.amax(dim) if op == "max" else v.amin(dim)
        fill = float("-inf") if op == "max" else float("inf")
        v = torch.where(torch.isnan(v), torch.full_like(v, fill), v)
        return v.amax(dim) if op == "max" else v.amin(dim)

    rz = red(torch.stack([f, *z.T], 1), 1)  # clear=False: the old destination is one more element
    return [red(a, 0), red(x, 0).reshape(1), red(x, 0).reshape(1), red(y, 0).reshape(1), rz]


def _run(fn, a, x, y, z, f):
    outs = [torch.zeros(4, dtype=a.dtype), torch.zeros(1, dtype=a.dtype), torch.zeros(1, dtype=a.dtype),
            torch.zeros(1, dtype=a.dtype), f.clone()]
    fn(a, x, y, z, outs[0], outs[1], outs[2], outs[3], outs[4])
    return outs


def _same_bits(got, want, what):
    """Equal bit patterns, except that any NaN equals any NaN (the packed code returns CUDA's canonical NaN)."""
    assert torch.equal(torch.isnan(got), torch.isnan(want)), f"{what}: {got} vs {want}"
    keep = ~torch.isnan(want)
    assert torch.equal(got[keep].view(torch.int16), want[keep].view(torch.int16)), f"{what}: {got} vs {want}"


@CU.emulator
@pytest.mark.parametrize("case", _CASES, ids=_case_id)
def test_emulated_results_equal_torch_and_the_cpu_paths(sources, case, tmp_path, monkeypatch):
    op, dtype, nan = case
    emulated = _emulate(sources[_case_id(case)], tmp_path, monkeypatch)
    inputs = _inputs(dtype, seed=len(op) + 2 * nan)
    got = _run(emulated, *inputs)
    want = _expected(op, nan, *inputs)
    names = ("(8,4) dim 0", "(8,) -> (1,)", "(8,) -> var", "(7,) -> (1,)", "(4,8) dim 1 clear=False")
    for g, w, name in zip(got, want, names):
        _same_bits(g, w, f"emulated {name}")
    for path in (_PAIRS.CYTHON_C, _PAIRS.TVMFFI_LLVM) if case[0] == "max" and not nan else (_PAIRS.CYTHON_C,):
        cpu = _run(_PAIRS.compile_on(_kernel(*case), path), *inputs)
        for g, c, name in zip(got, cpu, names):
            _same_bits(g, c, f"{'-'.join(path)} {name}")


@CU.emulator
def test_emulated_signed_zeros_follow_the_ptx_rule(tmp_path, monkeypatch):
    """Documented difference: the packed lanes order -0.0 below +0.0 (the scalar code keeps the
    first zero it saw), so max over the reduced dim 0 of (-0, +0) columns is +0 and min is -0."""
    for op, want_sign in (("max", 0), ("min", 1)):
        run = _emulate(_lower((op, "float16", False)), tmp_path, monkeypatch)
        a = torch.ones(8, 4, dtype=torch.float16) * (-1 if op == "max" else 1)
        a[0, 0], a[1, 0] = -0.0, 0.0
        a[0, 2], a[1, 2] = 0.0, -0.0
        b = _run(run, a, *_inputs("float16", 0)[1:])[0]
        assert b[0] == 0 and b[2] == 0
        assert (b[0].view(torch.int16).item() < 0) == bool(want_sign) and (b[2].view(torch.int16).item() < 0) == bool(want_sign)


# -- clear=False over a dimension that is not the last one ---------------------------------------
#
# Found by fuzzing: without the identity store of clear=True, the packed loop over the kept pairs
# had a one-statement body, which the pass wrapped in a SeqStmt of length 1; TVM refused it and
# lowering for CUDA stopped ("A SeqStmt of length 1 is prohibited"), for every float16/bfloat16
# max/min/absmax of a per-thread tile over dim 0 with clear=False.

_ACC_CASES = [(op, dtype) for op in ("max", "min", "absmax") for dtype in ("float16", "bfloat16")]


@functools.lru_cache(maxsize=None)
def _accumulating_kernel(op: str, dtype: str):
    """``B = reduce(A, dim=0)`` combined with B's values (``clear=False``); (2, 1) over dim 1 as well."""
    import tilelang.language as T

    red = getattr(T, f"reduce_{op}")

    @T.prim_func
    def acc(A: T.Tensor((8, 4), dtype), B: T.Tensor((4,), dtype), P: T.Tensor((2, 1), dtype), Q: T.Tensor((2,), dtype)):
        with T.Kernel(1, threads=32):
            a = T.alloc_local((8, 4), dtype)
            b = T.alloc_local((4,), dtype)
            p = T.alloc_local((2, 1), dtype)
            q = T.alloc_local((2,), dtype)
            T.copy(A, a)
            T.copy(B, b)
            T.copy(P, p)
            T.copy(Q, q)
            red(a, b, dim=0, clear=False)
            red(p, q, dim=1, clear=False)
            T.copy(b, B)
            T.copy(q, Q)

    return acc


def _accumulate_inputs(dtype: str):
    g = torch.Generator().manual_seed(11)
    t = _TORCH[dtype]
    return [torch.randn(s, generator=g).to(t) for s in ((8, 4), (4,), (2, 1), (2,))]


def _accumulated(op: str, a, b, p, q):
    def red(x, dim):
        x = x.float().abs() if op == "absmax" else x.float()
        return x.amin(dim) if op == "min" else x.amax(dim)

    pick = torch.minimum if op == "min" else torch.maximum
    return pick(red(a, 0), b.float()).to(b.dtype), pick(red(p, 1), q.float()).to(q.dtype)


@pytest.mark.parametrize("case", _ACC_CASES, ids=lambda c: "-".join(c))
def test_clear_false_over_dim_0_lowers_packed(case):
    from tilelang_core.lowering import lower

    src = lower(_accumulating_kernel(*case), target={"kind": "cuda", "arch": "sm_80"}).device_source
    helper = "tl::" + ("min2" if case[0] == "min" else "max2") + ("_abs" if case[0] == "absmax" else "")
    assert helper + "(" in _reductions(src), src


@CU.emulator
@pytest.mark.parametrize("case", [("max", "float16"), ("min", "bfloat16")], ids=lambda c: "-".join(c))
def test_emulated_clear_false_over_dim_0_equals_torch(case, tmp_path, monkeypatch):
    from tilelang_core.lowering import lower

    run = _emulate(lower(_accumulating_kernel(*case), target={"kind": "cuda", "arch": "sm_80"}), tmp_path, monkeypatch)
    a, b, p, q = _accumulate_inputs(case[1])
    want_b, want_q = _accumulated(case[0], a, b, p, q)
    run(a, b, p, q)
    _same_bits(b, want_b, "emulated (8,4) dim 0 clear=False")
    _same_bits(q, want_q, "emulated (2,1) dim 1 clear=False")
