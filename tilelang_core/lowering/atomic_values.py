"""Atomics and external calls whose value is used inside a larger expression run exactly once.

``T.atomic_add(dst, v, return_prev=True)`` is an expression with a side effect. Inside another
operation TVM's code generators and the pipeline's own rewrites may evaluate an operand more than
once or not at all: C prints ``T.max(x, -1)`` as ``(x > -1 ? x : -1)``, ``//`` and ``%`` use their
left operand twice, ``T.abs`` and ``T.clamp`` become selects, and ``x * 0`` folds to 0. With an
atomic as ``x``, ten blocks each adding 1 ended at 20, 30 or 40, or at 0, with no error.

:func:`bind_atomic_values` runs first in the frontend, before any rewrite, and stores each such
atomic's value (one that is an operand, not the whole value of a store or statement) into a
one-element local buffer right before its statement, in evaluation order; the statement then
reads the buffer. (A buffer rather than a ``Bind``: TVM's bfloat16 legalization does not
convert ``Bind`` values, lowering/atomics.py.) An atomic in a branch that may not run (the arms of ``T.if_then_else`` and of a
select, the right operand of ``and``/``or``) is left where it is: binding it in front would run it
unconditionally.

Such an atomic stays in its branch on every target: the right operand of ``and``/``or`` and the
arms of a select that hold one become ``T.if_then_else`` (:func:`branch_effects`), which every code
generator evaluates as a branch. LLVM computes both operands of ``and``/``or`` and both arms of a
``select`` before combining them, so on ``llvm`` ``if A[i] < 0 and T.atomic_add(C[0], 1, ...) >= 0``
added 1 for every ``i`` (C and CUDA short-circuit ``&&``, ``||`` and ``?:``).

A ``T.call_extern`` of an external function (:func:`is_external_call`: any name but the kernel
language's own ``tl.*`` markers, with a value that is not a pointer or void) is bound the same
way: C printed ``T.min(f(p), g(p))`` as ``(f(p) < g(p) ? f(p) : g(p))``, three calls, and
``f(p) // n`` and LLVM's integer ``T.abs`` evaluated ``f`` twice or three times. The side effects
of such a function cannot be seen, so every one is bound.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, substitute
from .atomics import parse
from .markers import extern_name

__all__ = ["bind_atomic_values", "branch_effects", "conditional_calls", "effect_calls", "evaluated_once", "is_external_call"]

#: Values that are not kept in a one-element buffer (a pointer, nothing).
_UNBOUND_DTYPES = ("handle", "void")


def is_external_call(node: Any) -> bool:
    """Whether ``node`` is a ``T.call_extern`` of an external function returning a value: a
    ``call_extern`` not named like the kernel language's markers (``tl.*``), not of a pointer
    or void dtype."""
    name = extern_name(node)
    if name is None or name.startswith("tl."):
        return False
    dtype = getattr(node.ty, "dtype", None)  # a pointer's type (PointerType) has none
    return dtype is not None and str(dtype) not in _UNBOUND_DTYPES


def _is_effect(call: Any) -> bool:
    return parse(call) is not None or is_external_call(call)


def effect_calls(node: Any) -> list:
    """The atomic marker calls and external calls in ``node`` (outer ones before the ones in
    their operands): the calls whose value must be computed once."""
    return [call for call in collect(node, tvm.ir.Call) if _is_effect(call)]


def evaluated_once(build: Any, *operands: Any) -> Any:
    """``build(*operands)``, for an expression that repeats its operands: each operand with a side
    effect (:func:`effect_calls`: an atomic's previous value, a ``T.call_extern``) is bound once
    by a ``Let`` instead, which :func:`bind_atomic_values` turns into a statement. Repeated, the
    atomic of ``T.atomic_add(C[0], 1.0, return_prev=True) // 1.0`` ran up to 12 times."""
    lets = []

    def bind(value: Any) -> Any:
        if not tvm.ir.is_prim_expr(value) or not effect_calls(value):
            return value
        var = tirx.Var("operand", str(value.ty.dtype))
        lets.append((var, value))
        return var

    out = build(*[bind(value) for value in operands])
    for var, value in reversed(lets):
        out = tirx.Let(var, value, out)
    return out


def conditional_calls(node: Any) -> list:
    """The calls in ``node`` (an expression or a statement) that may not run when it does: in an
    arm of a select or of ``T.if_then_else``, or right of ``and``/``or`` (the nodes themselves)."""
    found: list = []
    for sel in collect(node, tirx.Select):
        found += collect(sel.true_value, tvm.ir.Call) + collect(sel.false_value, tvm.ir.Call)
    for logical in collect(node, (tirx.And, tirx.Or)):
        found += collect(logical.b, tvm.ir.Call)
    for call in collect(node, tvm.ir.Call):
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "prim.if_then_else":
            found += collect(call.args[1], tvm.ir.Call) + collect(call.args[2], tvm.ir.Call)
    return found


#: Expressions that evaluate only one of two parts (:func:`_branch`), and the calls.
_UNITS = (tvm.ir.Call, tirx.Select, tirx.And, tirx.Or)


def _branch(node: Any) -> Any:
    """``(condition, then, else)`` of a scalar expression that evaluates one of two parts:
    ``T.if_then_else(c, t, f)``, a select, ``a and b`` (``(a, b, False)``), ``a or b``
    (``(a, True, b)``); None for any other node."""
    if not tvm.ir.is_prim_expr(node) or not _scalar(node):
        return None
    if isinstance(node, tvm.ir.Call) and isinstance(node.op, tvm.ir.Op) and node.op.name == "prim.if_then_else":
        return node.args[0], node.args[1], node.args[2]
    if isinstance(node, tirx.Select):
        return node.condition, node.true_value, node.false_value
    if isinstance(node, tirx.And):
        return node.a, node.b, tirx.const(False, "bool")
    if isinstance(node, tirx.Or):
        return node.a, tirx.const(True, "bool"), node.b
    return None


def _effect_branch(node: Any) -> bool:
    """Whether ``node`` is a :func:`_branch` with an atomic or external call in a part it may skip."""
    parts = _branch(node)
    return parts is not None and bool(effect_calls(parts[1]) or effect_calls(parts[2]))


def _next_unit(expr: Any) -> Any:
    """The first (in evaluation order) part of ``expr`` to evaluate in front of its statement: an
    atomic or external call that is an operand (not ``expr`` itself), or a branch with such a call
    in an arm (``T.if_then_else(c, f(p), 0)`` inside ``T.max``, ``//``, ...: the operators repeat
    the whole branch), always evaluated (not inside an arm of another branch), reading no variable
    of a ``Let`` inside ``expr``, and holding no other such part; None when there is none."""
    in_arms: list = []
    for node in collect(expr, _UNITS):
        parts = _branch(node)
        if parts is not None:
            in_arms += collect(parts[1], _UNITS) + collect(parts[2], _UNITS)

    def candidate(node: Any) -> bool:
        if any(node.same_as(n) for n in in_arms):
            return False
        if _is_effect(node):
            return not node.same_as(expr) and not _uses_inner_lets(node, expr)
        return _effect_branch(node) and not _uses_inner_lets(node, expr)

    units = [n for n in collect(expr, _UNITS) if candidate(n)]
    for unit in units:  # pre-order: the first one holding no other comes first in evaluation order
        if not any(other is not unit and not other.same_as(unit) and any(other.same_as(m) for m in collect(unit, _UNITS))
                   for other in units):
            return unit
    return None


def _bind(expr: Any, lets: list) -> Any:
    """``expr`` with each atomic or external call that is an operand and always evaluated, and
    each always-evaluated branch (``T.if_then_else``, a select, ``and``/``or``) with such a call
    in an arm, replaced by a load of a one-element buffer, one at a time in evaluation order
    (the arguments of ``f(g(p))`` before ``f``), wherever the pipeline's operators repeated it:
    ``T.min(f(T.abs(g(p))), 3)`` ran ``g`` twice when only ``f`` was bound, and
    ``T.if_then_else(c, f(p), 0) // 2`` ran ``f`` twice. A ``T.abs``/``T.clamp`` operand bound by a
    ``Let`` (language/tileops/intrinsics.py) that reads a bound value is stored the same way.
    ``(slot, value)`` pairs are appended to ``lets`` in evaluation order; a branch's slot is
    stored by an ``if`` (:func:`_wrap`), so its arms still run only when taken."""
    while True:
        unit = _next_unit(expr)
        if unit is None:
            return expr
        slot = _slot("atomic_prev" if parse(unit) is not None else
                     "call_value" if _is_effect(unit) else "branch_value", unit.ty.dtype, lets)
        lets.append((slot, unit))
        slots = [s for s, _ in lets]

        def on_unit(node: Any, unit=unit, slot=slot) -> Any:
            return slot if node.same_as(unit) else node

        def on_let(node: Any, slots=slots) -> Any:
            if not any(_reads(node.value, s) for s in slots):
                return node
            let_slot = _slot("operand", node.var.ty.dtype, lets)
            lets.append((let_slot, node.value))
            return substitute(node.body, [(node.var, let_slot)])

        expr = tvm_ffi.structural_map(expr, [(tvm.ir.Call, on_unit), (tirx.Select, on_unit), (tirx.And, on_unit),
                                             (tirx.Or, on_unit), (tirx.Let, on_let)])


def _uses_inner_lets(call: Any, expr: Any) -> bool:
    """Whether ``call`` reads a variable that a ``Let`` inside ``expr``, and outside ``call``,
    binds (it cannot move in front of the statement then)."""
    own = collect(call, tirx.Let)
    inner = [let.var for let in collect(expr, tirx.Let) if not any(let.same_as(o) for o in own)]
    return bool(inner) and any(v.same_as(w) for v in collect(call, tirx.Var) for w in inner)


def _slot(name: str, dtype: Any, lets: list) -> Any:
    """A load of a new one-element local buffer (allocated and stored by :func:`_wrap`)."""
    buffer = tirx.decl_buffer([1], str(dtype), name=f"{name}{len(lets)}", scope="local")
    return tirx.BufferLoad(buffer, [0])


def _reads(node: Any, load: Any) -> bool:
    return any(x.source.same_as(load.source) for x in collect(node, tvm.ir.TensorLoad))


def _wrap(stmt: Any, lets: list) -> Any:
    """``stmt`` after the allocations and stores of its ``lets``, each store bound the same way
    (:func:`_store`); a branch's value is stored by an ``if`` whose arms store their part."""
    prefix: list = []
    for load, value in lets:
        prefix.append(tirx.AllocBuffer(load.source))
        parts = _branch(value) if _effect_branch(value) else None
        if parts is None:  # a Let's value bound after a part of it may hold calls still to bind
            prefix.append(_store(tirx.BufferStore(load.source, value, [0])))
            continue
        condition, then, other = parts
        prefix.append(tirx.IfThenElse(condition, _store(tirx.BufferStore(load.source, then, [0])),
                                      _store(tirx.BufferStore(load.source, other, [0]))))
    return tirx.SeqStmt([*prefix, stmt])


def _store(node: Any) -> Any:
    lets: list = []
    indices = [_bind(i, lets) for i in node.indices]
    value = _bind(node.value, lets)
    if not lets:
        return node
    return _wrap(tirx.BufferStore(node.buffer, value, indices), lets)


def _evaluate(node: Any) -> Any:
    lets: list = []
    value = _bind(node.value, lets)
    return _wrap(tirx.Evaluate(value), lets) if lets else node


def _if(node: Any) -> Any:
    lets: list = []
    condition = _bind(node.condition, lets)
    if not lets:
        return node
    return _wrap(tirx.IfThenElse(condition, node.then_case, node.else_case), lets)


def _scalar(node: Any) -> bool:
    return tvm.runtime.DataType(str(node.ty.dtype)).lanes == 1


def branch_effects(node: Any) -> Any:
    """``node`` with each ``and``/``or`` whose right operand, and each select whose arm, holds an
    atomic or external call (:func:`effect_calls`) written as ``T.if_then_else``: ``a and b`` as
    ``if_then_else(a, b, False)``, ``a or b`` as ``if_then_else(a, True, b)``, ``select(c, t, f)``
    as ``if_then_else(c, t, f)``. Code generators evaluate ``if_then_else`` as a branch; LLVM's
    ``and``, ``or`` and ``select`` evaluate both operands. Vector expressions are left as they are."""

    def on_logical(n: Any) -> Any:
        if not _scalar(n) or not effect_calls(n.b):
            return n
        if isinstance(n, tirx.And):
            return tirx.if_then_else(n.a, n.b, tirx.const(False, "bool"))
        return tirx.if_then_else(n.a, tirx.const(True, "bool"), n.b)

    def on_select(n: Any) -> Any:
        if not _scalar(n) or not (effect_calls(n.true_value) or effect_calls(n.false_value)):
            return n
        return tirx.if_then_else(n.condition, n.true_value, n.false_value)

    return tvm_ffi.structural_map(node, [(tirx.And, on_logical), (tirx.Or, on_logical), (tirx.Select, on_select)])


def bind_atomic_values(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every atomic and external call used as an operand evaluated once, in front
    of its statement, and the ones in a branch that may not run kept in a real branch
    (:func:`branch_effects`)."""
    if not effect_calls(func.body):
        return func
    body = tvm_ffi.structural_map(func.body, [(tirx.BufferStore, _store), (tirx.Evaluate, _evaluate),
                                              (tirx.IfThenElse, _if)])
    body = branch_effects(body)
    return func if body.same_as(func.body) else func.with_body(body)
