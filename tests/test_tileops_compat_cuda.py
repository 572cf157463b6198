"""TileLang-compatibility operators and intrinsics (issue 13) on CUDA.

The GPU-style kernels of tests/tileops_compat_kernels.py are lowered for ``cuda``: the sources
are checked for the CUDA intrinsics each operator lowers to, compiled together with ``nvcc -c``
(no device needed), and some run on the emulated GPU of tests/test_tileops_cuda.py (a block is an
OpenMP team: fragments, shared memory, barriers and thread indices of the generated code run on
this machine). ``gpu``-marked tests run the kernels on a device (skipped without one).
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

KS = load_private("tileops_compat_kernels")
CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge, the GPU emulator


def _kernels():
    """(name, prim_func) of every kernel lowered for cuda."""
    return [
        ("atomics_i32", KS.atomics(1000, "int32", dynamic=True)),
        ("atomics_u64", KS.atomics(640, "uint64")),
        ("atomics_f32", KS.atomics(640, "float32", bitwise=False)),
        ("atomics_f16", KS.atomics(640, "float16", dynamic=True, bitwise=False)),
        ("atomics_bf16", KS.atomics(200, "bfloat16", bitwise=False)),
        ("atomics_f64", KS.atomics(640, "float64", bitwise=False)),
        ("vector_prev_f32", KS.vector_prev(40, "float32", dynamic=True)),
        ("vector_prev_bf16", KS.vector_prev(40, "bfloat16")),
        ("reduce_bits", KS.reductions(37, 12, 8, "int32", dynamic=True, style="gpu")),
        ("reduce_nan_f32", KS.reductions(16, 10, 8, "float32", style="gpu")),
        ("reduce_nan_bf16", KS.reductions(16, 10, 8, "bfloat16", style="gpu")),
        ("scans", KS.scans(32, 24, 8, style="gpu")),
        ("scans_dynamic", KS.scans(32, 24, 8, dynamic=True, style="gpu")),
        ("layout", KS.layout(3, 5, 4, style="gpu")),
        ("math_f32", KS.math(200)),
        ("math_f16", KS.math(200, "float16", dynamic=True)),
        ("ieee_f32", KS.ieee(128)),
        ("ieee_f64", KS.ieee(128, "float64", dynamic=True)),
        ("ieee_f16", KS.ieee_half(128, "float16")),
        ("ieee_bf16", KS.ieee_half(128, "bfloat16", dynamic=True)),
        ("vectors_f16", KS.vectors(16, "float16")),
        ("vectors_bf16", KS.vectors(16, "bfloat16")),
        ("gpu_only", KS.gpu_only()),
        ("reducers", KS.reducers(8, 40)),
    ]


@pytest.fixture(scope="module")
def cuda_sources():
    from tilelang_core.lowering import lower

    return {name: lower(func, target="cuda") for name, func in _kernels()}


def test_cuda_sources_use_the_cuda_intrinsics(cuda_sources):
    src = {name: art.device_source for name, art in cuda_sources.items()}
    # atomics: hardware atomics where they exist, a CAS loop otherwise; fences for memory orders
    for fn in ("atomicAdd(", "atomicMax(", "atomicMin(", "atomicOr(", "atomicAnd(", "atomicXor("):
        assert fn in src["atomics_i32"], fn
    assert "__threadfence()" in src["atomics_i32"]
    assert "atomicCAS(" in src["atomics_f32"] and "fmaxf(" in src["atomics_f32"]  # float max
    assert "tl_atomic_update16" in src["atomics_bf16"] and "atomicAdd((__half*)p" in src["atomics_f16"]
    # return_prev on atomic_addx2/x4: one atomic per lane, each previous value stored into its lane
    assert len(re.findall(r"Prev_ptr\[[^\]]*\] = tl_atomic_add_f32_relaxed\(", src["vector_prev_f32"])) == 6
    # fast math and IEEE rounding
    for fn in ("__expf(", "__exp10f(", "__logf(", "__log2f(", "__log10f(", "__tanf(", "__cosf(", "__sinf(", "__fdividef("):
        assert fn in src["math_f32"], fn
    assert "__dp4a(" in src["math_f32"]
    for fn in ("__fadd_rz(", "__fsub_ru(", "__fmul_rd(", "__fdiv_rn(", "__frcp_rz(", "__fsqrt_ru(", "__fmaf_rd(", "__frsqrt_rn("):
        assert fn in src["ieee_f32"], fn
    for fn in ("__dadd_rz(", "__dmul_ru(", "__ddiv_rd(", "__drcp_rn(", "__dsqrt_rz(", "__fma_rn(", "__fma_rd("):
        assert fn in src["ieee_f64"], fn
    for name in ("ieee_f16", "ieee_bf16"):  # cuda_fp16.h / cuda_bf16.h, round to nearest
        for fn in ("__hadd_rn(", "__hsub_rn(", "__hmul_rn(", "__hdiv(", "hrcp(", "hsqrt(", "__hfma(", "hrsqrt("):
            assert fn in src[name], (name, fn)
    # warp votes, shuffles, block votes, thread indices, read-only cache
    for fn in ("__any_sync(", "__all_sync(", "__ballot_sync(", "__activemask()", "__syncthreads_count(",
               "__syncthreads_and(", "__syncthreads_or(", "__shfl_xor_sync(", "__shfl_down_sync(",
               "__shfl_up_sync(", "__shfl_sync(", "__match_any_sync(", "__match_all_sync(", "__ldg((&(",
               "__ffs(", "__fns("):
        assert fn in src["gpu_only"], fn
    assert re.search(r"blockIdx\.x\)?\) \* 64\) \+ \(\(int\)threadIdx\.x\)", src["gpu_only"]), src["gpu_only"]
    # the scan of a fragment reads whole rows: the fragment lives in shared memory
    assert "__shared__" in src["scans"]


@pytest.mark.slow
@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_sources, tmp_path):
    """Every kernel compiled for sm_80 (f16/bf16 atomics, match, dp4a), in as few nvcc runs as preambles allow."""
    CU.compile_translation_units(cuda_sources, tmp_path, suppress="177,550")


_EMULATED = ("atomics_i32", "reduce_bits", "scans", "layout", "reducers")


@pytest.fixture(scope="module")
def emulated(cuda_sources, tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    build_dir = tmp_path_factory.mktemp("emulated_compat")
    with ThreadPoolExecutor(max_workers=4) as pool:
        runners = pool.map(lambda name: CU._emulated(cuda_sources[name], build_dir), _EMULATED)
        return dict(zip(_EMULATED, runners))


@CU.emulator
def test_emulated_gpu_scans_transpose_reductions_atomics(emulated):
    """GPU versions on the emulated GPU: a scan per thread over a fragment placed in shared
    memory, transposes spread over the threads, bitwise reductions, atomics from many threads,
    reducers (per-thread copies combined through shared memory)."""
    M, N, bm = 32, 24, 8
    a = torch.randn(M, N)
    s0, s1, s2, v = (torch.full((M, N), float("nan")) for _ in range(4))
    emulated["scans"](a, s0, s1, s2, v)
    torch.testing.assert_close(s0, a.cumsum(1), rtol=1e-5, atol=1e-5)
    tiles = a.reshape(M // bm, bm, N)
    torch.testing.assert_close(s1, tiles.flip(1).cumsum(1).flip(1).reshape(M, N), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s2, a.flip(1).cummax(1).values.flip(1))
    x = torch.randn(3, 5, 4)
    tr, edge, r = torch.zeros(3, 4, 5), torch.zeros(3, 4, 5), torch.zeros(3, 20)
    bits = torch.zeros(3, 5, 4, dtype=torch.int32)
    emulated["layout"](x, tr, edge, r, bits)
    torch.testing.assert_close(tr, x.transpose(1, 2))
    assert torch.equal(bits, x.view(torch.int32))
    ai = torch.randint(-(2**30), 2**30, (37, 12), dtype=torch.int32)
    o = torch.zeros(37, 6, dtype=torch.int32)
    emulated["reduce_bits"](ai, o)
    for row in range(37):
        vals = ai[row].tolist()
        assert o[row, 0].item() == functools.reduce(lambda p, q: p & q, vals)
        assert o[row, 2].item() == functools.reduce(lambda p, q: p ^ q, vals)
    n = 1000
    a1 = torch.randint(0, 4, (n,), dtype=torch.int32)
    c = torch.tensor([0, -1000, 1000, 0, -1, 0, 0, 0], dtype=torch.int32)
    p, s, g, e = torch.zeros(n, dtype=torch.int32), torch.zeros(64, dtype=torch.int32), torch.zeros(8, dtype=torch.int32), torch.tensor([0, 41], dtype=torch.int32)
    emulated["atomics_i32"](a1, c, p, s, g, e)
    assert c[0].item() == a1.sum().item() and c[1].item() == a1.max().item() and c[2].item() == a1.min().item()
    assert sorted(p.tolist() + [c[6].item()]) == sorted((p + a1).tolist() + [0])
    assert e.tolist() == [42, 41]
    # reducers: per-thread partials combined through shared memory
    x = torch.randn(8, 40)
    ints = torch.randint(0, 2**20, (8, 40), dtype=torch.int32)
    s_, m_, b_ = torch.zeros(8), torch.zeros(8), torch.zeros(8, dtype=torch.int32)
    emulated["reducers"](x, s_, m_, b_, ints)
    torch.testing.assert_close(s_, x.sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m_, torch.clamp(x.amax(1), min=0.5))
    assert b_.tolist() == [functools.reduce(lambda p, q: p | q, row) for row in ints.tolist()]


# -- on a device ----------------------------------------------------------------------------

requires_gpu = CU.requires_gpu


def _compile(func):
    import tilelang_core

    return tilelang_core.compile(func, target="cuda")


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16", "bfloat16"])
def test_gpu_atomics(dtype):
    n = 200 if dtype == "bfloat16" else 640
    bitwise = dtype == "int32"
    kernel = _compile(KS.atomics(n, dtype, dynamic=True, bitwise=bitwise))
    tdt = getattr(torch, dtype)
    a = torch.randint(0, 2 if dtype == "bfloat16" else 4, (n,), device="cuda").to(tdt)
    c = torch.tensor([0, -200, 200, 0, -1, 0, 0, 0], device="cuda").to(tdt)
    p, s = torch.zeros(n, device="cuda", dtype=tdt), torch.zeros(64, device="cuda", dtype=tdt)
    g, e = torch.zeros(8, device="cuda", dtype=tdt), torch.tensor([0, 41], device="cuda").to(tdt)
    kernel(a, c, p, s, g, e)
    ai = a.long().cpu()
    assert c[0].item() == ai.sum().item() and c[1].item() == ai.max().item() and c[2].item() == ai.min().item()
    assert sorted(p.long().cpu().tolist() + [int(c[6].item())]) == sorted((p.long().cpu() + ai).tolist() + [0])
    assert e.cpu().tolist() == [42, 41]


@pytest.mark.gpu
@requires_gpu
def test_gpu_scans_reductions_layout():
    M, N = 32, 24
    a = torch.randn(M, N, device="cuda")
    s0, s1, s2, v = (torch.zeros(M, N, device="cuda") for _ in range(4))
    _compile(KS.scans(M, N, 8, style="gpu"))(a, s0, s1, s2, v)
    torch.testing.assert_close(s0, a.cumsum(1), rtol=1e-5, atol=1e-5)
    x = torch.randn(16, 10, device="cuda")
    x[3] = float("nan")
    o = torch.zeros(16, 6, device="cuda")
    _compile(KS.reductions(16, 10, 8, "float32", style="gpu"))(x, o)
    assert torch.isnan(o[3]).all() and not torch.isnan(o[0]).any()
    y = torch.randn(3, 5, 4, device="cuda")
    tr, edge, r = torch.zeros(3, 4, 5, device="cuda"), torch.zeros(3, 4, 5, device="cuda"), torch.zeros(3, 20, device="cuda")
    bits = torch.zeros(3, 5, 4, dtype=torch.int32, device="cuda")
    _compile(KS.layout(3, 5, 4, style="gpu"))(y, tr, edge, r, bits)
    torch.testing.assert_close(tr, y.transpose(1, 2))


@pytest.mark.gpu
@requires_gpu
def test_gpu_math_ieee_and_warp_intrinsics():
    n = 200
    a = torch.rand(n, device="cuda") * 4 - 2
    f = torch.zeros(n, 10, device="cuda")
    q = torch.randint(-128, 128, (n, 4), dtype=torch.int8, device="cuda")
    d, u = torch.zeros(n, dtype=torch.int32, device="cuda"), torch.zeros(n, dtype=torch.int32, device="cuda")
    _compile(KS.math(n))(a, f, q, d, u)
    torch.testing.assert_close(f[:, 0], a.exp(), rtol=1e-4, atol=1e-4)  # __expf: ~2 ulp
    qi = q.long().cpu()
    assert d.cpu().tolist() == [g + int((qi[g] * qi[g]).sum()) for g in range(n)]
    m = 256
    vals = torch.randint(0, 3, (m,), dtype=torch.int32, device="cuda")
    p = torch.zeros(m, dtype=torch.int32, device="cuda")
    bal = torch.zeros(m, dtype=torch.uint64, device="cuda")
    out = torch.zeros(m, device="cuda")
    src = torch.randn(m, device="cuda")
    _compile(KS.gpu_only(m))(src, vals, p, bal, out)
    torch.testing.assert_close(out, 2 * src)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_bf16_ieee_operations_compile_for_gpus_without_bf16_arithmetic(tmp_path):
    """Before sm_80 TVM computes bfloat16 in float32, where cuda_bf16.h's __hfma & co. do not
    apply: those operations are computed in float32/float64 (as on CPU) and compile for sm_75."""
    from tilelang_core.lowering import lower

    art = lower(KS.ieee_half(64, "bfloat16"), target={"kind": "cuda", "arch": "sm_75"})
    assert "__hfma(" not in art.device_source and "hsqrt(" not in art.device_source
    CU.compile_translation_units({"ieee_bf16_sm75": art}, tmp_path, arch="sm_75")
