"""Shared-memory reads in ``if``/``while`` conditions and loop bounds, moved where TVM's ThreadSync sees them.

TVM 0.27's ``ThreadSync`` records the shared-memory accesses of a kernel statement by statement,
and only in statements it can place a barrier before. A read of a ``shared``/``shared.dyn``
buffer in an ``if`` or ``while`` condition, or in a loop's bounds, is in no such statement: the
pass stops with an internal check (``allow_append_ is false``) and the kernel does not lower.
Kernels read shared memory there all the time (``if s[i] > 0:``, ``while queue[head] >= 0:``).

:func:`HoistConditionLoads` runs on GPU functions right before ``ThreadSync`` and binds each
such expression to a variable first (a ``Bind`` statement, which ThreadSync does record), so the read
gets the barriers it needs:

- ``if c: A else: B``  ->  ``let v = c; if v: A else: B``;
- ``for i in range(lo, lo + n)``  ->  ``let v = n; for i in range(lo, lo + v)`` (each bound that reads it);
- ``while c: B``  ->  ``while true: (let v = c; if not v: break); B`` -- the condition is read
  again on every iteration, before the body, after a ``continue`` too.

Only expressions that read such memory are moved; every other statement is left as it is.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

_SYNCED_SCOPES = ("shared", "shared.dyn")


def reads_synced_memory(expr: Any) -> bool:
    """Whether ``expr`` loads from a ``shared``/``shared.dyn`` buffer."""
    found = []

    def on_load(load: Any) -> Any:
        if str(load.source.ty.storage_scope) in _SYNCED_SCOPES:
            found.append(load)
        return load

    tvm_ffi.structural_map(expr, [(tvm.ir.TensorLoad, on_load)])
    return bool(found)


def _bound(expr: Any, name: str) -> tuple:
    """``(var, wrap)``: a fresh variable for ``expr`` and ``wrap(stmt)`` binding it around ``stmt``."""
    var = tirx.Var(name, str(expr.ty.dtype))
    return var, lambda stmt: tirx.SeqStmt([tirx.Bind(var, expr), stmt])


def _hoist(stmt: Any) -> Any:
    if isinstance(stmt, tirx.IfThenElse) and reads_synced_memory(stmt.condition):
        var, wrap = _bound(stmt.condition, "cond")
        return wrap(tirx.IfThenElse(var, stmt.then_case, stmt.else_case, stmt.span))
    if isinstance(stmt, tirx.For) and (reads_synced_memory(stmt.min) or reads_synced_memory(stmt.extent)):
        binds, bounds = [], []
        for expr, name in ((stmt.min, "loop_min"), (stmt.extent, "loop_extent")):
            if reads_synced_memory(expr):
                var = tirx.Var(name, str(expr.ty.dtype))
                binds.append(tirx.Bind(var, expr))
                expr = var
            bounds.append(expr)
        loop = tirx.For(stmt.loop_var, bounds[0], bounds[1], stmt.kind, stmt.body, stmt.thread_binding,
                        stmt.annotations, stmt.step, stmt.span)
        return tirx.SeqStmt([*binds, loop])
    if isinstance(stmt, tirx.While) and reads_synced_memory(stmt.condition):
        var, wrap = _bound(stmt.condition, "cond")
        leave = wrap(tirx.IfThenElse(tirx.Not(var), tirx.Break(), None))
        return tirx.While(tirx.const(True, "bool"), tirx.SeqStmt([leave, stmt.body]), stmt.span)
    return stmt


def hoist_condition_loads(body: Any) -> Any:
    """``body`` with its shared-memory reads in conditions and loop bounds bound first (module docstring)."""
    return tvm_ffi.structural_map(body, [((tirx.IfThenElse, tirx.For, tirx.While), _hoist)])


def HoistConditionLoads() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """GPU functions: :func:`hoist_condition_loads` on every body (run right before ThreadSync)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        body = hoist_condition_loads(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.HoistConditionLoads")
