"""Tile operators (issue 7) on CUDA: the CPU tests' kernels lowered to CUDA C and compiled with
``nvcc -c`` (no device needed), checks of the fragment layout in the generated source, and
``gpu``-marked tests that run the kernels on a device (skipped without one).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

KS = load_private("tileops_kernels")

NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


def _block_sum():
    """``C[0] += sum(B)`` through a shared tile and a one-element fragment (``clear=False``)."""
    import tilelang.language as T

    @T.prim_func
    def block_sum(B: T.Tensor((100,), "float32"), C: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as _:
            S = T.alloc_shared((100,), "float32")
            O = T.alloc_fragment((1,), "float32")
            T.copy(B, S)
            T.copy(C, O)
            T.reduce_sum(S, O, dim=0, clear=False)
            T.copy(O, C)

    return block_sum


def _kernels():
    """(name, prim_func) of every GPU-style test kernel."""
    return [
        ("matmul_f16", KS.matmul(96, 80, 72, 32, 32, 16, "float16", "float32", style="gpu")),
        ("matmul_cpu_style", KS.matmul(96, 80, 72, 32, 32, 16, "float16", "float32", style="cpu")),
        ("matmul_f32", KS.matmul(96, 80, 72, 32, 32, 16, "float32", "float32", style="gpu")),
        ("matmul_tA", KS.matmul(70, 45, 37, 32, 16, 16, "float32", "float32", True, False, style="gpu")),
        ("matmul_tB", KS.matmul(70, 45, 37, 32, 16, 16, "float32", "float32", False, True, style="gpu")),
        ("matmul_tAB", KS.matmul(70, 45, 37, 32, 16, 16, "float16", "float32", True, True, style="gpu")),
        ("copy_edges", KS.copy_edges(50, 37, 16, 16, "gpu")),
        ("copy_dynamic", KS.copy_dynamic(16, 16, "gpu")),
        ("copy_corners", KS.copy_corners(3, 40, 8, "gpu")),
        ("gemm_regions", KS.gemm_regions(12, 10, 16, "gpu")),
        ("fill", KS.fill_kernel(6, 5, "gpu")),
        *[(f"reduce_{op}", KS.reduce_both(12, 20, op, "gpu")) for op in KS.REDUCERS],
        ("atomic", KS.atomic_sum(1000, 64, "gpu")),
        ("softmax", KS.softmax(37, 64, 8, "gpu")),
        ("block_sum", _block_sum()),
    ]


@pytest.fixture(scope="module")
def cuda_sources():
    """name -> artifact of every kernel lowered for ``cuda``."""
    from tilelang_core.lowering import lower

    return {name: lower(func, target="cuda") for name, func in _kernels()}


def test_lowered_sources_use_fragment_layout(cuda_sources):
    """The matmul accumulator (32x32 fp32, 128 threads) becomes 8 registers per thread;
    shared tiles get barriers; atomics become atomicAdd."""
    mm = cuda_sources["matmul_f16"].device_source
    assert re.search(r"float C_t_ptr\[8\];", mm), mm
    assert "__shared__" in mm and "__syncthreads()" in mm
    assert cuda_sources["matmul_f16"].device_kernels[0].launch.block == [128, 1, 1]
    assert "atomicAdd(" in cuda_sources["atomic"].device_source
    # softmax: the row maximum is read by every thread of its row -> shared memory
    sm = cuda_sources["softmax"].device_source
    assert re.search(r"__shared__ .*float mx_ptr\[8\]", sm), sm
    # copy with dynamic rows: guards on the symbol
    assert "m" in [s.name for s in cuda_sources["copy_dynamic"].symbols]


def _translation_units(artifacts: dict) -> list[str]:
    """The device sources in as few .cu files as their preambles allow (one nvcc run each).

    Every source is TVM's CUDA preamble followed by ``extern "C" __global__`` kernels. TVM's
    preambles for float16 and for bfloat16 define the same helpers for different types, so one
    file cannot hold both; a kernel goes into the first file whose preamble has every line of its
    own (the longest preambles open files first). Each kernel is renamed ``<kernel>_<test name>``.
    Helper blocks of atomics and intrinsics (between the markers of ``lowering/atomics.py``, each
    helper behind its own guard) and every ``#include`` are kept, in front of each file.
    """
    from tilelang_core.lowering.atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END

    parts, helpers = [], []
    for name, art in artifacts.items():
        src = art.device_source
        while CUDA_HELPERS_BEGIN in src:
            start, end = src.index(CUDA_HELPERS_BEGIN), src.index(CUDA_HELPERS_END) + len(CUDA_HELPERS_END)
            helpers.append(src[start:end] + "\n")
            src = src[:start] + src[end:]
        cut = src.index('extern "C" __global__')
        body = src[cut:]
        for kernel in art.device_kernels:
            body = re.sub(r"\b" + re.escape(kernel.name) + r"\b", f"{kernel.name}_{name}", body)
        parts.append((src[:cut], body))
    # headers some preamble includes (math_constants.h for infinities, ...) for every kernel
    includes = sorted({line for p, _ in parts for line in p.splitlines() if line.startswith("#include <")})
    units: list[tuple[str, set, list]] = []  # (preamble, its lines, bodies)
    for preamble, body in sorted(parts, key=lambda pb: -len(pb[0])):
        lines = set(preamble.splitlines())
        home = next((u for u in units if lines <= u[1]), None)
        if home is None:
            home = (preamble, lines, [])
            units.append(home)
        home[2].append(body)
    front = "".join(helpers) + "\n".join(includes) + "\n"
    return [front + preamble + "\n".join(bodies) for preamble, _, bodies in units]


def compile_translation_units(artifacts: dict, tmp_path: pathlib.Path, arch: str = "sm_80", suppress: str = "177") -> None:
    """``nvcc -c`` every file of :func:`_translation_units`; fails the test with nvcc's errors."""
    for n, text in enumerate(_translation_units(artifacts)):
        src = tmp_path / f"kernels_{n}.cu"
        src.write_text(text)
        cmd = [NVCC, "-c", f"-arch={arch}", f"-diag-suppress={suppress}", "-o", str(tmp_path / f"kernels_{n}.o"), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_sources, tmp_path):
    compile_translation_units(cuda_sources, tmp_path)


