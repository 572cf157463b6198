"""A buffer index proven negative counts from the end of its dimension, as in Python and TileLang.

``B[0] = A[-1]`` read 0 and ``B[-1] = ...`` was skipped, silently: the index went to the
access guards (lowering/access_guards.py) as one outside the tensor. The pipeline now runs the
rewrite of ``tilelang.transform.LegalizeNegativeIndex`` first (lowering/tir_rewrites.py): an index
the analyzer proves negative becomes ``index + extent``. One whose sign depends on run-time values
is not guessed (it is guarded as before), and one provably below ``-extent`` stays outside.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

N = 16
n = T.dynamic("n")


@T.prim_func
def from_the_end(A: T.Tensor((N,), "float32"), M: T.Tensor((3, 4), "float32"), D: T.Tensor((n,), "float32"),
                 B: T.Tensor((8,), "float32"), R: T.Tensor((4,), "float32"), s: T.int32):
    with T.Kernel(1) as bx:
        B[0] = A[-1]
        B[-1] = A[0] + 100.0  # a store from the end: B[7]
        for i in T.serial(4):
            R[i] = A[-i - 1] + M[-1, -i - 1]
        B[1] = D[-1]  # a dynamic extent: D[n - 1]
        B[2] = A[-20]  # below -16: outside either way, guarded (0)
        B[3] = A[s]  # a run-time sign: not guessed, guarded (0 for s < 0)


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_negative_indices_count_from_the_end_as_torch_does(backend, target):
    kernel = tilelang.compile(from_the_end, execution_backend=backend, target=target)
    A = torch.arange(N, dtype=torch.float32)
    M = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 10
    D = torch.arange(5, dtype=torch.float32) + 1000
    B = torch.full((8,), -7.0)
    R = torch.zeros(4)
    kernel(A, M, D, B, R, -1)
    expected = torch.full((8,), -7.0)
    expected[0], expected[-1], expected[1], expected[2], expected[3] = A[-1], A[0] + 100, D[-1], 0.0, 0.0
    torch.testing.assert_close(B, expected)
    torch.testing.assert_close(R, torch.stack([A[-i - 1] + M[-1, -i - 1] for i in range(4)]))
    kernel(A, M, D, B, R, 5)
    assert B[3].item() == A[5].item()


def test_the_cuda_source_indexes_from_the_end():
    from tilelang_core.lowering import lower

    source = lower(from_the_end, target="cuda").device_source
    assert "B_ptr[0] = A_ptr[15];" in source and "B_ptr[7] = " in source, source
    assert "A_ptr[(15 - i)] + M_ptr[(11 - i)]" in source and "D_ptr[(n - 1)]" in source, source


def test_the_upstream_pass_keeps_its_rules():
    """``tilelang.transform.LegalizeNegativeIndex`` on a module, as TileLang's tests call it."""
    import tvm

    @T.prim_func
    def before(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32"), shift: T.int32):
        for i in T.serial(4):
            B[i] = A[-i - 1] + A[-1] + A[shift + i] + A[-17]

    after = tilelang.transform.LegalizeNegativeIndex()(tvm.IRModule({"main": before}))["main"]
    text = after.script()
    assert "A[15 - i]" in text and "A[15]" in text and "A[shift + i]" in text and "A[-17]" in text, text


def test_a_copy_from_a_slice_with_a_negative_start_says_it_is_not_counted_from_the_end():
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError, match=r"shape mismatch: the source tile has extents \(11,\) .*The region "
                                            r"A\[-3:8\] starts at -3 in dimension 0: a negative slice start does not "
                                            r"count from the end here \(it spans -3 to 8\)"):

        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                T.copy(A[-3:], B[1:4])
