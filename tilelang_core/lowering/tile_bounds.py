"""A tile indexed past its end by a loop that provably runs there: a ``LoweringError`` at the line.

``s = T.alloc_fragment([1], ...)`` then ``for i in T.Parallel(64): s[i] = x`` indexes a 1-element
tile with 0..63 (upstream's ``examples/attention_sink`` backward kernels do, for ``heads == 1``).
On CPU targets the access guards (lowering/access_guards.py) then kept element 0 and dropped the
rest, so the kernel computed a wrong result without a word; on GPU targets the access is outside
the thread's registers. :func:`refuse_tile_overruns` finds the accesses whose index range is known
exactly and lies partly outside the tile, and names the tile, its extent, the index, its range
and the loop.

Only what is certain is refused: a tile (shared, fragment or local memory) of constant extent,
indexed along an axis by ``a * i + b`` of one loop variable ``i`` of constant bounds (constant
``a``, ``b``), in a statement that every iteration of the loops around it runs (no ``if``,
``while`` or ``T.if_then_else`` between the loop and the access). Anything else (an index read
from memory, a dynamic bound, an access under a condition) keeps the guards' behaviour.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx

from ..errors import LoweringError
from ..language.spans import node_location
from ..language.tileops._common import collect, scope_of, static_int

__all__ = ["refuse_tile_overruns"]


def _is_tile(buffer: Any) -> bool:
    return scope_of(buffer).startswith(("shared", "local"))


def _conditional_loads(expr: Any) -> list:
    """The loads of ``expr`` inside a ``T.if_then_else`` (run only when its condition says so)."""
    loads: list = []
    for call in collect(expr, tvm.ir.Call):
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "prim.if_then_else":
            for arg in call.args[1:]:
                loads.extend(collect(arg, tvm.ir.TensorLoad))
    return loads


class _Checker:
    def __init__(self, location: str) -> None:
        self.location = location
        self.loops: dict = {}  # loop variable -> (first, last, the loop) for the loops every iteration reaches

    def _range(self, index: Any) -> Optional[tuple]:
        """``(low, high, variable, loop)`` of an index ``a * i + b`` of one known loop variable."""
        variables = [v for v in collect(index, tirx.Var) if v in self.loops]
        if len(variables) != 1 or collect(index, tvm.ir.TensorLoad) or collect(index, tvm.ir.Call):
            return None
        if any(not any(v.same_as(u) for u in variables) for v in collect(index, tirx.Var)):
            return None  # another variable (a block index, a scalar): not exact
        var = variables[0]
        coefficients = tvm.sym.detect_linear_equation(index, [var])
        if len(coefficients) != 2:
            return None
        a, b = static_int(coefficients[0]), static_int(coefficients[1])
        if a is None or b is None:
            return None
        first, last, loop = self.loops[var]
        ends = (a * first + b, a * last + b)
        return min(ends), max(ends), var, loop

    def _check(self, stmt: Any, buffer: Any, indices: Any) -> None:
        if not _is_tile(buffer):
            return
        for axis, (index, dim) in enumerate(zip(indices, buffer.ty.shape)):
            extent = static_int(dim)
            if extent is None or int(getattr(index.ty, "lanes", 1) or 1) != 1:
                continue
            found = self._range(index)
            if found is None:
                continue
            low, high, var, loop = found
            if 0 <= low and high < extent:
                continue
            loop_at = node_location(loop, "")
            raise LoweringError(
                f"{node_location(stmt, self.location)}: tile '{buffer.name}' has {extent} element"
                f"{'s' if extent != 1 else ''} along axis {axis}, but its index {index} runs from {low} to {high} "
                f"over the loop of '{var}'{f' at {loop_at}' if loop_at else ''}; declare the tile with "
                f"at least {high + 1} elements there, or index it inside its extent"
            )

    def _check_expr(self, stmt: Any, expr: Any) -> None:
        skipped = _conditional_loads(expr)
        for load in collect(expr, tvm.ir.TensorLoad):
            if not any(load.same_as(s) for s in skipped):
                self._check(stmt, load.source, load.indices)

    def visit(self, stmt: Any) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.visit(s)
        elif isinstance(stmt, tirx.For):
            first, extent = static_int(stmt.min), static_int(stmt.extent)
            step = static_int(stmt.step) if getattr(stmt, "step", None) is not None else 1
            if first is None or extent is None or step != 1 or extent <= 0:
                return  # a dynamic or empty loop: its body's ranges are not exact
            self.loops[stmt.loop_var] = (first, first + extent - 1, stmt)
            try:
                self.visit(stmt.body)
            finally:
                del self.loops[stmt.loop_var]
        elif isinstance(stmt, tirx.BufferStore):
            self._check(stmt, stmt.buffer, stmt.indices)
            self._check_expr(stmt, stmt.value)
            for index in stmt.indices:
                self._check_expr(stmt, index)
        elif isinstance(stmt, tirx.Evaluate):
            self._check_expr(stmt, stmt.value)
        elif isinstance(stmt, (tirx.AttrStmt, tirx.DeclBuffer, tirx.LetStmt)) and getattr(stmt, "body", None) is not None:
            self.visit(stmt.body)
        # if / while / anything else: what runs below may be conditional; not checked


def refuse_tile_overruns(func: Any, location: str) -> None:
    """Raise a ``LoweringError`` for an access of a tile that provably runs past it (module docstring).

    :param func: the kernel's ``PrimFunc`` after the front end's index normalisation.
    :param location: ``file:line`` of the kernel, for a statement without a line of its own.
    """
    _Checker(location).visit(func.body)