# -- emulated GPU (a mock of the CUDA device) ---------------------------------------------------
#
# The CUDA kernels themselves, compiled by g++ as C++ with a tiny header that maps one CUDA block
# to one OpenMP team: threadIdx = the OpenMP thread number, __syncthreads() = an OpenMP barrier,
# __shared__ = storage shared by the team, atomics = an OpenMP critical section. Blocks run one
# after the other. This runs the fragment layout, barriers and guards of the generated CUDA code
# on this machine, which has no GPU; it is not a performance model.

_EMU_HEADER = r"""
#include <stdint.h>
#include <math.h>
#include <omp.h>
typedef _Float16 half;
struct tl_dim3 { int x, y, z; };
static tl_dim3 tl_block_idx, tl_block_dim;
static inline tl_dim3 tl_thread_idx() {
  int t = omp_get_thread_num();
  tl_dim3 r = {t % tl_block_dim.x, (t / tl_block_dim.x) % tl_block_dim.y, t / (tl_block_dim.x * tl_block_dim.y)};
  return r;
}
#define threadIdx (tl_thread_idx())
#define blockIdx (tl_block_idx)
#define __global__
#define __launch_bounds__(n)
#define __restrict__
#define __shared__ static
#define __syncthreads() _Pragma("omp barrier")
#define uint unsigned int
#define CUDART_INF_F INFINITY
#define CUDART_NAN_F NAN
static inline half __float2half_rn(float x) { return (half)x; }
static inline float __half2float(half x) { return (float)x; }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
template <class T> static inline T atomicAdd(T* p, T v) {
  T old;
  _Pragma("omp critical(tl_atomic)")
  { old = *p; *p = old + v; }
  return old;
}
"""


_EMU_COMBINE = {
    "add": "old + v",
    "max": "(v > old ? (T)v : old)",
    "min": "(v < old ? (T)v : old)",
    "or": "old | v",
    "and": "old & v",
    "xor": "old ^ v",
    "store": "v",
}


