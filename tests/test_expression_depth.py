"""Stored expressions nested too deep for TVM are refused at the kernel's line, not a crash.

An expression built in Python over a few thousand terms (``functools.reduce``) reached TVM's
recursive passes and killed the process with a segmentation fault (about 1,200 terms of
``acc * 0.5 + a`` on ``llvm``, language/expression_depth.py). The refusal runs in a subprocess:
without it, the test process itself would crash.
"""

from __future__ import annotations

import functools
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

_DEEP_KERNEL = textwrap.dedent("""
    import functools, sys
    import tilelang, tilelang.language as T
    from tilelang_core.errors import LoweringError

    terms, where = int(sys.argv[1]), sys.argv[2]

    def chain(a):
        return functools.reduce(lambda acc, _: acc * 0.5 + a, range(terms), a)

    try:
        @T.prim_func
        def deep(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    if where == "value":
                        B[i] = chain(A[i])
                    else:
                        B[T.Cast("int32", chain(A[i])) % 16] = 1.0
        tilelang.compile(deep, execution_backend="tvm_ffi", target="llvm")
    except LoweringError as exc:
        print("REFUSED", exc)
    else:
        print("COMPILED")
""")


def _chain(a, terms):
    return functools.reduce(lambda acc, _: acc * 0.5 + a, range(terms), a)


@pytest.mark.parametrize("where", ["value", "index"])
def test_an_expression_thousands_of_levels_deep_is_refused_at_its_line_not_a_crash(where):
    out = subprocess.run([sys.executable, "-c", _DEEP_KERNEL, "3000", where], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, f"rc {out.returncode} (-11: the segmentation fault is back)\n{out.stderr[-2000:]}"
    assert out.stdout.startswith("REFUSED"), out.stdout + out.stderr[-2000:]
    assert out.stdout.startswith(f"REFUSED <string>:{ {'value': 17, 'index': 19}[where]}: B[...] = ...")  # the store's line
    assert f"the stored {where} is an expression nested more than {MAX_EXPRESSION_DEPTH} levels deep" in out.stdout
    assert "bind parts of it to local names" in out.stdout


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
