"""An eager ``@tilelang.jit`` body that chooses its kernel with an ``if`` over a compile-time value,
each branch declaring its own constants and tensors (jit/eager_variants.py, docs/jit.md).

TileLang's eager-JIT guide writes a ``T.ptr`` parameter whose shape depends on a flag this way;
before, the second ``A = T.match_buffer(A, ...)`` stopped the kernel with TVMScript's "Variable A
already defined in current scope".
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError
from tilelang_core.jit.eager import is_eager_style

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, TVMFFI_LLVM, path_id  # noqa: E402

OFFSET = 0.5  # a global a branch reads


def make_fill(backend: str, target: str):
    """The guide's form: one pointer, its shape matched per branch."""

    @tilelang.jit(target=target, execution_backend=backend)
    def fill(A: T.ptr, is_2d=False):
        if is_2d:
            M, N = T.const("M, N")
            A = T.match_buffer(A, [M, N], T.float32)
            with T.Kernel(M) as i:
                for j in T.serial(N):
                    A[i, j] = i * 10 + j
        else:
            L = T.const("L")
            A = T.match_buffer(A, [L], T.float32)
            with T.Kernel(1) as _:
                for i in T.serial(L):
                    A[i] = i + OFFSET

    return fill


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_LLVM], ids=path_id)
def test_each_branch_declares_its_own_shape_of_the_pointer(path):
    fill = make_fill(*path)
    grid = torch.zeros(3, 4)
    fill(grid, is_2d=True)
    torch.testing.assert_close(grid, (torch.arange(3)[:, None] * 10 + torch.arange(4)).float())
    line = torch.zeros(6)
    fill(line)
    torch.testing.assert_close(line, torch.arange(6).float() + OFFSET)
    fill(line, False)  # the same branch and shape, positionally: the kernel already built
    assert len(fill.kernels) == 2


def test_branches_with_outputs_elif_and_a_get_tir_of_an_earlier_branch():
    @tilelang.jit(target="c", execution_backend="cython")
    def scaled(X, layout: str = "rows", factor=None):
        """Scaled copy of X, 2-D or 1-D."""
        if factor is None:  # plain Python before the if: part of every branch's prologue
            factor = 2.0
        if layout == "rows":
            R, C = T.const("R C")
            X: T.Tensor[(R, C), T.float32]
            Y = T.empty((R, C), T.float32)
            with T.Kernel(R) as r:
                for c in T.Parallel(C):
                    Y[r, c] = X[r, c] * factor
            return Y
        elif layout in ("flat", "vector"):
            n = T.dynamic("n")
            X: T.Tensor[(n,), T.float32]
            Y = T.empty((n,), T.float32)
            with T.Kernel(1) as _:
                for i in T.serial(n):
                    Y[i] = X[i] + factor
            return Y

    x2 = torch.randn(3, 5)
    torch.testing.assert_close(scaled(x2), x2 * 2)
    x1 = torch.randn(9)
    torch.testing.assert_close(scaled(x1, "vector", 1.5), x1 + 1.5)
    torch.testing.assert_close(scaled(torch.ones(4), layout="flat"), torch.full((4,), 3.0))
    # each branch is generated under its own name: the first one's text was read back as the
    # second one's once both existed ("invalid syntax")
    assert "T.Buffer((3, 5)" in scaled.get_tir(x2).script()
    with pytest.raises(TypeError, match=r"no branch of the if at .*test_eager_variants.py:\d+ applies to these "
                                        r"arguments \(layout='cols', factor=None\)"):
        scaled(x2, "cols")
    with pytest.raises(ValueError, match=r"argument 'X' \(#0\): expected 1 dimensions, got 2"):
        scaled(x2, "flat")


def test_a_condition_on_a_kernel_parameter_is_refused_at_its_line():
    def choose(A: T.ptr, n: T.int32):
        if n > 2:
            L = T.const("L")
            A = T.match_buffer(A, [L], T.float32)
            with T.Kernel(1) as _:
                A[0] = 1.0
        else:
            L = T.const("L")
            A = T.match_buffer(A, [L], T.float32)
            with T.Kernel(1) as _:
                A[0] = 2.0

    line = choose.__code__.co_firstlineno + 1
    with pytest.raises(KernelDefinitionError, match=rf"test_eager_variants.py:{line}: .*reads n, a kernel parameter"):
        tilelang.jit(target="c")(choose)(torch.zeros(2), 3)


