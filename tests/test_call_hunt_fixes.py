"""Findings of a hunt over calling compiled kernels (each test failed before its fix).

- a negative size reached the kernel on tvm_ffi's fast path when the outputs it shapes still had
  a size >= 0 (``B = T.empty([m + 2])``, ``m = -2``): ``tensor([])`` there, the contract's error
  on cython, and a segmentation fault with the access guards off;
- ``out_idx`` naming a parameter the kernel never writes returned uninitialised memory without a
  word (now a warning naming it; TileLang allows it);
- a negative constant extent in a tensor annotation compiled a kernel no call could match;
- ``kernel.export("")`` was taken as the current directory.
"""

from __future__ import annotations

import pathlib
import sys
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.jit.outputs import UnwrittenOutputWarning

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("guards", [True, False], ids=["guards", "no-guards"])
def test_a_negative_size_is_refused_on_every_path(backend, target, guards):
    configs = {} if guards else {"tl.disable_safe_memory_legalize": True}

    @tilelang.jit(target=target, execution_backend=backend, pass_configs=configs)
    def last(m: T.int32):
        B = T.empty([m + 2], T.float32)
        with T.Kernel(1, threads=1) as bx:
            B[m + 1] = 7.0
        return B

    for _ in range(2):  # the second call takes the fast path where there is one
        out = last(2)
        assert out.shape == (4,) and out[3].item() == 7.0
    for m in (-2, -1):
        with pytest.raises(ValueError, match=f"argument 'm' \\(#0\\): gives symbol 'm' = {m}, but a dimension "
                                             "cannot be negative"):
            last(m)


def test_out_idx_naming_a_parameter_the_kernel_never_writes_warns():
    """TileLang allows it (upstream's kda/wy_fast.py returns an output one variant never writes), so
    it compiles, with a warning naming the output: each call returns uninitialised memory there."""

    @T.prim_func
    def twice(A: T.Tensor((8,), "float32"), Unused: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                C[i] = A[i] * 2.0

    for _ in range(2):  # built, then loaded from the cache: both say so
        with pytest.warns(UnwrittenOutputWarning, match="out_idx names 'Unused', which kernel 'twice' never writes"):
            kernel = tilelang.compile(twice, target="c", out_idx=[1, 2])
        _, c = kernel(torch.ones(8))
        torch.testing.assert_close(c, torch.full((8,), 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the written one alone: no warning
        kernel = tilelang.compile(twice, target="c", out_idx=[2])
    torch.testing.assert_close(kernel(torch.ones(8), torch.ones(8)), torch.full((8,), 2.0))


def test_an_output_of_a_static_zero_size_is_not_called_unwritten():
    """The direct form called with empty tensors specialises the kernel to n = 0: its loops fold
    away and nothing writes the output, which warned that the kernel 'never writes' it and advised
    leaving it out of out_idx, though every other size writes it."""

    @tilelang.jit(out_idx=-1, target="c")
    def add(A, B):
        (n,) = A.shape

        @T.prim_func
        def addk(a: T.Tensor(A.shape, A.dtype), b: T.Tensor(B.shape, B.dtype), c: T.Tensor(A.shape, A.dtype)):
            with T.Kernel(T.ceildiv(n, 128)) as bx:
                for i in T.Parallel(128):
                    if bx * 128 + i < n:
                        c[bx * 128 + i] = a[bx * 128 + i] + b[bx * 128 + i]

        return addk

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert add(torch.ones(0), torch.ones(0)).shape == (0,)
        torch.testing.assert_close(add(torch.ones(3), torch.ones(3)), torch.full((3,), 2.0))


def test_a_negative_extent_in_a_tensor_annotation_is_refused_where_it_is_written():
    with pytest.raises(LoweringError, match=r"T.Tensor: shape \(-2, 3\): every extent must be at least 0, got -2"):

        @T.prim_func
        def k(A: T.Tensor((-2, 3), "float32")):
            with T.Kernel(1, threads=1) as bx:
                A[0, 0] = 1.0


def test_export_to_an_empty_path_is_refused(tmp_path):
    @T.prim_func
    def fill(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4) as bx:
            for i in T.Parallel(4):
                A[i] = 1.0

    kernel = tilelang.compile(fill, target="c", execution_backend="cython")
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="path must name the folder to create"):
            kernel.export(bad)
