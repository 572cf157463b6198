"""float8 on CUDA before sm_89 (plain ``target="cuda"`` is sm_80): CUDA's ``__nv_fp8_*`` conversions,
as from sm_89 on, not TVM's integer bit arithmetic (lowering/float8_cuda.py).

The kernels run on the emulated GPU of tests/test_tileops_cuda.py (the CUDA source compiled by g++
with cuda_fp8.h's host conversions, the same software conversions the device runs before sm_89).
Decoding is compared with torch; encoding with :func:`_encode`, the conversion CUDA's
``__nv_fp8_e4m3(float)``/``__nv_fp8_e5m2(float)``/``__nv_fp8_e8m0(float)`` constructors make, written
here from the formats' definitions: round to nearest even (e8m0: up, to the next power of two),
saturate to the largest finite value (``__NV_SATFINITE``: an infinity too), NaN to ``0x7f``
(e8m0: ``0xff``), signed zeros and subnormals exact. torch's ``.to(float8)`` differs only past
the largest finite value (float8_e5m2 gives infinity, float8_e8m0fnu NaN) and in a NaN's sign
(torch keeps it; CUDA's NaN is ``0x7f``).
"""

from __future__ import annotations

import bisect
import functools
import math
import os
import pathlib
import shutil
import sys
from fractions import Fraction

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError, TargetFeatureError
from tilelang_core.lowering.float8_cuda import FP8_EVERY_ARCH, FP8_GUARD

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from nvrtc_toolchain import nvrtc_available  # noqa: E402
from private_modules import load_private  # noqa: E402

FP8 = ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")
TORCH = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "float8_e8m0fnu": torch.float8_e8m0fnu,
         "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: The code after the largest finite one, as if the format went on (e4m3fn: 480, e5m2: infinity).
_PAST_MAX = {"float8_e4m3fn": (0x7F, Fraction(480)), "float8_e5m2": (0x7C, Fraction(65536))}

emu = load_private("test_tileops_cuda", "float8_cuda_emulator")
CUDA_INCLUDE = next((p for p in (pathlib.Path(emu.NVCC).resolve().parent.parent / "include" if emu.NVCC else None,
                                 pathlib.Path("/usr/local/cuda/include")) if p and (p / "cuda_fp8.h").exists()), None)
# the emulator's header with CUDA's float16/bfloat16/float8 types (their host conversions) for its own
HEADER = emu._EMU_HEADER.replace("typedef _Float16 half;\n", "#include <cuda_fp8.h>\n").replace(
    "static inline half __float2half_rn(float x) { return (half)x; }\n"
    "static inline float __half2float(half x) { return (float)x; }\n", "")