def test_branches_that_only_open_kernels_stay_one_kernel():
    """An ``if`` over a Python value whose branches declare nothing is part of the kernel body, as
    before: TVMScript picks the branch when it parses the one kernel."""

    @tilelang.jit(target="c", execution_backend="cython")
    def shift(A, up: bool):
        N = T.const("N")
        A: T.Tensor[(N,), T.float32]
        if up:
            with T.Kernel(1) as _:
                for i in T.serial(N):
                    A[i] = A[i] + 1
        else:
            with T.Kernel(1) as _:
                for i in T.serial(N):
                    A[i] = A[i] - 1

    a = torch.zeros(3)
    shift(a, True)
    shift(a, True)
    shift(a, False)
    torch.testing.assert_close(a, torch.ones(3))
    assert type(shift._eager_function()).__name__ == "EagerFunction"


def test_a_chain_is_eager_without_signature_annotations():
    def per_rank(A, rank: int):
        if rank == 1:
            L = T.const("L")
            A: T.Tensor[(L,), T.float32]
            with T.Kernel(1) as _:
                A[0] = 1.0
        else:
            M, N = T.const("M N")
            A: T.Tensor[(M, N), T.float32]
            with T.Kernel(1) as _:
                A[0, 0] = 1.0

    assert is_eager_style(per_rank)
    kernel = tilelang.jit(target="c", execution_backend="cython")(per_rank)
    a = torch.zeros(2, 2)
    kernel(a, 2)
    assert a[0, 0] == 1.0


FLAG = True


def test_nested_ifs_values_computed_before_them_and_globals_choose_each_call():
    """A declaring if inside a branch is split too; a condition may read what the statements before
    the if compute (``big = n > 2``); one that reads a global is evaluated at every call (the
    positional fast path had kept the first choice: found by a hunt)."""

    @tilelang.jit(target="c", execution_backend="cython")
    def pick(A, n: int, twice: bool = False):
        big = n > 2
        if big:
            L = T.const("L")
            if twice:  # each branch declares A in another of TileLang's ways
                A = T.match_buffer(A, [L], T.float32)
                with T.Kernel(L) as i:
                    A[i] = A[i] + 20.0
            else:
                A: T.Tensor[(L,), T.float32]
                with T.Kernel(1) as _:
                    for i in T.Parallel(L):
                        A[i] += 10.0
        elif FLAG:
            L = T.const("L")
            A: T.Tensor[(L,), T.float32]
            with T.Kernel(1) as _:
                for i in T.serial(L):
                    A[i] = A[i] + 1.0
        else:
            M = T.const("M")
            A: T.Tensor[[M], T.float32]
            with T.Kernel(M) as j:
                A[j] += 2.0

    global FLAG
    for n, twice, flag, added in ((5, False, True, 10.0), (5, True, True, 20.0), (1, False, True, 1.0),
                                  (1, False, False, 2.0), (1, False, True, 1.0)):
        FLAG = flag
        a = torch.zeros(3)
        pick(a, n, twice)
        assert a.tolist() == [added] * 3, (n, twice, flag)
    FLAG = True
    assert {path for path, _ in pick.kernels} == {(0, 0), (0, 1), (1,), (2,)}


def test_a_branch_without_a_kernel_is_named():
    def empty_branch(A, fast: bool):
        if fast:
            L = T.const("L")
            A: T.Tensor[(L,), T.float32]
        else:
            L = T.const("L")
            A: T.Tensor[(L,), T.float32]
            with T.Kernel(1) as _:
                A[0] = 1.0

    line = empty_branch.__code__.co_firstlineno + 2
    f = tilelang.jit(target="c")(empty_branch)
    x = torch.zeros(2)
    f(x, False)  # the other arm works: a broken arm fails only when a call chooses it
    assert x[0].item() == 1.0
    with pytest.raises(KernelDefinitionError, match=rf"test_eager_variants.py:{line}: .*this branch of the if that "
                                                    r"chooses the kernel has no kernel body"):
        f(x, True)


@tilelang.jit(target="c")
def returned_after_the_if(A: T.ptr, is_2d: bool):
    if is_2d:
        M, N = T.const("M, N")
        A = T.match_buffer(A, [M, N], T.float32)
        Y = T.empty((M,), T.float32)
        with T.Kernel(1) as _:
            for i in T.serial(M):
                Y[i] = A[i, N - 1]
    else:
        L = T.const("L")
        A = T.match_buffer(A, [L], T.float32)
        Y = T.empty((L,), T.float32)
        with T.Kernel(1) as _:
            for i in T.serial(L):
                Y[i] = A[i] + 1.0
    return Y


@tilelang.jit(target="c")
def falls_through_after_an_early_return(A: T.ptr, is_2d: bool):
    if is_2d:
        M, N = T.const("M, N")
        A = T.match_buffer(A, [M, N], T.float32)
        Y = T.empty((M,), T.float32)
        with T.Kernel(1) as _:
            for i in T.serial(M):
                Y[i] = A[i, 0] * 2.0
        return Y
    L = T.const("L")
    A = T.match_buffer(A, [L], T.float32)
    Y = T.empty((L,), T.float32)
    with T.Kernel(1) as _:
        for i in T.serial(L):
            Y[i] = A[i] - 1.0
    return Y


