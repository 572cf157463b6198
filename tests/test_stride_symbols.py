"""Symbols read from tensor strides: ``T.StridedTensor((m, n), (s, 1))`` with a dynamic ``s``.

A row stride that no size gives (rows of a larger tensor, a slice of a KV cache) was refused at
lowering ("only used inside expressions"). Such a symbol is now bound from the stride of the
tensor at call time (``SymbolBinding.stride``), by every bundled backend, which declare it
(``dynamic_strides``); a backend that does not is refused before it builds. Checked on every CPU
backend and target against torch, including what a view's neighbours keep, on CUDA by compiling
the source with nvcc and running it on the GPU emulator of test_tileops_cuda.py, and on a device
by the ``gpu``-marked test.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import BackendCapabilityError
from tilelang_core.lowering import lower
from tilelang_core.testkit import on_path, plugin_source, spec_dict, write_distribution

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_strides")

CPU_PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]
BLOCK = 32


def scaled_rows():
    """``Y = 2 * X`` over an ``(m, n)`` window; X rows ``sx`` apart, Y rows ``sy`` apart."""
    m, n, sx, sy = T.dynamic("m"), T.dynamic("n"), T.dynamic("sx"), T.dynamic("sy")

    @T.prim_func
    def scaled_rows(X: T.StridedTensor((m, n), (sx, 1), T.float32), Y: T.StridedTensor((m, n), (sy, 1), T.float32)):
        with T.Kernel(T.ceildiv(n, BLOCK), m, threads=BLOCK) as (bx, by):
            for j in T.Parallel(BLOCK):
                if bx * BLOCK + j < n:
                    Y[by, bx * BLOCK + j] = X[by, bx * BLOCK + j] * 2.0

    return scaled_rows


def shared_stride():
    """Two inputs declared with the same row stride ``s``: a call must give both the same."""
    s = T.dynamic("s")

    @T.prim_func
    def shared_stride(A: T.StridedTensor((4, 8), (s, 1), T.float32), B: T.StridedTensor((4, 8), (s, 1), T.float32),
                      C: T.Tensor((4, 8), T.float32)):
        with T.Kernel(1, threads=8) as _:
            for i, j in T.Parallel(4, 8):
                C[i, j] = A[i, j] + B[i, j]

    return shared_stride


def test_the_symbol_is_bound_from_the_stride():
    artifact = lower(scaled_rows(), target="c")
    bindings = {b.name: (b.param_index, b.dim, b.stride) for b in artifact.symbols}
    assert bindings == {"m": (0, 0, False), "n": (0, 1, False), "sx": (0, 0, True), "sy": (1, 0, True)}
    assert artifact.params[0].strides == ["sx", 1]


def test_a_stride_of_a_dimension_declared_size_1_is_the_last_choice():
    s = T.dynamic("s")

    @T.prim_func
    def two(A: T.StridedTensor((1, 8), (s, 1), T.float32), B: T.StridedTensor((3, 8), (s, 1), T.float32)):
        with T.Kernel(1, threads=8) as _:
            for j in T.Parallel(8):
                B[0, j] = A[0, j]

    (binding,) = lower(two, target="c").symbols
    assert (binding.param_index, binding.dim, binding.stride) == (1, 0, True)


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_strided_views_match_torch(backend, target):
    kernel = tilelang.compile(scaled_rows(), target=target, execution_backend=backend)
    torch.manual_seed(0)
    for rows, cols, wx, wy in [(5, 40, 64, 50), (3, 7, 7, 9), (1, 33, 100, 33)]:
        big_x = torch.randn(rows, wx)
        big_y = torch.zeros(rows, wy + 3)
        x, y = big_x[:, wx - cols:], big_y[:, 3:3 + cols]
        kernel(x, y)
        torch.testing.assert_close(y, 2 * x)
        assert not big_y[:, :3].any() and not big_y[:, 3 + cols:].any(), "wrote outside the window"


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_two_tensors_with_one_stride_symbol_must_agree(backend, target):
    kernel = tilelang.compile(shared_stride(), out_idx=-1, target=target, execution_backend=backend)
    a, b = torch.randn(4, 12)[:, :8], torch.randn(4, 12)[:, 2:10]
    torch.testing.assert_close(kernel(a, b), a + b)
    with pytest.raises(ValueError, match=r"shared_stride\(\) argument 'B' \(#1\): expected strides \(s, 1\) = \(12, 1\), "
                                         r"got strides \(16, 1\)"):
        kernel(a, torch.randn(4, 16)[:, :8])


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_a_stride_symbol_bound_by_the_same_tensor_is_named(backend, target):
    """A transposed tensor for strides (s, 1) binds s = 1 from its first stride: the message names
    s beside its value, so that (1, 1) against (1, 4) reads as 'the last stride must be 1'."""
    kernel = tilelang.compile(shared_stride(), out_idx=-1, target=target, execution_backend=backend)
    with pytest.raises(ValueError, match=r"argument 'A' \(#0\): expected strides \(s, 1\) = \(1, 1\), "
                                         r"got strides \(1, 4\)$"):
        kernel(torch.randn(8, 4).t(), torch.randn(4, 8))


def copy_rows():
    """``Y = X`` where the ``out_idx`` output Y is declared with the input's row stride ``s``."""
    m, n, s = T.dynamic("m"), T.dynamic("n"), T.dynamic("s")

    @T.prim_func
    def copy_rows(X: T.StridedTensor((m, n), (s, 1), T.float32), Y: T.StridedTensor((m, n), (s, 1), T.float32)):
        with T.Kernel(m, threads=BLOCK) as bx:
            for j in T.Parallel(BLOCK):
                if j < n:
                    Y[bx, j] = X[bx, j]

    return copy_rows


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_an_output_is_allocated_with_its_declared_strides(backend, target):
    """The cython backend used to allocate such outputs compact: wrong values, and for a stride
    over the row length a write past the end of the allocation (a heap corruption)."""
    kernel = tilelang.compile(copy_rows(), out_idx=[1], target=target, execution_backend=backend)
    x = torch.randn(5, 40)[:, :20]
    y = kernel(x)
    assert y.shape == (5, 20) and y.stride() == (40, 1)
    assert y.untyped_storage().nbytes() >= (4 * 40 + 20) * 4
    torch.testing.assert_close(y, x)


