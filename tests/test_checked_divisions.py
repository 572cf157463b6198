"""Integer division by a run-time 0 on CPU targets raises at the call (lowering/checked_divisions.py).

It stopped the whole process with SIGFPE before, on every CPU path, and so did ``-2**31 // -1``.
Each test runs the kernel in this process: a regression kills the test worker, which pytest
reports as a failure of the test.
"""

from __future__ import annotations

import inspect
import pathlib
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id  # noqa: E402

BLOCK = 256
n = T.dynamic("n")


def quotients(dtype: str):
    @T.prim_func
    def quotients(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), Q: T.Tensor((n,), dtype),
                  R: T.Tensor((n,), dtype), TQ: T.Tensor((n,), dtype), TR: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                g = bx * BLOCK + i
                Q[g] = A[g] // B[g]
                R[g] = A[g] % B[g]
                TQ[g] = T.truncdiv(A[g], B[g])
                TR[g] = T.truncmod(A[g], B[g])

    return quotients


FLOOR_LINE = inspect.getsourcelines(quotients)[1] + 7  # the Q[g] = A[g] // B[g] line


def _operands(dtype: str, count: int):
    info = torch.iinfo(getattr(torch, dtype))
    gen = torch.Generator().manual_seed(7)
    a = torch.randint(max(info.min, -2**62), min(info.max, 2**62), (count,), generator=gen).to(getattr(torch, dtype))
    b = torch.randint(1, 100, (count,), generator=gen).to(getattr(torch, dtype))
    if info.min < 0:
        b[::3] = -b[::3]
        a[:4] = torch.tensor([info.min, info.min, info.max, -7])
        b[:4] = torch.tensor([-1, 1, -1, 2])
    return a, b


def _expected(a, b) -> list:
    """``[//, %, truncdiv, truncmod]`` of ``a`` by ``b`` as lists, computed with Python's integers and
    wrapped around to the dtype (torch itself traps on some of these, and has no uint32/uint64 division)."""
    info = torch.iinfo(a.dtype)
    span = info.max - info.min + 1

    def wrap(v: int) -> int:
        return (v - info.min) % span + info.min

    floor, mod, trunc, rem = [], [], [], []
    for x, y in zip(a.tolist(), b.tolist()):
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        floor.append(wrap(x // y))
        mod.append(wrap(x % y))
        trunc.append(wrap(q))
        rem.append(wrap(x - q * y))
    return [floor, mod, trunc, rem]


def _run(kernel, a, b):
    outs = [torch.zeros_like(a) for _ in range(4)]
    kernel(a, b, *outs)
    return outs


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_zero_divisor_raises_naming_the_division_and_its_line(path):
    backend, target = path
    kernel = tilelang.compile(quotients("int32"), target=target, execution_backend=backend)
    count = 1 << 16  # enough work for the blocks to run on several threads
    a, b = _operands("int32", count)
    for got, want, what in zip(_run(kernel, a, b), _expected(a, b), ("//", "%", "truncdiv", "truncmod")):
        assert got.tolist() == want, (what, got[:8].tolist(), want[:8])
    b[count - 5] = 0
    expected = (rf"^quotients\(\) failed: integer division by zero at .*{re.escape(pathlib.Path(__file__).name)}:"
                rf"{FLOOR_LINE}: the divisor B\[g\] of A\[g\] // B\[g\] is 0$")
    with pytest.raises(RuntimeError, match=expected):
        _run(kernel, a, b)
    b[count - 5] = 3  # the next call runs as before
    assert _run(kernel, a, b)[0].tolist() == _expected(a, b)[0]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "uint8", "uint32", "uint64"])
