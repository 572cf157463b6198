"""Python values assigned in a kernel body (``dtype = "float16"``, ``op = T.max``, ``None``, a dict)
are bound as Python values while the kernel is parsed, as TileLang's parser does; TVM 0.27's
parser stopped with "Cannot automatically inference the type"."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


def _scan_kernel(n, op_name, reverse):
    @T.prim_func
    def scan_kernel(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=32):
            dtype = "float32"  # a string
            shared = T.alloc_shared((n,), dtype)
            T.copy(A, shared)
            scan = T.cumsum if op_name == "cumsum" else T.cummax  # a function chosen in the body
            options = {"dim": 0, "reverse": reverse}  # a dict
            scan(src=shared, dim=options["dim"], reverse=options["reverse"])
            T.copy(shared, B)

    return scan_kernel


def _torch_scan(a, op_name, reverse):
    x = a.flip(0) if reverse else a
    y = x.cumsum(0) if op_name == "cumsum" else x.cummax(0).values
    return y.flip(0) if reverse else y


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("op_name,reverse", [("cumsum", False), ("cummax", True)])
def test_a_function_chosen_in_the_kernel_body_is_called(backend, target, op_name, reverse):
    kernel = tilelang.compile(_scan_kernel(40, op_name, reverse), target=target, execution_backend=backend)
    a = torch.randn(40)
    b = torch.zeros(40)
    kernel(a, b)
    torch.testing.assert_close(b, _torch_scan(a, op_name, reverse))


def test_names_rebound_to_other_python_values_and_dtypes_as_values():
    @T.prim_func
    def clamp_both(A: T.Tensor((16,), T.float32), Lo: T.Tensor((16,), T.float16), Hi: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=16):
            low_dtype = T.float16  # a dtype value
            pick = T.max
            nothing = None
            for i in T.Parallel(16):
                Lo[i] = T.cast(pick(A[i], T.float32(0)), low_dtype)
            pick = T.min  # rebinding a Python value
            for i in T.Parallel(16):
                Hi[i] = pick(A[i], T.float32(0)) if nothing is None else A[i]

    kernel = tilelang.compile(clamp_both, target="c", execution_backend="cython")
    a = torch.randn(16)
    lo, hi = torch.zeros(16, dtype=torch.float16), torch.zeros(16)
    kernel(a, lo, hi)
    torch.testing.assert_close(lo, a.clamp(min=0).half())
    torch.testing.assert_close(hi, a.clamp(max=0))
    source = kernel.get_kernel_source()
    assert "pick" not in source and "nothing" not in source  # bound while parsing: no IR of their own


def test_numbers_assigned_in_the_body_are_still_scalar_variables():
    @T.prim_func
    def count(A: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=1):
            total = 0  # TVMScript's scalar variable, updated by the loop
            for i in T.serial(4):
                total = total + i
                A[i] = total

    kernel = tilelang.compile(count, target="c", execution_backend="cython")
    a = torch.zeros(4, dtype=torch.int32)
    kernel(a)
    assert a.tolist() == [0, 1, 3, 6]
