"""Integer divisions by an expression that is always 0 (the block index ``bx`` of ``T.Kernel(1)``,
the variable of a loop of one iteration) are a LoweringError at their line that names the
division and why its divisor is 0.

Before, ``T.align_up(x, bx)``, ``T.ceildiv(x, bx)``, ``x // bx``, ``x % bx`` and ``T.truncdiv(x, bx)``
in a one-block grid stopped the lowering with TVM's "Check failed: (!divisor.is_const(0)) is false:
Find divide by zero" (``x // (bx - bx)``: "Divide by zero"), at the kernel's ``def`` line, on
every target.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from source_lines import message_at  # noqa: E402

TARGETS = ("c", "llvm", "cuda")
_BX = "bx is the block index of a grid of one block along x"


def _defined(marker: str, build) -> str:
    """The message of the LoweringError raised while defining a kernel (prefix: the marked line)."""
    return message_at(_THIS, marker, build, ValueError, raised=LoweringError)


def _lowered(marker: str, build, target: str) -> str:
    """The message of the LoweringError raised while lowering the kernel for ``target``."""
    from tilelang_core.lowering import lower

    return message_at(_THIS, marker, lambda: lower(build(), target=target), LoweringError, raised=LoweringError)


def test_align_up_by_the_block_index_of_a_one_block_grid():
    def build():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), x: T.int32):
            with T.Kernel(1) as bx:
                A[0] = T.align_up(x, bx)  # <align-bx>

    assert _defined("align-bx", build) == (
        f"T.align_up: y (the alignment) bx is always 0 here: {_BX}; the alignment must be at least 1")


def test_ceildiv_by_the_block_index_of_a_one_block_grid():
    def build():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), x: T.int32):
            with T.Kernel(4, 1) as (bx, by):
                A[bx] = T.ceildiv(x, by * 2)  # <ceildiv-by>

    assert _defined("ceildiv-by", build) == (
        "T.ceildiv: rhs (the divisor) by * 2 is always 0 here: by is the block index of a grid of one block "
        "along y; divide by a value of at least 1")


def _floordiv():
    @T.prim_func
    def floordiv(A: T.Tensor((4,), "int32"), x: T.int32):
        with T.Kernel(1) as bx:
            A[0] = x // bx  # <floordiv-bx>

    return floordiv


def _floormod():
    @T.prim_func
    def floormod(A: T.Tensor((4,), "int32"), x: T.int32):
        with T.Kernel(1) as bx:
            A[1] = x + 1
            A[0] = x % bx  # <floormod-bx>

    return floormod


def _truncdiv_loop():
    @T.prim_func
    def truncdiv_loop(A: T.Tensor((4,), "int32"), x: T.int32):
        with T.Kernel(2) as bx:
            for i in T.serial(1):
                A[bx] = T.truncdiv(x, i)  # <truncdiv-i>

    return truncdiv_loop


def _difference():
    @T.prim_func
    def difference(A: T.Tensor((4,), "int32"), x: T.int32):
        with T.Kernel(2) as bx:
            A[bx] = x // (bx - bx)  # <difference>

    return difference


_TAIL = "; divide by a value that is at least 1 (or leave the division out where the divisor is 0)"


@pytest.mark.parametrize("target", TARGETS)
def test_division_by_the_block_index_of_a_one_block_grid(target):
    assert _lowered("floordiv-bx", _floordiv, target) == (
        f"integer division by zero: the divisor bx of x // bx is always 0 here: {_BX}{_TAIL}")
    assert _lowered("floormod-bx", _floormod, target) == (
        f"integer division by zero: the divisor bx of x % bx is always 0 here: {_BX}{_TAIL}")


@pytest.mark.parametrize("target", TARGETS)
def test_division_by_a_loop_variable_or_an_expression_that_is_zero(target):
    assert _lowered("truncdiv-i", _truncdiv_loop, target) == (
        "integer division by zero: the divisor i of T.truncdiv(x, i) is always 0 here: i is the variable of a "
        f"loop of one iteration, which is 0{_TAIL}")
    assert _lowered("difference", _difference, target) == (
        f"integer division by zero: the divisor bx - bx of x // (bx - bx) is always 0 here{_TAIL}")


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_divisors_of_a_one_block_grid_that_are_not_zero_still_run(path):
    @T.prim_func
    def shifted(A: T.Tensor((4,), "int32"), x: T.int32):
        with T.Kernel(1) as bx:
            A[0] = T.align_up(x, bx + 4)
            A[1] = T.ceildiv(x, bx + 2)
            A[2] = x // (bx + 3)
            A[3] = x % (bx + 3)

    a = torch.zeros(4, dtype=torch.int32)
    compile_on(shifted, path)(a, 10)
    assert a.tolist() == [12, 5, 3, 1]


def _loop_extent():
    @T.prim_func
    def loop_extent(A: T.Tensor((4,), "int32"), x: T.int32):
        with T.Kernel(2) as bx:
            for j in T.serial(1):
                for q in T.serial(T.min(x // j, 4)):  # <extent-j>
                    A[q] = 1

    return loop_extent


@pytest.mark.parametrize("target", TARGETS)
def test_division_by_zero_in_a_loop_extent(target):
    """The loop whose extent holds the division could not be bound while looking for it: TVM's
    InternalError 'Find divide by zero' came out of the lookup itself, with no line."""
    assert _lowered("extent-j", _loop_extent, target) == (
        "integer division by zero: the divisor j of x // j is always 0 here: j is the variable of a loop of one "
        f"iteration, which is 0{_TAIL}")


def test_loop_extent_dividing_by_the_block_index_of_a_one_block_grid():
    def build():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), x: T.int32):
            with T.Kernel(1) as bx:
                for q in T.serial(T.min(x // bx, 4)):  # <extent-bx>
                    A[q] = 1

    assert _defined("extent-bx", build) == (
        f"T.serial: extent T.min(x // bx, 4): integer division by zero: the divisor bx of x // bx is always 0 "
        f"here: {_BX}; divide by a value that is at least 1")


def test_align_up_by_an_expression_that_simplifies_to_zero():
    """``bx - bx`` is 0 in any grid: ``T.align_up(x, bx - bx)`` is ``T.ceildiv(x, 0) * 0``, which TVM
    folded to 0, so the kernel stored 0 with no error while ``x // (bx - bx)`` is refused."""

    def build():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), x: T.int32):
            with T.Kernel(3) as bx:
                A[bx] = T.align_up(x, bx - bx)  # <align-difference>

    assert _defined("align-difference", build) == (
        "T.align_up: y (the alignment) bx - bx is always 0 here: bx - bx simplifies to 0; the alignment must "
        "be at least 1")


@pytest.mark.parametrize("loop", ["serial", "Parallel", "unroll"])
def test_loop_extent_dividing_by_an_expression_that_simplifies_to_zero(loop):
    """TVM's loop builders simplify the extent while the kernel is defined and stopped at
    ``x // (bx - bx)`` with a DiagnosticError 'Check failed: (!divisor.is_const(0)) is false: Find
    divide by zero'."""

    def build():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32"), x: T.int32):
            with T.Kernel(3) as bx:
                for q in getattr(T, loop)(T.min(T.max(x // (bx - bx), 0), 4)):  # <loop-difference>
                    A[q] = 1

    message = _defined("loop-difference", build)
    assert message.endswith(
        "integer division by zero: the divisor bx - bx of x // (bx - bx) is always 0 here: bx - bx simplifies "
        "to 0; divide by a value that is at least 1"), message
    assert message.startswith(f"T.{loop}: extent"), message
