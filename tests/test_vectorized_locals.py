"""Variables and local buffers inside ``T.vectorized`` loops have one value per lane
(lowering/vectorized_locals.py).

TVM's vectorizer kept a buffer declared inside the vectorized loop as one element for all lanes:
``i = base + k; Y[i] = X[i] * 3`` wrote one element of four on ``llvm`` and CUDA, without an
error, and on tvm_ffi/c every vectorized loop failed to compile (TVM printed ``int32_t4``). Each
kernel here runs with every CPU backend and target and is compared with torch; on CUDA the source
is compiled with nvcc and run on the GPU emulator of test_tileops_cuda.py (a mock of the device:
OpenMP threads as the block's threads), and on a device by the ``gpu``-marked test.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_vectorized")
#: The CUDA vector types the generated kernels use, for the emulator.
CU._EMU_HEADER += "".join(
    f"struct {t}4 {{ {t} x, y, z, w; }};\n"
    f"static inline {t}4 make_{t}4({t} a, {t} b, {t} c, {t} d) {{ {t}4 r = {{a, b, c, d}}; return r; }}\n"
    for t in ("int", "float")
)

N, BLOCK, THREADS, LANES = 1024, 256, 64, 4
NAMES = ("index_variable", "value_variable", "in_place", "local_array", "reassigned")


def _kernels(gpu: bool) -> dict:
    """The five kernels; ``gpu``: the block's threads are CUDA threads, else a serial loop."""

    def lanes(body):
        @T.prim_func
        def kernel(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
            with T.Kernel(N // BLOCK, threads=THREADS) as bx:
                if gpu:
                    tx = T.get_thread_binding()
                    for k in T.vectorized(LANES):
                        body(X, Y, bx * BLOCK + tx * LANES, k)
                else:
                    for tx in T.serial(THREADS):
                        for k in T.vectorized(LANES):
                            body(X, Y, bx * BLOCK + tx * LANES, k)

        return kernel

    return {name: lanes(body) for name, body in _BODIES.items()}


@T.macro
def _index_variable(X, Y, base, k):
    i = base + k
    Y[i] = X[i] * 3.0


@T.macro
def _value_variable(X, Y, base, k):
    i = base + k
    v = X[i]
    Y[i] = v * v + 1.0


@T.macro
def _in_place(X, Y, base, k):
    i = base + k
    v = Y[i]
    Y[i] = v * 2.0 + X[i]


@T.macro
def _local_array(X, Y, base, k):
    acc = T.alloc_local((2,), T.float32)
    acc[0] = X[base + k]
    acc[1] = acc[0] * 2.0
    Y[base + k] = acc[1] + acc[0]


@T.macro
def _reassigned(X, Y, base, k):
    v = X[base + k]
    v = v + 1.0
    Y[base + k] = v * 2.0


_BODIES = {"index_variable": _index_variable, "value_variable": _value_variable, "in_place": _in_place,
           "local_array": _local_array, "reassigned": _reassigned}


def _expected(name: str, x: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
    return {
        "index_variable": x * 3,
        "value_variable": x * x + 1,
        "in_place": y0 * 2 + x,
        "local_array": x * 3,
        "reassigned": (x + 1) * 2,
    }[name]


def _inputs():
    torch.manual_seed(0)
    return torch.randn(N), torch.randn(N)


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
@pytest.mark.parametrize("name", NAMES)
def test_vectorized_loop_variables_match_torch_on_cpu(backend, target, name):
    kernel = tilelang.compile(_kernels(gpu=False)[name], target=target, execution_backend=backend)
    x, y0 = _inputs()
    y = y0.clone()
    kernel(x, y)
    torch.testing.assert_close(y, _expected(name, x, y0))


@pytest.fixture(scope="module")
def cuda_sources():
    return {name: lower(func, target="cuda") for name, func in _kernels(gpu=True).items()}


def test_an_index_variable_keeps_cuda_vector_loads_and_stores(cuda_sources):
    source = cuda_sources["index_variable"].device_source
    assert "*(float4*)(Y_ptr" in source and "*(float4*)(X_ptr" in source, source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_vectorized_variable_kernels_compile_with_nvcc(cuda_sources, tmp_path):
    CU.compile_translation_units(cuda_sources, tmp_path)


@CU.emulator
@pytest.mark.parametrize("name", NAMES)
def test_emulated_gpu_vectorized_loop_variables_match_torch(cuda_sources, tmp_path, name):
    """Mock GPU device (the OpenMP emulation of a CUDA block of test_tileops_cuda.py)."""
    run = CU._emulated(cuda_sources[name], tmp_path)
    x, y0 = _inputs()
    y = y0.clone()
    run(x, y)
    torch.testing.assert_close(y, _expected(name, x, y0))


@pytest.mark.gpu
@CU.requires_gpu
@pytest.mark.parametrize("name", NAMES)
def test_gpu_vectorized_loop_variables_match_torch(name):
    kernel = tilelang.compile(_kernels(gpu=True)[name], target="cuda")
    x, y0 = (t.cuda() for t in _inputs())
    y = y0.clone()
    kernel(x, y)
    torch.testing.assert_close(y, _expected(name, x, y0))