_EMU_TMA_TYPES = {"f16": "half", "f32": "float", "i32": "int32_t", "u32": "uint32_t", "u64": "uint64_t"}


def _emulated_tma(body: str) -> str:
    """Emulator versions of the helpers of ``T.atomic_add(..., use_tma=True)`` (lowering/tma_atomics.py):
    the fence and the wait do nothing (the emulated block shares one memory), the readiness check
    is the real one (16-byte aligned addresses, a positive multiple of 16 bytes), and the bulk
    reduction adds its elements inside the atomics' critical section."""
    out = []
    if "tl_tma_store_fence(" in body:
        out.append("static inline void tl_tma_store_fence() {}\n")
    if "tl_tma_store_wait(" in body:
        out.append("static inline void tl_tma_store_wait() {}\n")
    for kind, suffix in sorted(set(re.findall(r"\btl_tma_store_(add|ready)_([a-z0-9]+)\(", body))):
        c_type = _EMU_TMA_TYPES[suffix]
        if kind == "ready":
            out.append(
                f"static inline bool tl_tma_store_ready_{suffix}(const void* d, const void* s, int n) {{ "
                f"unsigned long long b = (unsigned long long)n * sizeof({c_type}); "
                "return n > 0 && (b % 16) == 0 && (((uintptr_t)d | (uintptr_t)s) % 16) == 0; }\n"
            )
        else:
            out.append(
                f"static inline void tl_tma_store_add_{suffix}(void* d, const void* s, int n) {{ "
                f"{c_type}* dst = ({c_type}*)d; const {c_type}* src = (const {c_type}*)s; "
                "_Pragma(\"omp critical(tl_atomic)\") { for (int i = 0; i < n; ++i) dst[i] += src[i]; } }\n"
            )
    return "".join(out)


def _emulated_atomics(body: str) -> str:
    """Emulator versions of the atomic helpers a kernel calls (``tl_atomic_<op>_<dtype>_<order>``,
    lowering/atomics.py): an OpenMP critical section around the read-modify-write; and those of
    the TMA atomic add (:func:`_emulated_tma`)."""
    out = [_emulated_tma(body)]
    for name, op in sorted(set(re.findall(r"\b(tl_atomic_([a-z]+)_[a-z0-9]+_[a-z_]+)\(", body))):
        if op == "load":
            out.append(f"template <class T> static inline T {name}(T* p) {{ T r; _Pragma(\"omp critical(tl_atomic)\") {{ r = *p; }} return r; }}\n")
        else:
            out.append(
                f"template <class T, class V> static inline T {name}(T* p, V v) {{ T old; _Pragma(\"omp critical(tl_atomic)\") "
                f"{{ old = *p; *p = (T)({_EMU_COMBINE[op]}); }} return old; }}\n"
            )
    return "".join(out)


