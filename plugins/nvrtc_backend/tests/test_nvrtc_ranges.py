"""The nvrtc backend's share of issue 11 §3/§4 (docs/backend-conventions.md, "Calling a built
kernel"): tensors too large for a kernel's 32-bit indices (``TensorParam.index_limit``) and written
tensors overlapping another argument (``TensorParam.written``) are refused before anything is
allocated or launched, with the messages every backend shares.

No GPU is needed: the refusals come before the device is touched. Inputs too large are stride-0
views (64 KiB of memory), outputs too large are refused from their shape alone.
"""

from __future__ import annotations

import pytest
import torch

import tilelang_core.language as T
from tilelang_core.artifact import BuildOptions
from tilelang_core.calling import CallChecker
from tilelang_core.jit.outputs import bind_symbols_from_inputs, normalize_out_idx
from tilelang_core.lowering import lower
from tilelang_core.lowering.signature import INDEX_LIMIT_32

from tilelang_backend_nvrtc import plugin

HINT = "compile it with pass_configs={'tl.config_index_bitwidth': 64}"


def add_one(M, N=65536):
    @T.prim_func
    def add1(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int8")):
        with T.Kernel(M, threads=128) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = X[bx, j] + T.int8(1)

    return add1


def shifted_add(n=256):
    @T.prim_func
    def sadd(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                C[bx * 128 + i] = A[bx * 128 + i] + B[bx * 128 + i]

    return sadd


def _built(func, out_idx=None, **passes):
    artifact = lower(func, target="cuda -arch=sm_90", pass_configs=passes or None)
    outputs = normalize_out_idx(out_idx, artifact)
    artifact = bind_symbols_from_inputs(artifact, outputs)
    return plugin.tilelang_backend_build(artifact=artifact, options=BuildOptions(out_idx=outputs))


def test_too_large_input_is_refused_before_the_device_check():
    kernel = _built(add_one(T.dynamic("m")), out_idx=[1])
    big = torch.zeros(1, 65536, dtype=torch.int8).expand(32769, 65536)  # 2**31 + 65536 elements
    with pytest.raises(ValueError) as info:
        kernel._checker.bind((big,))
    assert str(info.value) == (
        f"add1() argument 'X' (#0): 2147549184 elements ('m' = 32769) exceed this kernel's 32-bit index limit "
        f"of {INDEX_LIMIT_32}; {HINT}"
    )
    # within the limit, the next check (the device: this is a CUDA kernel) speaks
    with pytest.raises(ValueError, match=r"expected a tensor on cuda, got cpu$"):
        kernel._checker.bind((big[:16],))


def test_too_large_output_is_refused_from_its_shape():
    kernel = _built(add_one(T.dynamic("m")), out_idx=[1])
    with pytest.raises(ValueError) as info:
        kernel.output_shapes({"m": 32769})
    assert str(info.value) == (
        f"add1(): output 'Y' would have 2147549184 elements ('m' = 32769), over this kernel's 32-bit index "
        f"limit of {INDEX_LIMIT_32}; {HINT}"
    )
    assert kernel.output_shapes({"m": 4}) == [[4, 65536]]
    wide = _built(add_one(T.dynamic("m")), out_idx=[1], **{"tl.config_index_bitwidth": 64})
    assert wide.output_shapes({"m": 32769}) == [[32769, 65536]]


def test_written_tensor_overlapping_an_input_is_refused():
    # The kernel's checker (the core's) on its CPU lowering: the tensors exist here, so the overlap
    # check is reached.
    art = lower(shifted_add(), target="c")
    assert [p.written for p in art.params] == [False, False, True]
    check = CallChecker(art, []).bind
    buf, b = torch.zeros(512), torch.zeros(256)
    with pytest.raises(ValueError) as info:
        check((buf[0:256], b, buf[1:257]))
    assert str(info.value) == (
        "sadd() arguments 'A' (#0) and 'C' (#2) overlap in memory, and the kernel writes 'C'; pass tensors "
        "that do not share memory (for example a .clone())"
    )
    with pytest.raises(ValueError, match=r"arguments 'A' \(#0\) and 'C' \(#2\) overlap"):
        check((b, b, b))
    check((buf[0:256], buf[0:256], buf[256:512]))  # read-only tensors may alias; adjacent is not overlapping
    # the CUDA kernel checks the same (after the device check, which CPU tensors fail first)
    kernel = _built(shifted_add())
    assert isinstance(kernel._checker, CallChecker) and kernel._checker.overlap == "address"
    assert kernel._checker._overlap_pairs == [(0, 2), (1, 2)]
