"""Loading many exported CUDA kernels of several backends into one process on a machine without a
CUDA driver (a build host checking its exports): every load works, the process does not abort.

Each tvm_ffi CUDA kernel load used to try TVM's CUDA runtime library again. That ``dlopen`` maps
``libcudart`` (a library with thread-local storage) before it fails on the missing driver, and glibc
2.36 keeps the TLS module id it gave out: after about a hundred such loads alternating with cython
CUDA kernels (each carries its static CUDA runtime's TLS), ld.so stopped the process with
"dl-tls.c: _dl_add_to_slotinfo: Assertion `idx == 0' failed". On a machine with a driver the load
succeeds and there is nothing to check (skipped)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import tilelang
import tilelang.language as T

NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)
PAIRS = 150  # the abort came at about 100 alternating pairs


def _has_cuda_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(_has_cuda_driver(), reason="this machine has a CUDA driver: the failing load cannot happen"),
    pytest.mark.skipif(NVCC is None, reason="nvcc not found (the cython backend builds CUDA kernels with it)"),
]


@T.prim_func
def scale(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0


def test_hundreds_of_cython_and_tvm_ffi_cuda_loads_in_one_process_without_a_driver(tmp_path):
    exports = {}
    for backend in ("cython", "tvm_ffi"):
        kernel = tilelang.compile(scale, target="cuda -arch=sm_80", execution_backend=backend)
        exports[backend] = kernel.export(tmp_path / backend)
    for backend, path in exports.items():  # distinct files: each load is a new library
        for i in range(PAIRS):
            shutil.copytree(path, tmp_path / f"{backend}-{i}")
    script = textwrap.dedent(f"""
        import tilelang
        kept = []
        for i in range({PAIRS}):
            for backend in ("cython", "tvm_ffi"):
                kept.append(tilelang.load({str(tmp_path)!r} + f"/{{backend}}-{{i}}"))
        try:
            kept[-1](None, None)
        except Exception as e:  # the load is build-only here; a call says why
            print(type(e).__name__, str(e).split(";")[0])
        print("loaded", len(kept))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert f"loaded {2 * PAIRS}" in proc.stdout, proc.stdout
    assert "cannot load TVM's cuda runtime (libtvm_runtime_cuda.so): libcuda.so.1" in proc.stdout, proc.stdout
