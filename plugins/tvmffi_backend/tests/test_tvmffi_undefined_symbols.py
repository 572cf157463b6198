"""A kernel that calls a function nothing defines is a BuildError at compile time on both tvm_ffi
paths (runtime.check_symbols_resolve, runtime.undefined_jit_symbols).

DeepSeek's TileKernels call CUDA's ``__float2half_rz`` through ``T.call_extern``; on a CPU the
build reported success and the first call ended the process: SIGSEGV on ``llvm`` (the JIT left
the call unresolved) and the dynamic linker's "undefined symbol" exit on ``c``.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import BuildError


def _kernel(function: str):
    @T.prim_func
    def calls(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as _:
            for i in T.serial(4):
                B[i] = T.call_extern("float32", function, A[i])

    return calls


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_an_undefined_function_is_a_build_error(target):
    with pytest.raises(BuildError, match="tl_no_such_function_anywhere"):
        tilelang.compile(_kernel("tl_no_such_function_anywhere"), target=target, execution_backend="tvm_ffi")


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_libm_function_still_builds_and_runs(target):
    kernel = tilelang.compile(_kernel("cbrtf"), target=target, execution_backend="tvm_ffi", out_idx=[1])
    a = torch.tensor([8.0, 27.0, -1.0, 0.0])
    torch.testing.assert_close(kernel(a), torch.tensor([2.0, 3.0, -1.0, 0.0]))