@pytest.mark.parametrize("path", [PATHS[0], PATHS[2]], ids=path_id)
def test_every_integer_type_divides_as_torch_and_refuses_zero(path, dtype):
    """``MIN // -1`` wraps around (``MIN``) and ``MIN % -1`` is 0, as in torch; int8/int16 are computed
    in int32 on llvm (narrow_divisions.py), int32/int64 are checked for -1."""
    backend, target = path
    kernel = tilelang.compile(quotients(dtype), target=target, execution_backend=backend)
    a, b = _operands(dtype, 1000)
    for got, want, what in zip(_run(kernel, a, b), _expected(a, b), ("//", "%", "truncdiv", "truncmod")):
        assert got.tolist() == want, (what, got[:8].tolist(), want[:8])
    b[999] = 0
    with pytest.raises(RuntimeError, match="integer division by zero at "):
        _run(kernel, a, b)


@T.prim_func
def guarded(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32"), C: T.Tensor((n,), "int32")):
    with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
        for i in T.Parallel(BLOCK):
            g = bx * BLOCK + i
            C[g] = T.if_then_else(B[g] != 0, A[g] // B[g], 0) + T.Select(B[g] != 0, A[g] % B[g], -1)
            if B[g] != 0 and A[g] // B[g] > 1:
                C[g] += 1000
            if B[g] == 0 or A[g] % B[g] == 0:
                C[g] += 1


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_division_its_condition_skips_is_not_reported(path):
    """The arm of ``T.if_then_else``/``T.Select`` not taken, and the right operand of ``and``/``or``
    the left one decides, divide by nothing; a tail block's out-of-range elements neither."""
    backend, target = path
    kernel = tilelang.compile(guarded, out_idx=[2], target=target, execution_backend=backend)
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(-1000, 1000, (5000,), dtype=torch.int32, generator=gen)
    b = torch.randint(-4, 5, (5000,), dtype=torch.int32, generator=gen)
    safe = torch.where(b == 0, 1, b)
    want = (torch.where(b != 0, a // safe, 0) + torch.where(b != 0, a % safe, -1)
            + torch.where((b != 0) & (a // safe > 1), 1000, 0) + ((b == 0) | (a % safe == 0)).int())
    assert (b == 0).any() and 5000 % BLOCK != 0
    assert torch.equal(kernel(a, b), want)


#: A division whose value reaches the store through a bitwise operation: the mask of a widening
#: cast of an unsigned quotient (``(int64)(A // B & 0xFFFFFFFFu)``), a shift, a not and an xor.
WIDENED = {
    "cast": (lambda a, b: a // b, [3, 2, 14, 3]),
    "shift": (lambda a, b: T.Cast("int64", (a % b) >> 1), [0, 0, 1, 0]),
    "xor": (lambda a, b: T.Cast("int64", T.truncdiv(a, b) ^ T.Cast(a.dtype, 5)), [6, 7, 11, 6]),
}


def widened(a_dtype: str, b_dtype: str, form: str):
    value = WIDENED[form][0]

    @T.prim_func
    def widened(A: T.Tensor((4,), a_dtype), B: T.Tensor((4,), b_dtype), O: T.Tensor((4,), "int64")):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                O[i] = value(A[i], B[i])

    return widened


@pytest.mark.parametrize("form", list(WIDENED))
@pytest.mark.parametrize("dtypes", [("uint32", "uint32"), ("uint8", "uint8"), ("int32", "uint32"), ("int8", "uint8")],
                         ids="-by-".join)
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_division_under_a_widening_cast_or_a_bitwise_operation_is_checked(path, dtypes, form):
    """The walk did not enter TVM 0.27's bitwise nodes: these divided by 1 where B was 0, unreported."""
    backend, target = path
    kernel = tilelang.compile(widened(*dtypes, form), target=target, execution_backend=backend)
    a = torch.tensor([7, 9, 100, 3]).to(getattr(torch, dtypes[0]))
    b = torch.tensor([2, 4, 7, 1]).to(getattr(torch, dtypes[1]))
    out = torch.zeros(4, dtype=torch.int64)
    kernel(a, b, out)
    assert out.tolist() == WIDENED[form][1]
    b[2] = 0
    with pytest.raises(RuntimeError, match=r"^widened\(\) failed: integer division by zero at "):
        kernel(a, b, out)


@T.prim_func
def by_scalar(A: T.Tensor((n,), "int32"), s: T.int32, C: T.Tensor((n,), "int32"), D: T.Tensor((64,), "int32")):
    with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
        for i in T.Parallel(BLOCK):
            C[bx * BLOCK + i] = A[bx * BLOCK + i] % s
        if bx == 0:
            for k in T.serial(64 // s):
                D[k] = k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_scalar_divisor_of_zero_raises_in_a_loop_bound_too(path):
    backend, target = path
    kernel = tilelang.compile(by_scalar, target=target, execution_backend=backend)
    a, c, d = torch.arange(-500, 500, dtype=torch.int32), torch.zeros(1000, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)
    kernel(a, 7, c, d)
    assert torch.equal(c, a % 7) and d[:9].tolist() == list(range(9)) and not d[10:].any()
    with pytest.raises(RuntimeError, match=r"integer division by zero at .*: the divisor s of "):
        kernel(a, 0, c, d)


@T.prim_func
def known_divisors(A: T.Tensor((1024,), "int32"), C: T.Tensor((1024,), "int32")):
    with T.Kernel(4, threads=256) as bx:
        for i in T.Parallel(256):
            C[bx * 256 + i] = A[bx * 256 + i] // 7 + A[bx * 256 + i] % (bx + 1) + T.truncdiv(A[bx * 256 + i], -3)


def test_divisors_known_to_be_nonzero_get_no_check_and_keep_simd():
    source = lower(known_divisors, target="c").device_source
    assert "integer division by zero" not in source and "#pragma omp simd" in source
    checked = lower(quotients("int32"), target="c").device_source
    assert "integer division by zero at " in checked and "#pragma omp simd" not in checked  # a return may not leave it


@T.prim_func
def shifted(X: T.Tensor((16,), "int32"), Y: T.Tensor((16,), "int32"), s: T.int32):
    with T.Kernel(1) as bx:
        for i in T.Parallel(16):
            Y[i] = (X[i] + 1) // s + 64 // s + (X[i] - 2147483647) // s


@pytest.mark.parametrize("path", [PATHS[0], PATHS[2]], ids=path_id)
def test_dividends_next_to_the_type_minimum_compile_and_divide_as_torch(path):
    """The quotient for a divisor of -1 is negated without comparing the dividend with the minimum:
    TVM's simplifier turned ``x + 1 == -2**31`` into ``x == -2**31 - 1``, a literal int32 cannot
    hold, and the lowering stopped (``(X[i] + 1) // s``, ``T.Persistent`` with a run-time worker
    count)."""
    backend, target = path
    kernel = tilelang.compile(shifted, target=target, execution_backend=backend)
    x, y = torch.arange(16, dtype=torch.int32), torch.empty(16, dtype=torch.int32)
    for s in (4, -1, -3):
        kernel(x, y, s)
        want = [((v + 1) // s + 64 // s + (v - 2147483647) // s + 2**31) % 2**32 - 2**31 for v in x.tolist()]
        assert y.tolist() == want, s


def test_an_expression_thousands_of_operations_deep_is_checked():
    """The walk keeps its own stack: 2500 terms raised Python's RecursionError. (The frontend now
    refuses expressions over 1,000 levels deep, language/expression_depth.py: 990 terms stay
    under it and still pass Python's recursion limit of 1,000 frames for a recursive walk.)"""
    def deep(A, s):
        value = A[0]
        for i in range(1, 990):
            value = value + A[i % 4] * (i % 7)
        return value // s

    @T.prim_func
    def taps(A: T.Tensor((4,), "int32"), B: T.Tensor((1,), "int32"), s: T.int32):
        with T.Kernel(1) as bx:
            B[0] = deep(A, s)

    assert "integer division by zero at " in lower(taps, target="c").device_source
