"""Overlapping tensor arguments (issue 11 §4): a tensor the kernel writes must not share memory with
another argument. The pipeline records which tensors a kernel writes (``TensorParam.written``);
every backend refuses such calls with the same ValueError naming both parameters, and read-only
aliasing stays allowed."""

from __future__ import annotations

import pytest
import torch

import tilelang_core
import tilelang_core.language as T
from tilelang_core.lowering import lower

BACKENDS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


def vector_add(N, block=64):
    @T.prim_func
    def vadd(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return vadd


def axpy(N):
    @T.prim_func
    def axpy_k(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), a: T.float32):
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < N:
                    Y[bx * 32 + i] = Y[bx * 32 + i] + a * X[bx * 32 + i]

    return axpy_k


def tile_copy(M, N):
    @T.prim_func
    def copy_k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            tile = T.alloc_fragment((M, N), "float32")
            T.copy(A, tile)
            T.copy(tile, B)

    return copy_k


def _kernel(func, backend, target, **kw):
    try:
        return tilelang_core.compile(func, target=target, execution_backend=backend, **kw)
    except Exception as exc:  # noqa: BLE001 - a backend missing here is skipped, not failed
        if "not installed" in str(exc) or "not available" in str(exc):
            pytest.skip(f"{backend} not available for {target}: {exc}")
        raise


def test_the_pipeline_records_which_tensors_a_kernel_writes():
    for target in ("c", "llvm", "cuda"):
        consumes = ["runtime_module"] if target == "llvm" else None
        art = lower(vector_add(256), target=target, consumes=consumes)
        assert [(p.name, p.written) for p in art.params] == [("A", False), ("B", False), ("C", True)]
    art = lower(axpy(T.dynamic("n")), target="c")
    assert [(p.name, getattr(p, "written", None)) for p in art.params] == [("X", False), ("Y", True), ("a", None)]
    art = lower(tile_copy(8, 8), target="c")  # a tile operator's store
    assert [p.written for p in art.params] == [False, True]


@pytest.mark.parametrize("backend,target", BACKENDS)
def test_output_shifted_by_one_element_over_an_input_is_refused(backend, target):
    """The issue's call k(buf[0:256], b, buf[1:257]) ran and gave a wrong result on both backends."""
    k = _kernel(vector_add(256), backend, target)
    buf, b = torch.randn(257), torch.randn(256)
    before = buf.clone()
    msg = ("vadd() arguments 'A' (#0) and 'C' (#2) overlap in memory, and the kernel writes 'C'; "
           "pass tensors that do not share memory (for example a .clone())")
    with pytest.raises(ValueError) as info:
        k(buf[0:256], b, buf[1:257])
    assert str(info.value) == msg
    assert torch.equal(buf, before)  # nothing ran
    with pytest.raises(ValueError, match=r"arguments 'B' \(#1\) and 'C' \(#2\) overlap"):
        k(b, buf[0:256], buf[0:256])  # the very same tensor written in place
    with pytest.raises(ValueError, match=r"arguments 'X' \(#0\) and 'Y' \(#1\) overlap.*writes 'Y'"):
        _kernel(axpy(T.dynamic("n")), backend, target)(buf[1:], buf[:-1], 2.0)


@pytest.mark.parametrize("backend,target", BACKENDS)
def test_read_only_aliasing_and_disjoint_views_still_run(backend, target):
    k = _kernel(vector_add(256), backend, target)
    a, c = torch.randn(256), torch.zeros(256)
    k(a, a, c)  # both inputs are only read
    torch.testing.assert_close(c, 2 * a)
    buf = torch.randn(768)
    k(buf[0:256], buf[256:512], buf[512:768])  # one storage, adjacent and disjoint
    torch.testing.assert_close(buf[512:768], buf[0:256] + buf[256:512])
    out = _kernel(vector_add(256), backend, target, out_idx=-1)
    torch.testing.assert_close(out(a, a), 2 * a)  # a fresh output never overlaps
    empty = _kernel(vector_add(T.dynamic("n")), backend, target)
    x = torch.randn(8)
    empty(x[0:0], x[0:0], x[0:0])  # zero elements: no memory, no overlap
