"""A generator expression in a kernel is evaluated like the list comprehension of the same items
(language/generator_expressions.py); TVMScript stopped at its loop variable ("Undefined variable: j")."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


@T.prim_func
def _generators(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            B[i] = sum(A[i, j] * (j + 1) for j in range(4) if j != 2) + max(k for k in (1, 5, 3))


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_generator_expression_gives_the_items_of_the_list_comprehension(backend, target):
    kernel = tilelang.compile(_generators, target=target, execution_backend=backend)
    a = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    b = torch.zeros(4)
    kernel(a, b)
    weights = torch.tensor([1.0, 2.0, 0.0, 4.0])
    torch.testing.assert_close(b, (a * weights).sum(dim=1) + 5)
