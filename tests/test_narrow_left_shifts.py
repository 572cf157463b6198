"""A left shift of an 8- or 16-bit integer whose dropped bits C would keep is refused
(language/literals.py ``narrow_left_shift_error``, docs/language.md "Integer arithmetic").

TIR types ``h << 8`` of a uint16 ``h`` as uint16, so ``T.cast(h << 20, T.uint32) | T.cast(h << 8,
T.uint32)`` (DeepSeek TileKernels' e5m6 packing) gave 0 and truncated bits here, silently, where
C and CUDA widen ``h`` to int first and upstream's C/CUDA kernels keep them.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, TVMFFI_LLVM, path_id  # noqa: E402


@pytest.mark.parametrize("amount,message", [
    (20, r"test_narrow_left_shifts.py:\d+: .*<< 20: the shift is done in uint16, so the bits shifted past 16 are "
         r"dropped \(the result is 0\).*T.cast\(.*'int32'\) << 20"),
    (8, r"<< 8, 'uint32'\): the shift is done in uint16, so the bits shifted past 16 are dropped before the cast "
        r"widens it.*<< 8, \"uint16\"\) if dropping"),
], ids=["past-the-width", "widened"])
def test_a_shift_whose_dropped_bits_c_keeps_is_refused_at_its_line(amount, message):
    with pytest.raises(Exception, match=message):
        @T.prim_func
        def pack(A: T.Tensor((4,), "uint16"), B: T.Tensor((4,), "uint32")):
            with T.Kernel(1) as _:
                for i in T.serial(4):
                    B[i] = T.cast(A[i] << amount, "uint32")


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_LLVM], ids=path_id)
def test_both_written_forms_compute_what_they_say(path):
    @T.prim_func
    def pack(A: T.Tensor((4,), "uint16"), B: T.Tensor((4,), "uint32"), C: T.Tensor((4,), "uint16")):
        with T.Kernel(1) as _:
            for i in T.serial(4):
                B[i] = T.cast(A[i], "uint32") << 20 | T.cast(A[i], "uint32") << 8  # C's meaning, written out
                C[i] = A[i] << 8  # stored in uint16: both meanings agree

    backend, target = path
    kernel = tilelang.compile(pack, out_idx=[1, 2], target=target, execution_backend=backend)
    values = [0x123, 0xABC, 0x7FF, 0x001]
    b, c = kernel(torch.tensor(values, dtype=torch.int32).to(torch.uint16))
    assert [v & 0xFFFFFFFF for v in b.to(torch.int64).tolist()] == [((v << 20) | (v << 8)) & 0xFFFFFFFF for v in values]
    assert c.to(torch.int64).tolist() == [(v << 8) & 0xFFFF for v in values]