@tilelang.jit(target="c")
def one_kernel_after_declaring_arms(A: T.ptr, doubled: bool):
    if doubled:
        L = T.const("L")
        A = T.match_buffer(A, [L], T.float32)
        scale = 2.0
    else:
        L = T.const("L")
        A = T.match_buffer(A, [L], T.int32)
        scale = 3
    Y = T.empty((L,), A.dtype)
    with T.Kernel(1) as _:
        for i in T.serial(L):
            Y[i] = A[i] * scale
    return Y


@tilelang.jit(target="c")
def refused_by_an_assert(A: T.ptr, mode: str):
    if mode == "1d":
        L = T.const("L")
        A = T.match_buffer(A, [L], T.float32)
        with T.Kernel(1) as _:
            A[0] = 7.0
    else:
        assert False, f"unsupported mode {mode}"


def test_statements_after_the_choosing_if_belong_to_the_arms_that_reach_them():
    """Upstream runs these forms of ordinary Python; here the first two stopped with 'Y is not one
    (outputs: none)' at the def line, the last with 'this branch ... has no kernel body' (found by a
    hunt): one return after the if for every arm, the other case after an early return, one
    kernel after arms that only declare, and an else of only `assert False, ...`."""
    grid, row = torch.arange(6.0).reshape(2, 3), torch.arange(3.0)
    assert returned_after_the_if(grid, True).tolist() == [2.0, 5.0]
    assert returned_after_the_if(row, False).tolist() == [1.0, 2.0, 3.0]
    assert falls_through_after_an_early_return(grid, True).tolist() == [0.0, 6.0]
    assert falls_through_after_an_early_return(row, False).tolist() == [-1.0, 0.0, 1.0]
    assert one_kernel_after_declaring_arms(row, True).tolist() == [0.0, 2.0, 4.0]
    ints = one_kernel_after_declaring_arms(torch.arange(3, dtype=torch.int32), False)
    assert ints.dtype == torch.int32 and ints.tolist() == [0, 3, 6]
    a = torch.zeros(2)
    refused_by_an_assert(a, "1d")
    assert a[0].item() == 7.0
    with pytest.raises(AssertionError, match="unsupported mode 2d"):
        refused_by_an_assert(a, "2d")


@tilelang.jit(target="c")
def declared_in_some_arms(A, mode=0):
    N = T.const("N")
    A: T.Tensor[(N,), T.float32]
    if mode == 0:
        B = T.empty((N,), T.float32)
    elif mode == 1:
        B = T.empty((N,), T.float64)
    with T.Kernel(1) as _:
        for i in T.serial(N):
            B[i] = A[i] + 1.0
    return B


def test_a_tail_after_arms_without_else_serves_only_those_arms():
    """The statements after an if without else were also made its else, which declares no B: that
    arm stopped every call, mode 0 included, with 'B is not one (outputs: none)' at the def line
    (found by a hunt). Now the arms run and another mode is the chain's own 'no branch' error."""
    a = torch.arange(4, dtype=torch.float32)
    assert declared_in_some_arms(a, 0).dtype == torch.float32
    assert declared_in_some_arms(a, 1).tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(TypeError, match=r"no branch of the if at .*test_eager_variants.py:\d+ applies to these "
                                        r"arguments \(mode=2\)"):
        declared_in_some_arms(a, 2)


def test_a_keyword_call_remembers_its_branch_and_kernel(monkeypatch):
    """A call with keyword arguments chose its branch and specialised again at every call."""
    from tilelang_core.jit.eager import EagerFunction
    from tilelang_core.jit.eager_variants import VariantEagerFunction

    fill = make_fill(*CYTHON_C)
    counted = {"choose": 0, "specialise": 0}
    for cls, name, what in ((VariantEagerFunction, "_choose", "choose"), (EagerFunction, "_specialise", "specialise")):
        def counting(self, *args, _original=getattr(cls, name), _what=what):
            counted[_what] += 1
            return _original(self, *args)

        monkeypatch.setattr(cls, name, counting)
    grid = torch.zeros(3, 4)
    for _ in range(3):
        fill(grid, is_2d=True)
        fill(A=grid, is_2d=True)
    torch.testing.assert_close(grid, (torch.arange(3)[:, None] * 10 + torch.arange(4)).float())
    assert counted == {"choose": 1, "specialise": 1}  # both bind as fill(grid, True): once
    assert len(fill.kernels) == 1