def _emulated(art, build_dir):
    """Compile ``art``'s CUDA kernel for the emulator; return ``run(*tensors)``."""
    import ctypes
    import hashlib

    from tilelang_core.symbolic import compile_expr

    src = art.device_source
    body = src[src.index('extern "C" __global__') :]
    kernel = art.device_kernels[0]
    sig = re.search(re.escape(kernel.name) + r"\(([^)]*)\)\s*\{", body)
    params = [p.strip() for p in sig.group(1).split(",") if p.strip()]
    names = [re.split(r"[\s*]+", p)[-1] for p in params]
    tx, ty, tz = (int(v) for v in kernel.launch.block)
    launcher = (
        f'extern "C" int tl_launch(int gx, int gy, int gz{"".join(", " + p for p in params)}) {{\n'
        f"  omp_set_dynamic(0);\n  int ok = 1;\n  tl_block_dim.x = {tx}; tl_block_dim.y = {ty}; tl_block_dim.z = {tz};\n"
        "  for (int bz = 0; bz < gz; ++bz) for (int by = 0; by < gy; ++by) for (int bx = 0; bx < gx; ++bx) {\n"
        "    tl_block_idx.x = bx; tl_block_idx.y = by; tl_block_idx.z = bz;\n"
        f"    #pragma omp parallel num_threads({tx * ty * tz})\n"
        f"    {{ if (omp_get_num_threads() != {tx * ty * tz}) {{ ok = 0; }} else {{ {kernel.name}({', '.join(names)}); }} }}\n"
        "    if (!ok) return -1;\n  }\n  return 0;\n}\n"
    )
    body = re.sub(r"__shared__ alignas\((\d+)\)", r"alignas(\1) __shared__", body)
    code = _EMU_HEADER + _emulated_atomics(body) + body.replace('extern "C" __global__', "static") + launcher
    code = code.replace(f"static void {kernel.name}(", f"void {kernel.name}(", 1)
    digest = hashlib.sha1(code.encode()).hexdigest()[:16]
    lib = build_dir / f"emu_{digest}.so"
    cpp = build_dir / f"emu_{digest}.cpp"
    cpp.write_text(code)
    cmd = [os.environ.get("CXX", "g++"), "-O1", "-fopenmp", "-shared", "-fPIC", "-w", "-o", str(lib), str(cpp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}\n{code}"
    dll = ctypes.CDLL(str(lib))
    ctypes_of = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
                 "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
                 "float32": ctypes.c_float, "float64": ctypes.c_double}

    def run(*tensors):
        symbols = {s.name: tensors[s.param_index] if s.dim is None  # a scalar parameter
                   else tensors[s.param_index].stride(s.dim) if s.stride else tensors[s.param_index].shape[s.dim]
                   for s in art.symbols}
        grid = [compile_expr(g)(symbols) for g in kernel.launch.grid]
        args = [ctypes.c_int(g) for g in grid]
        for arg in kernel.args:
            if arg.kind == "pointer":
                args.append(ctypes.c_void_p(tensors[arg.param_index].data_ptr()))
            else:
                args.append(ctypes_of[arg.dtype](symbols[arg.symbol] if arg.symbol else tensors[arg.param_index]))
        assert dll.tl_launch(*args) == 0, "OpenMP did not give the emulator a full block of threads"

    return run


def _gxx_openmp_ok() -> bool:
    return shutil.which(os.environ.get("CXX", "g++")) is not None


emulator = pytest.mark.skipif(not _gxx_openmp_ok(), reason="g++ is not installed")

_EMULATED = ("matmul_f16", "matmul_tA", "matmul_tB", "copy_edges", "copy_dynamic", "reduce_absmax", "reduce_sum", "softmax", "atomic",
             "block_sum")


@pytest.fixture(scope="module")
def emulated(cuda_sources, tmp_path_factory):
    """name -> runner of the emulated kernels (built concurrently: g++ runs are the slow part)."""
    from concurrent.futures import ThreadPoolExecutor

    build_dir = tmp_path_factory.mktemp("emulated_gpu")
    with ThreadPoolExecutor(max_workers=4) as pool:
        runners = pool.map(lambda name: _emulated(cuda_sources[name], build_dir), _EMULATED)
        return dict(zip(_EMULATED, runners))


