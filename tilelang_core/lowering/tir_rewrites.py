"""Three small IRModule -> IRModule rewrites over TIR, offered as ``tilelang.transform`` passes.

TileLang's pipeline has passes of these names; kernels and tests call them directly on a module.
Each one here is a TVM ``prim_func_pass`` built on ``tvm_ffi.structural_map``, with this
meaning (docs/compatibility.md, "tilelang.transform"):

* :func:`LegalizeNegativeIndex`: a buffer index the analyzer proves negative (Python-style
  "from the end", e.g. ``A[-1]`` or ``A[-i - 1]`` in a loop) becomes ``index + extent``,
  simplified, unless it is provably below ``-extent``. An index whose sign is unknown
  (``A[shift + i]``) is left as it is: it is never guessed. The compile pipeline runs the same
  rewrite (:func:`legalize_negative_indices`).
* :func:`IfStmtBinding`: an ``if`` (without ``else``) whose body has several statements and
  whose condition is not already a variable evaluates the condition once into a bound variable
  and guards each statement by that variable. Statements in the body that change what the
  condition reads can no longer change which statements run.
* :func:`MergeIfStmt`: adjacent ``if`` statements (without ``else``) with structurally equal
  conditions become one, but only when the first body cannot change the condition: the
  condition reads no buffer that the first body writes and calls nothing impure.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

__all__ = ["IfStmtBinding", "LegalizeNegativeIndex", "MergeIfStmt", "legalize_negative_indices"]


def _loop_ranges(body: Any) -> list[tuple[Any, Any, Any]]:
    """``(loop_var, min, extent)`` of every ``for`` loop under ``body``."""
    ranges: list[tuple[Any, Any, Any]] = []

    def visit(node: Any) -> None:
        ranges.append((node.loop_var, node.min, node.extent))

    tvm_ffi.structural_walk(body, ((tirx.For,), visit), order="pre")
    return ranges


def _wrap_indices(analyzer: Any, shape: Any, indices: Any) -> list | None:
    """``indices`` with each provably negative one moved up by its extent, unless it is provably
    below ``-extent`` (then it stays outside the buffer either way); ``None`` when none changes.
    With a symbolic extent ``n``, ``A[-1]`` becomes ``A[n - 1]``."""
    changed = False
    out = []
    for index, extent in zip(indices, shape):
        dtype = str(getattr(index, "dtype", ""))
        if dtype.startswith("int") and analyzer.can_prove(index < 0):
            extent_expr = tirx.const(int(extent.value), dtype) if isinstance(extent, tirx.IntImm) else extent
            if str(extent_expr.dtype) != dtype:
                extent_expr = tirx.Cast(dtype, extent_expr)
            if not analyzer.can_prove(index < -extent_expr):
                out.append(analyzer.simplify(index + extent_expr))
                changed = True
                continue
        out.append(index)
    return out if changed else None


def legalize_negative_indices(func: Any, _mod: Any = None, _ctx: Any = None) -> Any:
    """``func`` with every buffer index proven negative counted from the end of its dimension, as
    Python and TileLang do (``A[-1]`` is the last element, ``A[-i - 1]`` in ``for i in
    T.serial(4)`` the last four backwards). The pipeline runs this before the accesses are
    guarded (access_guards.py), which gave such an index 0 and skipped its stores; as a
    ``prim_func_pass`` it is :func:`LegalizeNegativeIndex`."""
    analyzer = tvm.sym.Analyzer()
    ranges: dict[Any, list] = {}
    for var, lo, extent in _loop_ranges(func.body):
        ranges.setdefault(var, []).append((lo, extent))
    for var, spans in ranges.items():
        # a variable of two loops with different ranges (one loop emitted twice) is left unbound:
        # what is proven for one range would not hold in the other
        if all(tvm_ffi.structural_equal(lo, spans[0][0]) and tvm_ffi.structural_equal(extent, spans[0][1])
               for lo, extent in spans[1:]):
            analyzer.bind(var, tvm.ir.Range.from_min_extent(*spans[0]))

    def on_store(store: Any) -> Any:
        indices = _wrap_indices(analyzer, store.buffer.shape, store.indices)
        if indices is None:
            return store
        return tirx.BufferStore(store.buffer, store.value, indices, store.span)

    def on_load(load: Any) -> Any:
        indices = _wrap_indices(analyzer, load.source.shape, load.indices)
        if indices is None:
            return load
        return load.source[tuple(indices)]

    body = tvm_ffi.structural_map(func.body, [(tirx.BufferStore, on_store), (tvm.ir.TensorLoad, on_load)])
    if body.same_as(func.body):
        return func
    return func.with_body(body)


def LegalizeNegativeIndex() -> Any:  # noqa: N802 (TileLang's spelling)
    """A pass: buffer indices proven negative (and not below ``-extent``) become ``index + extent``.

    Indices whose sign the analyzer cannot decide (symbolic offsets) stay unchanged.
    """
    return tirx.transform.prim_func_pass(legalize_negative_indices, opt_level=0, name="tl.LegalizeNegativeIndex")


def _is_plain_if(stmt: Any) -> bool:
    return isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None


def _body_statements(stmt: Any) -> list:
    return list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]


def _bind_if_condition(stmt: Any) -> Any:
    if not _is_plain_if(stmt) or isinstance(stmt.condition, (tirx.Var, tirx.IntImm)):
        return stmt
    parts = _body_statements(stmt.then_case)
    if len(parts) < 2:
        return stmt
    cond = tirx.Var("if_cond", "bool")
    guarded = [tirx.IfThenElse(cond, part, None) for part in parts]
    return tirx.SeqStmt([tirx.Bind(cond, stmt.condition), *guarded])


def _if_stmt_binding(func: Any, _mod: Any = None, _ctx: Any = None) -> Any:
    body = tvm_ffi.structural_map(func.body, [(tirx.IfThenElse, _bind_if_condition)])
    return func if body.same_as(func.body) else func.with_body(body)


def IfStmtBinding() -> Any:  # noqa: N802 (TileLang's spelling)
    """A pass: a multi-statement ``if`` evaluates its condition once into a variable and guards
    each of its statements by that variable."""
    return tirx.transform.prim_func_pass(_if_stmt_binding, opt_level=0, name="tl.IfStmtBinding")


def _buffers_read(expr: Any) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, ((tvm.ir.TensorLoad,), lambda n: found.append(n.source)), order="pre")
    return found


def _buffers_written(stmt: Any) -> list:
    found: list = []
    tvm_ffi.structural_walk(stmt, ((tirx.BufferStore,), lambda n: found.append(n.buffer)), order="pre")
    return found


def _has_call(expr: Any) -> bool:
    calls: list = []
    tvm_ffi.structural_walk(expr, ((tvm.ir.Call,), calls.append), order="pre")
    return bool(calls)


def _can_merge(first: Any, second: Any) -> bool:
    if not (_is_plain_if(first) and _is_plain_if(second)):
        return False
    if not tvm_ffi.structural_equal(first.condition, second.condition):
        return False
    if _has_call(first.condition):
        return False
    written = _buffers_written(first.then_case)
    return not any(r.same_as(w) for r in _buffers_read(first.condition) for w in written)


def _merge_seq(seq: Any) -> Any:
    merged: list = []
    for stmt in seq.seq:
        if merged and _can_merge(merged[-1], stmt):
            prev = merged[-1]
            body = _body_statements(prev.then_case) + _body_statements(stmt.then_case)
            merged[-1] = tirx.IfThenElse(prev.condition, tirx.SeqStmt(body), None, prev.span)
        else:
            merged.append(stmt)
    if len(merged) == len(seq.seq):
        return seq
    return merged[0] if len(merged) == 1 else tirx.SeqStmt(merged, seq.span)


def _merge_if_stmt(func: Any, _mod: Any = None, _ctx: Any = None) -> Any:
    body = tvm_ffi.structural_map(func.body, [(tirx.SeqStmt, _merge_seq)])
    return func if body.same_as(func.body) else func.with_body(body)


def MergeIfStmt() -> Any:  # noqa: N802 (TileLang's spelling)
    """A pass: adjacent ``if`` statements with the same condition become one, when the first
    body cannot change that condition (it writes no buffer the condition reads)."""
    return tirx.transform.prim_func_pass(_merge_if_stmt, opt_level=0, name="tl.MergeIfStmt")
