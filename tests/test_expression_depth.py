"""Stored expressions nested too deep for TVM are refused at the kernel's line, not a crash.

An expression built in Python over a few thousand terms (``functools.reduce``) reached TVM's
recursive passes and killed the process with a segmentation fault (about 1,200 terms of
``acc * 0.5 + a`` on ``llvm``, language/expression_depth.py). The refusal runs in a subprocess:
without it, the test process itself would crash.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.language.expression_depth import MAX_EXPRESSION_DEPTH, nesting_depth

CPU_PAIRS = [("cython", "c"), ("tvm_ffi", "llvm")]

_DEEP_KERNELS = textwrap.dedent("""
    import functools, json, sys
    import tilelang, tilelang.language as T
    from tilelang_core.errors import LoweringError

    terms = int(sys.argv[1])

    def chain(a):  # a float expression 2 * terms + 1 levels deep
        return functools.reduce(lambda acc, _: acc * 0.5 + a, range(terms), a)

    def ichain(a):  # an integer one
        return functools.reduce(lambda acc, _: acc * a + 1, range(terms), a)

    def value():
        @T.prim_func
        def deep(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    B[i] = chain(A[i])
        return deep

    def index():
        @T.prim_func
        def deep(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    B[T.Cast("int32", chain(A[i])) % 16] = 1.0
        return deep

    def if_condition():
        @T.prim_func
        def deep(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    if chain(A[i]) > 0.0:
                        B[i] = 1.0
        return deep

    def loop_extent():
        @T.prim_func
        def deep(A: T.Tensor((16,), "int32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                for i in T.serial(ichain(A[0]) % 16):
                    B[i] = 1.0
        return deep

    def grid_extent():
        @T.prim_func
        def deep(B: T.Tensor((16,), "float32"), n: T.int32):
            with T.Kernel(ichain(n) % 7 + 1, threads=16) as bx:
                for i in T.Parallel(16):
                    B[i] = 1.0
        return deep

    def printed():
        @T.prim_func
        def deep(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                T.print(chain(A[0]))
        return deep

    results = {}
    for case in (value, index, if_condition, loop_extent, grid_extent, printed):
        try:
            tilelang.compile(case(), execution_backend="tvm_ffi", target="llvm")
        except LoweringError as exc:
            results[case.__name__] = str(exc)
        else:
            results[case.__name__] = "COMPILED"
    print(json.dumps(results))
""")

#: (the statement in _DEEP_KERNELS, what the message names) per case
_REFUSALS = {
    "value": ("B[i] = chain(A[i])", "B[...] = ...: the stored value is an expression nested more than 1000 levels deep"),
    "index": ("B[T.Cast(", "B[...] = ...: the stored index is an expression nested more than 1000 levels deep"),
    "if_condition": ("if chain(A[i])", "an if condition holds an expression nested about 1000 levels deep or more"),
    "loop_extent": ("T.serial(ichain", "T.serial: extent is an expression nested more than 1000 levels deep"),
    "grid_extent": ("T.Kernel(ichain", "T.Kernel: grid extent #0 is an expression nested more than 1000 levels deep"),
    "printed": ("T.print(chain", "T.print: obj is an expression nested more than 1000 levels deep"),
}


def _line_of(statement):
    return next(n for n, line in enumerate(_DEEP_KERNELS.splitlines(), 1) if statement in line)


def _chain(a, terms):
    return functools.reduce(lambda acc, _: acc * 0.5 + a, range(terms), a)


def test_an_expression_thousands_of_levels_deep_is_refused_at_its_line_not_a_crash():
    out = subprocess.run([sys.executable, "-c", _DEEP_KERNELS, "3000"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"rc {out.returncode} (-11: the segmentation fault is back)\n{out.stderr[-2000:]}"
    results = json.loads(out.stdout.splitlines()[-1])
    assert set(results) == set(_REFUSALS)
    for case, (statement, words) in _REFUSALS.items():
        assert results[case].startswith(f"<string>:{_line_of(statement)}: {words}"), (case, results[case])
        assert "compute parts of it into local names" in results[case] or "bind parts of it" in results[case]


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_an_expression_just_under_the_limit_compiles_and_computes(backend, target):
    terms = (MAX_EXPRESSION_DEPTH - 1) // 2  # acc * 0.5 + a: two levels per term, the leaf one

    @T.prim_func
    def near_limit(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = _chain(A[i], terms)

    kernel = tilelang.compile(near_limit, execution_backend=backend, target=target)
    a = torch.linspace(-1.0, 1.0, 16)
    b = torch.empty(16)
    kernel(a, b)
    torch.testing.assert_close(b, _chain(a, terms))


def test_one_over_the_limit_is_refused_in_process():
    terms = MAX_EXPRESSION_DEPTH // 2  # depth MAX + 1

    with pytest.raises(LoweringError, match=f"nested more than {MAX_EXPRESSION_DEPTH} levels deep"):
        @T.prim_func
        def over_limit(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    B[i] = _chain(A[i], terms)


def test_binding_parts_to_local_names_computes_an_expression_of_any_depth():
    terms = 3000

    @T.prim_func
    def bound(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                x = A[i]
                for _ in range(terms):  # unrolled while parsing: one local name bound per term
                    x = x * 0.5 + A[i]
                B[i] = x

    kernel = tilelang.compile(bound, execution_backend="tvm_ffi", target="llvm")
    a = torch.linspace(-1.0, 1.0, 16)
    b = torch.empty(16)
    kernel(a, b)
    torch.testing.assert_close(b, _chain(a, terms))


def test_depth_counts_levels_and_walks_a_shared_subexpression_once(monkeypatch):
    from tvm import tirx

    from tilelang_core.language import expression_depth

    a = tirx.Var("a", "float32")
    assert nesting_depth(a) == 1 and nesting_depth(1.5) == 0
    assert nesting_depth(a * 0.5 + a) == 3
    walked = []
    real_children = expression_depth._children
    monkeypatch.setattr(expression_depth, "_children", lambda node, *types: (walked.append(node), real_children(node, *types))[1])
    doubled = functools.reduce(lambda acc, _: acc + acc, range(200), a)  # 2**200 paths, 201 nodes
    assert nesting_depth(doubled) == 201
    assert len(walked) == 201  # each node once: a walk of the tree would never end
    walked.clear()
    assert nesting_depth(_chain(a, 5000), limit=100) == 101  # stops once past the limit
    assert len(walked) <= 102


def test_a_grid_extent_just_under_the_limit_compiles_and_runs():
    """Before, lowering widened it to int64 recursively and stopped at Python's recursion limit
    ("maximum recursion depth exceeded") from about 980 levels (lowering/signature.py to_int64)."""
    terms = (MAX_EXPRESSION_DEPTH - 40) // 2

    def blocks(n):  # 1 + ((((n * n + 1) * n + 1) ...) % 7), about 2 * terms levels deep
        return functools.reduce(lambda acc, _: acc * n + 1, range(terms), n) % 7 + 1

    @T.prim_func
    def wide_grid(B: T.Tensor((8, 16), "float32"), n: T.int32):
        with T.Kernel(blocks(n), threads=16) as bx:
            for i in T.Parallel(16):
                B[bx, i] = 1.0

    kernel = tilelang.compile(wide_grid, execution_backend="tvm_ffi", target="llvm")
    b = torch.zeros(8, 16)
    kernel(b, 1)  # n = 1: terms + 1 blocks modulo 7, plus 1
    expected = torch.zeros(8, 16)
    expected[: (terms + 1) % 7 + 1] = 1.0
    assert torch.equal(b, expected)


def test_widening_to_int64_rebuilds_each_node_once_and_keeps_the_value():
    from tvm import tirx

    from tilelang_core.lowering.signature import to_int64

    n = tirx.Var("n", "int32")
    shared = n * 3 + 7
    widened = to_int64(tirx.Select(n > 0, shared // 2, tirx.Max(shared % 5, n - 1)))
    assert str(widened.ty.dtype) == "int64"
    assert str(widened) == ('T.Select(n > 0, (T.Cast("int64", n) * T.int64(3) + T.int64(7)) // T.int64(2), '
                            'T.max((T.Cast("int64", n) * T.int64(3) + T.int64(7)) % T.int64(5), T.Cast("int64", n) - T.int64(1)))')
    assert widened.true_value.a.same_as(widened.false_value.a.a)  # the shared part is rebuilt once
