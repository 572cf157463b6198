"""Ctrl-C while TVM runs one of the pipeline's Python passes is a KeyboardInterrupt, not a
failed lowering.

TVM's FFI forwards the ``KeyboardInterrupt`` raised in a pass written in Python as an empty
``RuntimeError``; ``lower`` reported it as "lowering kernel ... failed: " (and the autotuner would
skip the configuration and go on). A real SIGINT lands in such a pass only by chance (2 of 50
interrupts did), so the test raises it from a real pass of the pipeline.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import bfloat16_rounding


def _kernel(scale):
    @T.prim_func
    def scaled(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] * scale
    return scaled


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    """Every compile lowers (a kernel the cache holds, from an earlier run, would not)."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def test_an_interrupt_inside_a_python_pass_is_a_keyboard_interrupt(monkeypatch):
    real = bfloat16_rounding._round_module
    calls = []

    def interrupted(mod, ctx):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(bfloat16_rounding, "_round_module", interrupted)
    with pytest.raises(KeyboardInterrupt, match="interrupted while lowering kernel 'scaled' for c"):
        tilelang.compile(_kernel(3.25), execution_backend="cython", target="c")
    assert calls, "the pass was not called: the test no longer interrupts the pipeline"
    monkeypatch.setattr(bfloat16_rounding, "_round_module", real)
    kernel = tilelang.compile(_kernel(3.25), execution_backend="cython", target="c")  # and compiling goes on
    a, b = torch.arange(16.0), torch.empty(16)
    kernel(a, b)
    assert torch.equal(b, a * 3.25)


def test_an_error_inside_a_python_pass_is_still_a_lowering_error(monkeypatch):
    def failing(mod, ctx):
        raise ValueError("this pass failed")

    monkeypatch.setattr(bfloat16_rounding, "_round_module", failing)
    with pytest.raises(LoweringError, match="lowering kernel 'scaled' for c failed: this pass failed"):
        tilelang.compile(_kernel(5.5), execution_backend="cython", target="c")