@pytest.fixture(scope="module")
def cuda_artifact():
    return lower(scaled_rows(), target="cuda")


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_strided_cuda_source_compiles_with_nvcc(cuda_artifact, tmp_path):
    assert any(arg.symbol == "sx" for arg in cuda_artifact.device_kernels[0].args)
    CU.compile_translation_units({"scaled_rows": cuda_artifact}, tmp_path)


@CU.emulator
def test_emulated_gpu_strided_views_match_torch(cuda_artifact, tmp_path):
    """Mock GPU device (the OpenMP emulation of a CUDA block of test_tileops_cuda.py)."""
    run = CU._emulated(cuda_artifact, tmp_path)
    x, y = torch.randn(6, 90)[:, 10:80], torch.zeros(6, 75)[:, :70]
    run(x, y)
    torch.testing.assert_close(y, 2 * x)


@pytest.mark.gpu
@CU.requires_gpu
def test_gpu_strided_views_match_torch():
    kernel = tilelang.compile(scaled_rows(), target="cuda")
    x, y = torch.randn(6, 90, device="cuda")[:, 10:80], torch.zeros(6, 75, device="cuda")[:, :70]
    kernel(x, y)
    torch.testing.assert_close(y, 2 * x)


_RECORDING = """
@hookimpl
def tilelang_backend_build(artifact, options):
    return lambda *args, **kwargs: None
"""


def test_a_backend_that_does_not_declare_dynamic_strides_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    write_distribution(tmp_path, "nostrides", plugin_source(spec_dict("nostrides", {
        "c": {"priority": 0, "consumes": ["device_source"], "device_language": "c"},
    }), body=_RECORDING))
    with on_path(tmp_path):
        with pytest.raises(BackendCapabilityError, match=r"symbol\(s\) 'sx' \(stride\[0\] of 'X'\), 'sy' \(stride\[0\] "
                                                         r"of 'Y'\) from tensor strides.*'nostrides'.*no dynamic_strides"):
            tilelang.compile(scaled_rows(), target="c", execution_backend="nostrides")
