"""Findings of a hunt over the profiler and ``JITKernel`` API (each test failed before its fix)."""

from __future__ import annotations

import io

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.profiler.profiler import ProfilerError


def _double(n=64):
    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                C[i] = A[i] * 2

    return double


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(_double(), out_idx=-1, target="c", execution_backend="cython")


@pytest.mark.parametrize("reference", [lambda a: (None,), lambda a: [None]], ids=["tuple", "list"])
def test_a_reference_returning_none_for_every_output_is_not_a_pass(kernel, reference):
    """Every output skipped compared nothing, and the check (and the autotuner's) passed."""
    with pytest.raises(ProfilerError, match="nothing to compare: reference_program returned None for every output"):
        kernel.get_profiler().assert_allclose(reference)
    kernel.get_profiler().assert_allclose(lambda a: a * 2)  # a real reference still passes


def test_tilelangs_kernel_attributes(kernel):
    assert kernel.kernel_source == kernel.get_kernel_source() and "double" in kernel.kernel_source
    assert kernel.host_source == kernel.get_host_source()
    assert kernel.config is None and kernel.latency is None and kernel.ref_latency is None  # not tuned
    out = kernel.run_once()
    assert isinstance(out, torch.Tensor) and out.shape == (64,)
    text = io.StringIO()
    kernel.print_source_code(file=text)
    assert text.getvalue().strip() == kernel.get_kernel_source().strip()
    with pytest.raises(AttributeError, match="'adapter'.*execution backends are plugins here"):
        kernel.adapter  # noqa: B018
    with pytest.raises(AttributeError, match="'export_library'.*kernel.export\\(path\\)"):
        kernel.export_library("x.so")
    assert not hasattr(kernel, "prim_func") and not hasattr(kernel, "no_such_attribute")