#: TVM's 4-lane float16/bfloat16 vectors (``half4``, ``nv_bfloat164``) and their float8 conversions, from the prelude.
VECTOR_PRELUDE = ("template <typename T, typename TVec2>", "#if (((__CUDACC_VER_MAJOR__")
emulated = pytest.mark.skipif(CUDA_INCLUDE is None or shutil.which(os.environ.get("CXX", "g++")) is None,
                              reason="needs g++ and CUDA's cuda_fp8.h")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``run(func, *tensors)``: ``func`` lowered for ``cuda`` (sm_80), run on the emulated GPU."""
    build = tmp_path_factory.mktemp("float8_emulated")
    saved = os.environ.get("CPLUS_INCLUDE_PATH")
    os.environ["CPLUS_INCLUDE_PATH"] = str(CUDA_INCLUDE) + (os.pathsep + saved if saved else "")
    try:
        def run(func, *tensors):
            art = tilelang.lower(func, target="cuda")
            start, end = VECTOR_PRELUDE
            src = art.device_source
            emu._EMU_HEADER = HEADER + (src[src.index(start):src.index(end)] if start in src else "")
            emu._emulated(art, build)(*tensors)

        yield run
    finally:
        if saved is None:
            os.environ.pop("CPLUS_INCLUDE_PATH", None)
        else:
            os.environ["CPLUS_INCLUDE_PATH"] = saved


def _cast(src, dst, n, lanes=1):
    threads = min(128, n // lanes)

    @T.prim_func
    def cast(A: T.Tensor((n,), src), B: T.Tensor((n,), dst)):
        with T.Kernel(n // (threads * lanes), threads=threads) as bx:
            tx = T.get_thread_binding()
            for v in T.vectorized(lanes):
                B[(bx * threads + tx) * lanes + v] = T.Cast(dst, A[(bx * threads + tx) * lanes + v])

    return cast


def _all_bytes(dtype):
    return torch.arange(256, dtype=torch.uint8).view(TORCH[dtype])


def _same(got, ref):
    """Equal values, NaN equal to NaN, zeros by sign."""
    got, ref = got.double(), ref.double()
    same = (got == ref) & (torch.signbit(got) == torch.signbit(ref))
    return bool((same | (got.isnan() & ref.isnan())).all())


@functools.lru_cache(maxsize=None)
def _finite_codes(dtype):
    """``{value: code}`` of the non-negative finite values of ``dtype`` (exact)."""
    values = _all_bytes(dtype).double().tolist()
    signed = dtype != "float8_e8m0fnu"
    return {Fraction(values[b]): b for b in range(256) if math.isfinite(values[b]) and not (signed and b & 0x80)}


@functools.lru_cache(maxsize=None)
def _ladder(dtype):
    """The non-negative finite values of ``dtype`` and the one past the largest, ascending, with their codes."""
    pairs = sorted(_finite_codes(dtype).items())
    past_code, past = _PAST_MAX[dtype]
    return [v for v, _ in pairs] + [past], [c for _, c in pairs] + [past_code]


def _encode(x: float, dtype: str) -> int:
    """The byte CUDA's ``__nv_fp8_*`` constructor makes of ``x`` (see the module docstring)."""
    if math.isnan(x):
        return 0xFF if dtype == "float8_e8m0fnu" else 0x7F
    if dtype == "float8_e8m0fnu":  # |x| rounded up to 2**k, k in [-127, 127]
        if math.isinf(x):
            return 0xFE
        m, e = math.frexp(abs(x))  # |x| = m * 2**e, 0.5 <= m < 1
        return min(max(e - 1 if m == 0.5 else e, -127), 127) + 127 if x != 0 else 0
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    values, codes = _ladder(dtype)
    if math.isinf(x):
        return codes[-2] | sign
    a = Fraction(abs(x))
    i = bisect.bisect_left(values, a)
    if i == len(values):
        return codes[-2] | sign
    if values[i] != a and i > 0:  # between values[i - 1] and values[i]: the nearer, ties to the even code
        lo, hi = values[i] - a, a - values[i - 1]
        i = i - 1 if hi < lo or (hi == lo and codes[i - 1] % 2 == 0) else i
    return codes[min(i, len(codes) - 2)] | sign  # past the largest: the largest (__NV_SATFINITE)


def _boundaries(dtype):
    """float32 values at and around every rounding boundary of ``dtype``: each value, each midpoint
    of two neighbours and the float32 values right below and above it, signed zeros, the overflow
    threshold and beyond, infinities, NaN; all with both signs."""
    values = sorted(_finite_codes(dtype)) + ([_PAST_MAX[dtype][1]] if dtype in _PAST_MAX else [])
    out = [0.0, float("inf"), float("nan"), 1e-45, 3e38, float(values[-1]) * 4]
    for lo, hi in zip(values, values[1:]):
        mid = float((lo + hi) / 2)
        out += [float(lo), mid, math.nextafter(mid, -math.inf), math.nextafter(mid, math.inf)]
    if dtype == "float8_e8m0fnu":  # a power of two and the values right around it
        out += [math.nextafter(float(v), d) for v in values for d in (-math.inf, math.inf)]
    xs = torch.tensor(out, dtype=torch.float32)
    return torch.cat([xs, -xs])


