"""``T.cummax`` of floats ignores NaN elements, as ``T.reduce_max`` does by default and CUDA's
``fmaxf`` does (language/tileops/scan.py). Found by a differential fuzz pass: on ``c`` and
``llvm`` a NaN reset the running maximum (``T.max`` there is ``a > b ? a : b``), so the running
maximum of ``[1, nan, 3, -1, inf, 2, nan, 0]`` ended in ``0`` (after ``inf``), while CUDA gave ``inf``."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

NAN, INF = math.nan, math.inf
VALUES = [NAN, NAN, 1.0, NAN, 3.0, -1.0, INF, 2.0, NAN, 0.0]


def _kernel(dtype, scope, reverse):
    n = len(VALUES)

    @T.prim_func
    def running_max(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=1) as bx:
            if scope == "shared":
                S = T.alloc_shared((n,), dtype)
            else:
                S = T.alloc_local((n,), dtype)
            T.copy(A, S)
            T.cummax(S, reverse=reverse)
            T.copy(S, B)

    return running_max


def _want(values, reverse):
    out, acc = [], NAN
    for v in (values[::-1] if reverse else values):
        acc = v if math.isnan(acc) or v > acc else acc
        out.append(acc)
    return out[::-1] if reverse else out


def _same(got, want):
    return all((math.isnan(g) and math.isnan(w)) or g == w for g, w in zip(got, want))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype,scope", [("float32", "shared"), ("float32", "local"), ("float16", "local"),
                                         ("bfloat16", "shared"), ("float64", "shared")])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cummax_ignores_nan(path, dtype, scope, reverse):
    a = torch.tensor(VALUES, dtype=getattr(torch, dtype))
    b = torch.zeros_like(a)
    compile_on(_kernel(dtype, scope, reverse), path)(a, b)
    want = _want(VALUES, reverse)
    assert _same(b.float().tolist(), want), (b.tolist(), want)
