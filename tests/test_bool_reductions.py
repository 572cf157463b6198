"""``T.reduce_max``/``T.reduce_min`` of a bool tile into a bool tile: any / all, as torch's ``amax``/``amin``.

They were refused with a misleading message ("dtype mismatch: source 'a' is bool and destination
's' is bool; use a destination of the same kind"). They now combine with logical or (max) and and
(min), from false and true; checked on every CPU pair against torch, over either dimension and with
``clear=False``. The other reductions of a bool tile, and a bool tile into another dtype, are
refused with a message that says what reduces a bool tile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

ROWS, COLS = 4, 5


def _kernel(reduce, dim, clear):
    out = ROWS if dim == 1 else COLS

    @T.prim_func
    def boolean(A: T.Tensor((ROWS, COLS), "bool"), S: T.Tensor((out,), "bool")):
        with T.Kernel(1):
            a = T.alloc_fragment((ROWS, COLS), "bool")
            s = T.alloc_fragment((out,), "bool")
            T.copy(A, a)
            T.copy(S, s)
            reduce(a, s, dim=dim, clear=clear)
            T.copy(s, S)

    return boolean


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_bool_reduce_max_min(backend, target, kind, dim, clear):
    A = torch.tensor([[True, False, False, False, True],
                      [False, False, False, False, False],
                      [True, True, True, True, True],
                      [False, True, False, True, True]])
    reduce = T.reduce_max if kind == "max" else T.reduce_min
    kernel = tilelang.compile(_kernel(reduce, dim, clear), execution_backend=backend, target=target)
    start = torch.tensor([True, False] * 3)[: A.shape[1 - dim]]
    S = start.clone()
    kernel(A, S)
    expected = A.amax(dim) if kind == "max" else A.amin(dim)
    if not clear:
        expected = (expected | start) if kind == "max" else (expected & start)
    assert torch.equal(S, expected), S.tolist()


@pytest.mark.parametrize("reduce,out_dtype", [(T.reduce_sum, "bool"), (T.reduce_absmax, "bool"),
                                              (T.reduce_max, "int32")])
def test_other_bool_reductions_refused_clearly(reduce, out_dtype):
    with pytest.raises(LoweringError, match="only T.reduce_max \\(any\\) and T.reduce_min \\(all\\) reduce a bool tile"):
        @T.prim_func
        def refused(A: T.Tensor((ROWS, COLS), "bool"), S: T.Tensor((ROWS,), out_dtype)):
            with T.Kernel(1):
                a = T.alloc_fragment((ROWS, COLS), "bool")
                s = T.alloc_fragment((ROWS,), out_dtype)
                T.copy(A, a)
                reduce(a, s, dim=1)
                T.copy(s, S)

        tilelang.compile(refused, execution_backend="cython", target="c")
