"""``T.access_ptr`` and ``T.import_source`` on CUDA: the generated source, ``nvcc -c`` (no device
needed) and a run on the emulated GPU of tests/test_tileops_cuda.py (a block is an OpenMP team).

The kernels pass pointers into global, shared, per-thread local and fragment tiles to
``__device__`` functions defined with ``T.import_source``, as upstream's dequantizing GEMV
example does with its ``lop3`` decoder.
"""

from __future__ import annotations

import pathlib
import re
import sys
import subprocess

import pytest
import torch

import tilelang.language as T
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda")

_COPY4 = r"""
__device__ void tl_user_copy4(float *dst, const float *src) {
  for (int i = 0; i < 4; ++i) dst[i] = src[i];
}
"""
_DOUBLE4 = r"""
__device__ void tl_user_double4(float *x) {
  for (int i = 0; i < 4; ++i) x[i] = x[i] * 2.0f;
}
"""


def _scopes(n=256, threads=32):
    """Each thread moves 4 elements: A -> local -> shared -> fragment -> B, doubling them in the
    local tile; every move is a call of an imported function with two pointers."""
    blk = threads * 4

    @T.prim_func
    def scopes(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // blk, threads=threads) as bx:
            T.import_source(_COPY4)
            T.import_source(_DOUBLE4)
            T.import_source(_COPY4)  # the same text again: placed once
            S = T.alloc_shared((blk,), "float32")
            L = T.alloc_local((4,), "float32")
            F = T.alloc_fragment((blk,), "float32")
            tx = T.get_thread_binding()
            T.call_extern("handle", "tl_user_copy4", T.access_ptr(L, "w"), T.access_ptr(A[bx * blk + tx * 4], "r", 4))
            T.call_extern("handle", "tl_user_double4", T.access_ptr(L[0], "rw", 4))
            T.call_extern("handle", "tl_user_copy4", T.access_ptr(S[tx * 4], "w", 4), T.access_ptr(L[0], "r", 4))
            T.call_extern("handle", "tl_user_copy4", T.access_ptr(F[tx * 4], "w", 4), T.access_ptr(S[tx * 4], "r", 4))
            T.call_extern("handle", "tl_user_copy4", T.access_ptr(B[bx * blk + tx * 4], "w", 4), T.access_ptr(F[tx * 4], "r", 4))

    return scopes


_DECODE = r"""
template <typename T1, typename T2>
__device__ void tl_user_decode_i4(T1 *packed, T2 *out, int n) {
  for (int i = 0; i < n; ++i) out[i] = (T2)((packed[i / 2] >> (4 * (i % 2))) & 0xF);
}
__device__ void tl_user_double1(float *x) { x[0] = x[0] * 2.0f; }
"""


def _decode(n=1024, threads=64):
    """Upstream's GEMV pattern: whole per-thread local tiles passed with T.access_ptr(buf, "r"/"w")
    to a templated function of T.import_source, called with T.call_extern(dtype=float16); and
    one-element pointers into a fragment from a T.Parallel loop (each thread its own element)."""
    blocks = n // (threads * 8)

    @T.prim_func
    def decode(Q: T.Tensor((n // 2,), "int8"), O: T.Tensor((n,), "float16"), P: T.Tensor((blocks * threads,), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            T.import_source(_DECODE)
            q = T.alloc_local((4,), "int8")
            d = T.alloc_local((8,), "float16")
            one = T.alloc_fragment((threads,), "float32")
            tx = T.get_thread_binding()
            for i in T.serial(4):
                q[i] = Q[(bx * threads + tx) * 4 + i]
            T.call_extern("float16", "tl_user_decode_i4", T.access_ptr(q, "r"), T.access_ptr(d, "w"), 8)
            for i in T.serial(8):
                O[(bx * threads + tx) * 8 + i] = d[i]
            for i in T.Parallel(threads):
                one[i] = T.float32(i)
                T.call_extern("handle", "tl_user_double1", T.access_ptr(one[i], "rw"))
                P[bx * threads + i] = one[i]

    return decode


@pytest.fixture(scope="module")
def arts():
    return {"scopes": lower(_scopes(), target="cuda"), "decode": lower(_decode(), target="cuda")}


def test_cuda_source_has_the_imported_functions_and_element_pointers(arts):
    src = arts["scopes"].device_source
    kernel_at = src.index('extern "C" __global__')
    assert src.count("void tl_user_copy4(float *dst") == 1 and src.count("void tl_user_double4(") == 1
    assert src.index("void tl_user_copy4(float *dst") < src.index("void tl_user_double4(") < kernel_at
    body = src[kernel_at:]
    # pointers to elements of each scope; no cast of the void calls
    assert "tl_user_copy4((&(L_ptr[0])), (&(A_ptr[" in body
    assert re.search(r"tl_user_copy4\(\(&\(S_ptr\[\(tx\[0\] \* 4\)\]\)\), \(&\(L_ptr\[0\]\)\)\);", body), body
    assert "(void*)" not in body
    # a fragment behind a pointer to 4 elements lives in shared memory (row-major, contiguous)
    assert re.search(r"__shared__ alignas\(\d+\) float F_ptr\[128\];", body), body
    dec = arts["decode"].device_source
    assert "tl_user_decode_i4((&(q_ptr[0])), (&(d_ptr[0])), 8);" in dec
    # a one-element pointer into a fragment, from T.Parallel: the thread's own register
    assert re.search(r"^\s*(alignas\(\d+\) )?float one\[1\];", dec, re.M), dec
    assert "tl_user_double1((&(one[0])));" in dec


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(arts, tmp_path):
    for name, art in arts.items():
        cu = tmp_path / f"{name}.cu"
        cu.write_text(art.device_source)
        cmd = [CU.NVCC, "-c", "-arch=sm_80", "-diag-suppress=177", "-o", str(tmp_path / f"{name}.o"), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"


def _emulated(art, imported, build_dir):
    """``art``'s kernel on the emulated GPU. The emulator compiles from the kernel's declaration on,
    so the imported functions go right after it, as ``static`` functions."""
    from types import SimpleNamespace

    src = art.device_source
    decl_end = src.index("\n", src.index('extern "C" __global__')) + 1
    text = "#define __device__ static inline\n" + imported
    return CU._emulated(
        SimpleNamespace(device_source=src[:decl_end] + text + src[decl_end:], device_kernels=art.device_kernels,
                        symbols=art.symbols),
        build_dir,
    )


@CU.emulator
def test_emulated_gpu_runs_the_pointer_kernels(arts, tmp_path):
    """Tiles moved through local, shared and fragment memory; int4 values decoded into a local
    float16 tile; one-element fragment pointers, each thread its own."""
    run = _emulated(arts["scopes"], _COPY4 + _DOUBLE4, tmp_path)
    a = torch.randn(256)
    b = torch.zeros(256)
    run(a, b)
    torch.testing.assert_close(b, a * 2)
    run = _emulated(arts["decode"], _DECODE, tmp_path)
    nibbles = torch.randint(0, 16, (1024,), dtype=torch.int32)
    q = (nibbles[0::2] | (nibbles[1::2] << 4)).to(torch.uint8).view(torch.int8)
    o = torch.zeros(1024, dtype=torch.float16)
    p = torch.zeros(128)
    run(q, o, p)
    assert torch.equal(o, nibbles.to(torch.float16))
    assert torch.equal(p, (torch.arange(128) % 64).float() * 2)


def test_metal_source_gets_the_imported_text_before_its_kernel():
    @T.prim_func
    def ones(B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            T.import_source("inline void tl_user_one(device float *dst) { dst[0] = 1.0f; }\n")
            T.call_extern("handle", "tl_user_one", T.access_ptr(B[bx * 128], "w"))

    src = lower(ones, target="metal").device_source
    assert src.count("inline void tl_user_one(device float *dst)") == 1
    assert src.index("inline void tl_user_one") < src.index("kernel void ones_kernel")
    assert "tl_user_one((&(B_ptr[(((int)blockIdx) * 128)])));" in src