@emulator
def test_emulated_gpu_matmul_and_transposes(emulated):
    """Mock GPU device (OpenMP emulation of a CUDA block): fragment accumulator, shared tiles, edges."""
    a, b = torch.randn(96, 72).half(), torch.randn(72, 80).half()
    c = torch.zeros(96, 80)
    emulated["matmul_f16"](a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    for name, ta, tb in (("matmul_tA", True, False), ("matmul_tB", False, True)):
        a = torch.randn(37, 70) if ta else torch.randn(70, 37)
        b = torch.randn(45, 37) if tb else torch.randn(37, 45)
        c = torch.full((70, 45), float("nan"))
        emulated[name](a, b, c)
        torch.testing.assert_close(c, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-4, atol=1e-4)


@emulator
def test_emulated_gpu_copies_reductions_softmax_atomics(emulated):
    """Mock GPU device (OpenMP emulation of a CUDA block): guards, cross-thread reductions through
    shared memory, barriers, atomicAdd."""
    a = torch.randn(50, 37)
    p, o = torch.full((64, 48), float("nan")), torch.full((50, 37), float("nan"))
    emulated["copy_edges"](a, p, o)
    want = torch.zeros(64, 48)
    want[:50, :37] = a
    torch.testing.assert_close(p, want)
    torch.testing.assert_close(o, 2 * a)
    x = torch.randn(33, 48)
    y = torch.zeros(33, 48, dtype=torch.float16)
    emulated["copy_dynamic"](x, y)
    torch.testing.assert_close(y, x.half())
    s = torch.randn(12, 20)
    r0, r1, r2 = torch.zeros(20), torch.zeros(12), torch.zeros(12)
    emulated["reduce_absmax"](s, r0, r1, r2)
    torch.testing.assert_close(r0, s.abs().amax(0))
    torch.testing.assert_close(r1, s.abs().amax(1))
    r0, r1, r2 = torch.zeros(20), torch.zeros(12), torch.zeros(12)
    emulated["reduce_sum"](s, r0, r1, r2)
    torch.testing.assert_close(r2, 2 * s.sum(1), rtol=1e-5, atol=1e-5)
    x = torch.randn(37, 64) * 3
    y = torch.zeros(37, 64)
    emulated["softmax"](x, y)
    torch.testing.assert_close(y, torch.softmax(x, 1), rtol=1e-5, atol=1e-5)
    v = torch.randn(1000)
    c, d = torch.zeros(1), torch.zeros(64)
    emulated["atomic"](v, c, d)
    torch.testing.assert_close(c, v.sum().reshape(1), rtol=1e-4, atol=1e-3)
    pad = torch.zeros(1024)
    pad[:1000] = v
    torch.testing.assert_close(d, pad.reshape(-1, 64).sum(0), rtol=1e-4, atol=1e-4)


# -- on a device ----------------------------------------------------------------------------

requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")


def _compile(func, **kw):
    import tilelang_core

    return tilelang_core.compile(func, target="cuda", **kw)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_gpu_matmul(dtype):
    func = KS.matmul(96, 80, 72, 32, 32, 16, dtype, "float32", style="gpu")
    tdt = getattr(torch, dtype)
    a = torch.randn(96, 72, device="cuda").to(tdt)
    b = torch.randn(72, 80, device="cuda").to(tdt)
    c = torch.zeros(96, 80, device="cuda")
    _compile(func)(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("trans_A,trans_B", [(True, False), (False, True), (True, True)])
def test_gpu_transposed_gemm(trans_A, trans_B):
    M, N, K = 70, 45, 37
    func = KS.matmul(M, N, K, 32, 16, 16, "float32", "float32", trans_A, trans_B, style="gpu")
    a = torch.randn(K, M, device="cuda") if trans_A else torch.randn(M, K, device="cuda")
    b = torch.randn(N, K, device="cuda") if trans_B else torch.randn(K, N, device="cuda")
    c = torch.zeros(M, N, device="cuda")
    _compile(func)(a, b, c)
    want = (a.T if trans_A else a) @ (b.T if trans_B else b)
    torch.testing.assert_close(c, want, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@requires_gpu
def test_gpu_copy_edges_and_softmax():
    a = torch.randn(50, 37, device="cuda")
    p = torch.full((64, 48), float("nan"), device="cuda")
    o = torch.full((50, 37), float("nan"), device="cuda")
    _compile(KS.copy_edges(50, 37, 16, 16, "gpu"))(a, p, o)
    want = torch.zeros(64, 48, device="cuda")
    want[:50, :37] = a
    torch.testing.assert_close(p, want)
    torch.testing.assert_close(o, 2 * a)
    x = torch.randn(37, 64, device="cuda")
    y = torch.zeros_like(x)
    _compile(KS.softmax(37, 64, 8, "gpu"))(x, y)
    torch.testing.assert_close(y, torch.softmax(x, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("op", KS.REDUCERS)
def test_gpu_reductions(op):
    a = torch.randn(12, 20, device="cuda")
    r0, r1, r2 = torch.zeros(20, device="cuda"), torch.zeros(12, device="cuda"), torch.zeros(12, device="cuda")
    _compile(KS.reduce_both(12, 20, op, "gpu"))(a, r0, r1, r2)
    ref = {"sum": lambda d: a.sum(d), "max": lambda d: a.amax(d), "min": lambda d: a.amin(d),
           "abssum": lambda d: a.abs().sum(d), "absmax": lambda d: a.abs().amax(d)}[op]
    torch.testing.assert_close(r0, ref(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(r1, ref(1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@requires_gpu
def test_gpu_atomic_add():
    a = torch.randn(1000, device="cuda")
    c = torch.zeros(1, device="cuda")
    d = torch.zeros(64, device="cuda")
    _compile(KS.atomic_sum(1000, 64, "gpu"))(a, c, d)
    torch.testing.assert_close(c, a.sum().reshape(1), rtol=1e-4, atol=1e-3)
    pad = torch.zeros(1024, device="cuda")
    pad[:1000] = a
    torch.testing.assert_close(d, pad.reshape(-1, 64).sum(0), rtol=1e-4, atol=1e-4)


def test_fragment_layout_with_2d_threads_and_shared_fallback():
    """threads=(32, 4): a (16, 32) fragment is 4 registers per thread; a fragment read by other
    threads than its owners (transposed access) moves to shared memory; dynamic shapes are rejected."""
    import tilelang.language as T

    from tilelang_core.errors import LoweringError
    from tilelang_core.lowering import lower

    @T.prim_func
    def layout(A: T.Tensor((16, 32), "float32"), B: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=(32, 4)) as _:
            F = T.alloc_fragment((16, 32), "float32")
            G = T.alloc_fragment((16, 32), "float32")
            T.copy(A, F)
            T.copy(A, G)
            for i, j in T.Parallel(16, 32):
                F[i, j] = F[i, j] + 1.0
            for i, j in T.Parallel(32, 16):
                B[i, j] = G[j, i]

    src = lower(layout, target="cuda").device_source
    assert re.search(r"__shared__ .*float G_ptr\[512\]", src), src  # read transposed: shared
    assert re.search(r"float F_ptr\[4\];", src) and "F_ptr[512]" not in src, src  # owner-only: registers

    @T.prim_func
    def owned(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, threads=(32, 4)) as _:
            F = T.alloc_fragment((16, 32), "float32")
            T.copy(A, F)
            for i, j in T.Parallel(16, 32):
                F[i, j] = F[i, j] * 2.0
            T.copy(F, B)

    src = lower(owned, target="cuda").device_source
    assert re.search(r"float F_ptr\[4\];", src), src
    assert "__shared__" not in src

    n = T.dynamic("n")

    @T.prim_func
    def dynamic_fragment(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as _:
            F = T.alloc_fragment((n,), "float32")
            T.copy(A, F)

    with pytest.raises(LoweringError, match=r"T.alloc_fragment: the tile 'F' \(T.alloc_fragment\(\(n,\), \"float32\"\)\) "
                       r"has the shape \(n,\), known only at run time: on GPU targets"):
        lower(dynamic_fragment, target="cuda")


def test_a_reduction_into_one_shared_element_is_accumulated_per_thread(cuda_sources):
    """Every thread of the block reduces the whole tile: each accumulates in a register of its own
    and stores the same value; accumulating in the shared element made all 32 threads
    read-modify-write one word at once (a race)."""
    src = cuda_sources["block_sum"].device_source
    body = src[src.rindex("__global__"):]
    assert not re.search(r"\b(O\w*)\[0\] = \(\1\[0\] \+", body), body
    assert re.search(r"block_acc\[0\] = \(block_acc\[0\] \+ S_ptr\[v\]\)", body), body


@emulator
def test_emulated_gpu_reduction_into_one_element(emulated):
    b, c = torch.randn(100), torch.tensor([0.5])
    emulated["block_sum"](b, c)
    torch.testing.assert_close(c, (b.sum() + 0.5).reshape(1), rtol=1e-5, atol=1e-5)
