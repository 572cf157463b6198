"""Defining and compiling a kernel keeps no reference to the caller's frames (and so its tensors)."""

from __future__ import annotations

import gc
import weakref

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(target="c")
def _staged_copy(n: int):
    @T.prim_func
    def staged(A: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1):
            tile = T.alloc_shared((n,), T.float32)
            T.copy(A, tile)
            T.copy(tile, A)

    return staged


def _compile_next_to_a_tensor(n: int) -> weakref.ref:
    probe = torch.randn(n, 256)
    kept = weakref.ref(probe)
    _staged_copy(n)  # defines the prim_func and compiles it while `probe` is a local here
    return kept


def test_caller_locals_are_freed_without_the_cyclic_gc():
    gc.collect()
    gc.disable()  # only reference counting: a frame cycle would keep the probe alive
    try:
        kept = _compile_next_to_a_tensor(4)
        assert kept() is None, "a caller's frame (and its tensor) is still referenced after compiling"
    finally:
        gc.enable()
