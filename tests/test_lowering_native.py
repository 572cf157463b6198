"""The generated sources really compile and run: C via cc + ctypes on torch tensors, CUDA via nvcc.

The GPU tests at the end need a CUDA device and are skipped without one.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest
import torch

import tilelang_core.language as T
from tilelang_core.lowering import lower

CC = shutil.which("cc") or shutil.which("gcc")
NVCC = shutil.which("nvcc")


def vector_add(N, block=128, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def matmul(M, N, K, bm=16, bn=16):
    @T.prim_func
    def mm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=(bn, bm)) as (bx, by):
            acc = T.alloc_fragment((bm, bn), "float32")
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = 0.0
            for k in range(K):
                for i, j in T.Parallel(bm, bn):
                    if by * bm + i < M and bx * bn + j < N:
                        acc[i, j] += A[by * bm + i, k] * B[k, bx * bn + j]
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = acc[i, j]

    return mm


def axpy(N):
    @T.prim_func
    def axpy_k(X: T.Tensor((N,), "float64"), Y: T.Tensor((N,), "float64"), a: T.float64):
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < N:
                    Y[bx * 32 + i] = Y[bx * 32 + i] + a * X[bx * 32 + i]

    return axpy_k


_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64, "float32": ctypes.c_float, "float64": ctypes.c_double}


def _load(artifact, tmp_path):
    """Compile artifact.device_source into a shared library and return the entry function."""
    src = tmp_path / f"{artifact.name}.c"
    lib = tmp_path / f"{artifact.name}.so"
    src.write_text(artifact.device_source)
    cmd = [CC, "-O2", "-std=c99", "-shared", "-fPIC", "-fopenmp", "-Wall", "-Werror=implicit-function-declaration",
           str(src), "-o", str(lib)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kernel = artifact.device_kernels[0]
    fn = getattr(ctypes.CDLL(str(lib)), kernel.name)
    fn.restype = ctypes.c_int32
    return kernel, fn


def _call(kernel, fn, tensors, scalars=(), symbols=None):
    """Call the C entry exactly as DeviceKernel.args says (pointers, scalars, symbol values)."""
    args = []
    for arg in kernel.args:
        if arg.kind == "pointer":
            args.append(ctypes.c_void_p(tensors[arg.param_index].data_ptr()))
        elif arg.symbol is not None:
            args.append(_CTYPES[arg.dtype](symbols[arg.symbol]))
        else:
            args.append(_CTYPES[arg.dtype](scalars[arg.param_index]))
    return fn(*args)


pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


@pytest.mark.parametrize("n", [1000, 128, 1])
def test_c_vector_add_static(tmp_path, n):
    art = lower(vector_add(n), target="c")
    kernel, fn = _load(art, tmp_path)
    A, B, C = torch.randn(n), torch.randn(n), torch.zeros(n)
    assert _call(kernel, fn, [A, B, C]) == 0
    assert torch.equal(C, A + B)


def test_c_vector_add_dynamic(tmp_path):
    art = lower(vector_add(T.dynamic("n")), target="c")
    kernel, fn = _load(art, tmp_path)
    for n in (1, 127, 1000, 4099):
        A, B, C = torch.randn(n), torch.randn(n), torch.zeros(n + 3)
        assert _call(kernel, fn, [A, B, C], symbols={"n": n}) == 0
        assert torch.equal(C[:n], A + B) and torch.equal(C[n:], torch.zeros(3))
    assert _call(kernel, fn, [A, B, C], symbols={"n": -1}) == -1  # the symbol check


def test_c_vector_add_serial_blocks(tmp_path):
    art = lower(vector_add(T.dynamic("n")), target="c", pass_configs={"tl.disable_parallel_blocks": True,
                                                                     "tl.disable_vectorize": True})
    kernel, fn = _load(art, tmp_path)
    A, B, C = torch.randn(777), torch.randn(777), torch.zeros(777)
    assert _call(kernel, fn, [A, B, C], symbols={"n": 777}) == 0
    assert torch.equal(C, A + B)


@pytest.mark.parametrize("dynamic", [False, True])
def test_c_matmul(tmp_path, dynamic):
    M = T.dynamic("m") if dynamic else 40
    art = lower(matmul(M, 24, 8), target="c")
    kernel, fn = _load(art, tmp_path)
    A, B, C = torch.randn(40, 8), torch.randn(8, 24), torch.zeros(40, 24)
    assert _call(kernel, fn, [A, B, C], symbols={"m": 40}) == 0
    torch.testing.assert_close(C, A @ B)


def test_c_scalar_param_float64(tmp_path):
    art = lower(axpy(T.dynamic("n")), target="c")
    kernel, fn = _load(art, tmp_path)
    X, Y = torch.randn(100, dtype=torch.float64), torch.randn(100, dtype=torch.float64)
    expected = Y + 2.5 * X
    assert _call(kernel, fn, [X, Y, None], scalars={2: 2.5}, symbols={"n": 100}) == 0
    torch.testing.assert_close(Y, expected)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("which", ["vector_add", "matmul"])
def test_cuda_source_compiles_with_nvcc(tmp_path, which):
    func = vector_add(T.dynamic("n")) if which == "vector_add" else matmul(T.dynamic("m"), 40, 8)
    art = lower(func, target="cuda -arch=sm_80")
    src = tmp_path / "k.cu"
    src.write_text(art.device_source)
    done = subprocess.run([NVCC, "-c", "-arch=sm_80", str(src), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    nm = subprocess.run(["nm", str(tmp_path / "k.o")], capture_output=True, text=True)
    if nm.returncode == 0:
        assert art.device_kernels[0].name in nm.stdout  # extern "C": unmangled symbol


# --- real GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_runtime_module_runs_on_gpu():
    art = lower(vector_add(T.dynamic("n")), target="cuda", consumes=["runtime_module"])
    A, B = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    C = torch.empty_like(A)
    art.tvm_modules[art.name](A, B, C)
    torch.cuda.synchronize()
    torch.testing.assert_close(C, A + B)
    art = lower(matmul(T.dynamic("m"), 40, 8), target="cuda", consumes=["runtime_module"])
    A, B = torch.randn(50, 8, device="cuda"), torch.randn(8, 40, device="cuda")
    C = torch.empty(50, 40, device="cuda")
    art.tvm_modules[art.name](A, B, C)
    torch.cuda.synchronize()
    torch.testing.assert_close(C, A @ B)
