"""Kernel parsing holds the core's AST lock (tilelang_core/ast_lock.py): CPython 3.11's AST
constructor is not safe when two threads build ASTs at once (a flaky ``SystemError: AST constructor
recursion depth mismatch`` in test_jit.py::test_jit_direct_form_threads before the lock)."""

from __future__ import annotations

import ast

import pytest

pytest.importorskip("tvm")

import tilelang.language as T  # noqa: E402
from tilelang_core.ast_lock import AST_LOCK  # noqa: E402
from tilelang_core.symbolic import free_symbols  # noqa: E402


@pytest.fixture
def parses(monkeypatch):
    """Every ``ast.parse`` call, with whether the calling thread held the lock."""
    seen = []
    real = ast.parse

    def recording(*args, **kwargs):
        seen.append(AST_LOCK._is_owned())
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", recording)
    return seen


def test_parsing_a_kernel_holds_the_lock(parses):
    @T.prim_func
    def copy(a: T.Tensor((4,), "float32"), b: T.Tensor((4,), "float32")):
        for i in range(4):
            b[i] = a[i]

    assert parses and all(parses)


def test_parsing_a_symbolic_expression_holds_the_lock(parses):
    assert free_symbols("n * 2 + mm_unique") == {"n", "mm_unique"}  # lru_cache: a fresh expression
    assert parses == [True]


def test_tvmscripts_own_prim_func_holds_the_lock_too(parses):
    """A kernel factory may use TVM's ``T.prim_func`` directly (test_jit.py's direct form does):
    its parses, the locally imported ``ast`` of its annotation scan included, hold the lock."""
    from tvm.script import tirx as TVM_T

    def factory(n):
        @TVM_T.prim_func
        def copy(a: TVM_T.Buffer((n,), "float32"), b: TVM_T.Buffer((n,), "float32")):
            for i in range(n):
                b[i] = a[i]

        return copy

    factory(4)
    assert parses and all(parses), parses