def _padded(x, multiple=128):
    n = -(-x.numel() // multiple) * multiple
    return torch.cat([x, x[:1].expand(n - x.numel())]) if n != x.numel() else x


# -- the generated source ----------------------------------------------------------------------


@pytest.mark.parametrize("src,dst", [("float8_e4m3fn", "float32"), ("float32", "float8_e5m2"), ("float16", "float8_e4m3fn"),
                                     ("float8_e8m0fnu", "bfloat16")])
def test_sm80_source_is_the_sm90_source(src, dst):
    """sm_80 keeps CUDA's float8 types as sm_90 does (TVM turned them into bytes and bit arithmetic)."""
    sm80 = tilelang.lower(_cast(src, dst, 256), target="cuda").device_source
    assert sm80 == tilelang.lower(_cast(src, dst, 256), target="cuda -arch=sm_90").device_source
    assert FP8_EVERY_ARCH in sm80 and FP8_GUARD not in sm80  # cuda_fp8.h for sm_80 too
    assert "(uint)120" not in sm80 and "(uint)112" not in sm80  # TVM's exponent re-biasing


def test_float8_formats_cuda_has_no_type_for_are_refused():
    with pytest.raises(TargetFeatureError, match=r"uses float8_e4m3fnuz \(tensor parameter 'A'\), which CUDA targets cannot "
                                                 r"compile: CUDA's float8 types \(cuda_fp8.h\) are float8_e4m3fn, float8_e5m2"):
        tilelang.lower(_cast("float8_e4m3fnuz", "float32", 256), target="cuda")


def test_float8_vector_values_of_more_than_four_lanes_are_refused():
    @T.prim_func
    def cast8(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float8_e4m3fn")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            B[T.Ramp(tx * 8, 1, 8)] = T.Cast("float8_e4m3fnx8", A[T.Ramp(tx * 8, 1, 8)])

    with pytest.raises(LoweringError, match=r"float8 vector conversion float32x8 -> float8_e4m3fnx8 .*T\.vectorized\(4\)"):
        tilelang.lower(cast8, target="cuda")


def test_a_float8_vectorized_loop_of_eight_lanes_converts_four_at_a_time():
    """lowering/vector_lanes.py splits it (it was refused like the vector value above)."""
    source = tilelang.lower(_cast("float32", "float8_e4m3fn", 256, lanes=8), target="cuda").device_source
    assert source.count("(__nv_fp8x4_e4m3)(*(float4*)") == 2, source


# -- values on the emulated GPU ----------------------------------------------------------------


@emulated
@pytest.mark.parametrize("dst", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("dtype", FP8)
def test_every_byte_decodes_as_torch_decodes_it(run, dtype, dst):
    a = _all_bytes(dtype)
    b = torch.empty(256, dtype=TORCH[dst])
    run(_cast(dtype, dst, 256), a, b)
    ref = a.float().to(TORCH[dst])
    assert _same(b, ref), [(hex(i), float(b[i]), float(ref[i])) for i in range(256) if not _same(b[i:i + 1], ref[i:i + 1])][:8]


@emulated
@pytest.mark.parametrize("dtype", FP8)
def test_float32_encodes_as_cuda_rounds_at_every_boundary(run, dtype):
    x = _padded(_boundaries(dtype))
    y = torch.empty(x.numel(), dtype=TORCH[dtype])
    run(_cast("float32", dtype, x.numel()), x, y)
    got = y.view(torch.uint8).tolist()
    ref = [_encode(float(v), dtype) for v in x]
    bad = [(float(v), hex(g), hex(r)) for v, g, r in zip(x, got, ref) if g != r]
    assert not bad, bad[:8]
    # torch's conversion differs where it does not saturate (overflow, infinities) and in a NaN's sign only
    by_torch = x.to(TORCH[dtype]).view(torch.uint8).tolist()
    top = float(max(_finite_codes(dtype)))
    differ = {float(v) for v, g, t in zip(x, got, by_torch) if g != t and not math.isnan(v)}
    assert all(abs(v) > top for v in differ), sorted(differ)[:8]


@emulated
@pytest.mark.parametrize("src", ["float16", "bfloat16"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_every_16_bit_float_encodes_as_cuda_rounds(run, dtype, src):
    x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(TORCH[src])
    y = torch.empty(65536, dtype=TORCH[dtype])
    run(_cast(src, dtype, 65536), x, y)
    got = y.view(torch.uint8).tolist()
    bad = [(v, hex(g)) for v, g in zip(x.float().tolist(), got) if g != _encode(v, dtype)]
    assert not bad, bad[:8]


@emulated
@pytest.mark.parametrize("lanes", [2, 4, 8])  # 8: two vectors of 4 (lowering/vector_lanes.py)
@pytest.mark.parametrize("other", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("dtype", FP8)
def test_vector_conversions_give_the_scalar_ones(run, dtype, other, lanes):
    a = _all_bytes(dtype)
    b = torch.empty(256, dtype=TORCH[other])
    run(_cast(dtype, other, 256, lanes), a, b)
    assert _same(b, a.float().to(TORCH[other]))
    x = _padded(_boundaries(dtype).to(TORCH[other]), 128 * lanes)
    y = torch.empty(x.numel(), dtype=TORCH[dtype])
    run(_cast(other, dtype, x.numel(), lanes), x, y)
    assert y.view(torch.uint8).tolist() == [_encode(float(v), dtype) for v in x.float()]


def _arith(dtype, lanes):
    @T.prim_func
    def arith(A: T.Tensor((65536,), dtype), B: T.Tensor((65536,), dtype), C: T.Tensor((65536,), dtype),
              D: T.Tensor((65536,), dtype)):
        with T.Kernel(65536 // (128 * lanes), threads=128) as bx:
            tx = T.get_thread_binding()
            for v in T.vectorized(lanes):
                i = (bx * 128 + tx) * lanes + v
                C[i] = A[i] * B[i] + A[i]
                D[i] = T.if_then_else(A[i] < B[i], T.max(A[i], B[i]) - A[i], A[i] / B[i])

    return arith


@pytest.mark.slow
@emulated
@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_arithmetic_is_float32_rounded_to_float8_after_every_operation(run, dtype, lanes):
    """Every pair of bytes: ``a * b + a`` rounds the product to float8 first; ``max``, ``-``, ``/`` and ``<``."""
    a = torch.arange(256, dtype=torch.uint8).repeat_interleave(256).view(TORCH[dtype])
    b = torch.arange(256, dtype=torch.uint8).repeat(256).view(TORCH[dtype])
    c, d = torch.empty_like(a), torch.empty_like(a)
    run(_arith(dtype, lanes), a, b, c, d)
    fa, fb = a.float(), b.float()

    def rounded(t):
        return torch.tensor([_encode(v, dtype) for v in t.tolist()], dtype=torch.uint8).view(TORCH[dtype]).float()

    assert _same(c.float(), rounded(rounded(fa * fb) + fa))
    assert _same(d.float(), torch.where(fa < fb, rounded(rounded(torch.maximum(fa, fb)) - fa), rounded(fa / fb)))


@emulated
def test_conversion_between_float8_formats_rounds_once(run):
    a = _all_bytes("float8_e4m3fn")
    b = torch.empty(256, dtype=torch.float8_e5m2)
    run(_cast("float8_e4m3fn", "float8_e5m2", 256), a, b)
    assert b.view(torch.uint8).tolist() == [_encode(v, "float8_e5m2") for v in a.float().tolist()]


# -- device compilers --------------------------------------------------------------------------


def _artifacts():
    kernels = {f"{s}_to_{d}_x{n}": _cast(s, d, 256, n) for f in FP8 for o in ("float32", "float16", "bfloat16")
               for s, d in ((f, o), (o, f)) for n in (1, 2, 4)}
    kernels.update({f"arith_{f}_x{n}": _arith(f, n) for f in ("float8_e4m3fn", "float8_e5m2") for n in (1, 2, 4)})
    return {name: tilelang.lower(k, target="cuda") for name, k in kernels.items()}


@pytest.mark.slow
@pytest.mark.skipif(emu.NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_float8_sources_compile_with_nvcc(arch, tmp_path):
    emu.compile_translation_units(_artifacts(), tmp_path, arch=arch)


@pytest.mark.slow
@pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend and its NVRTC wheels")
def test_float8_sources_compile_with_nvrtc():
    from tilelang_backend_nvrtc.arch import Arch
    from tilelang_backend_nvrtc.compiler import compile_cubin

    for name, art in _artifacts().items():
        for arch in ("sm_80", "sm_90"):
            assert compile_cubin(art.device_kernels[0].name, art.device_source, Arch.parse(arch)) is not None, (name, arch)


def test_runtime_module_source_includes_cuda_fp8_for_sm80():
    """TVM's own CUDA build (consumes=['runtime_module']) gets the fixed source too (through
    ``tvm_callback_cuda_postproc``); the hook TVM had before is back afterwards."""
    import tvm_ffi

    before = tvm_ffi.get_global_func("tvm_callback_cuda_postproc", allow_missing=True)
    art = tilelang.lower(_arith("float8_e4m3fn", 4), target="cuda", consumes=["runtime_module"])
    assert FP8_EVERY_ARCH in art.runtime_source and FP8_GUARD not in art.runtime_source
    after = tvm_ffi.get_global_func("tvm_callback_cuda_postproc", allow_missing=True)
    assert (before is None) == (after is None)
