"""Integer divisions by a run-time divisor on CPU targets: an error at the call, never a crash.

x86 traps an integer division or remainder by 0, and a signed one of the type's minimum by -1
(``-2**31 // -1``): a kernel computing ``A[i] // B[i]`` with a 0 in ``B`` stopped the whole
Python process with ``SIGFPE``, on ``c`` and ``llvm``, with both backends. torch raises
``RuntimeError: ZeroDivisionError`` for the first and wraps around for the second
(``-2**31 // -1 == -2**31``, ``-2**31 % -1 == 0``).

:func:`check_divisions` rewrites, after the frontend (lowering/frontend.py) on every CPU path, each
scalar integer ``//``, ``%``, ``T.truncdiv`` and ``T.truncmod`` whose divisor is not known to be
nonzero (a constant, or an expression TVM's analyzer proves nonzero from the loop ranges):

* the division itself never traps: it divides by 1 where the divisor is 0, and where a 32- or
  64-bit signed divisor is -1 and the dividend the minimum, so that ``MIN // -1`` is ``MIN``
  (wrapping around) and ``MIN % -1`` is 0, as in torch
  (int8/int16 divisions are computed in ``int`` by C and in int32 on ``llvm``,
  lowering/narrow_divisions.py, where ``MIN // -1`` does not trap);
* the statement holding it is preceded by a check of the divisor, under the conditions that let
  the division run at all (the arm of ``T.if_then_else`` or ``T.Select`` it sits in, the right
  operand of ``and``/``or``), and that check ends the call with ``RuntimeError("<kernel>() failed:
  integer division by zero at file:line: the divisor B[i] of A[i] // B[i] is 0")``:

  - ``"status"`` (the C entry point, lowering/device_assert.py): the check is a
    ``T.device_assert`` that returns from the block; a ``#pragma omp simd`` on the loop around it
    is dropped (x86 has no vector integer division, so the loop was not vectorized anyway);
  - ``"runtime"`` (TVM's runtime module on ``llvm``): the check records which division failed in
    a flag of the call and the kernel runs to its end, because TVM's parallel launch drops an
    error raised inside the parallel block loop; an assertion after the blocks raises it.

A divisor that calls a function with a side effect (an atomic with ``return_prev=True``,
``T.call_extern``) would run twice and is left as written, and so are vector divisions; divisions
inside a ``let`` expression or a ``while`` condition are made trap-free but not reported (the
check cannot be placed before them). CUDA, Metal and ROCm do not trap on a division by 0 and are left alone.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx

from ..calling import DIVISION_BY_ZERO_TEXT
from ..language.kept_effects import has_side_effect
from ..language.spans import node_location
from ..language.tileops._common import collect
from ..language.tileops.debug import DEVICE_ASSERT_CALL
from ..language.zero_divisors import division_text
from .atomics import checked_map
from .barriers import barrier
from .frontend import without_simd_pragmas
from .markers import extern_name

__all__ = ["FORMS", "check_divisions"]

#: The ways :func:`check_divisions` reports a division by zero.
FORMS = ("status", "runtime")

_DIVISIONS = (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)
#: Every TIR operation with two operands (TVM 0.27 makes the bitwise ones and the shifts nodes of
#: their own, not calls: the mask of a widening cast, ``(int64)(A[i] // B[i] & 0xFFFFFFFFu)`` of
#: lowering/wrapping_casts.py, hid its division from the walk, which then divided by 1 unreported).
_BINARY = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Min, tirx.Max, tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE,
           tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod, tirx.BitwiseAnd, tirx.BitwiseOr, tirx.BitwiseXor,
           tirx.LShift, tirx.RShift)
_IF_THEN_ELSE = "prim.if_then_else"


def _needs_check(node: Any, analyzer: Any) -> bool:
    """Whether ``node`` is a scalar integer division whose divisor may be 0 (or a signed -1)."""
    dtype = tvm.DataType(str(node.ty.dtype))
    if dtype.lanes != 1 or dtype.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT):
        return False
    divisor = node.b
    if isinstance(divisor, tirx.IntImm):
        return False  # 0 is refused while lowering (zero_divisors.py); -1 is minus_one_divisors.py's
    if has_side_effect(divisor):
        return False
    zero = tirx.const(0, str(divisor.ty.dtype))
    if analyzer.const_int_bound(divisor).min_value > 0:
        return False  # ``max(size, 1)`` of uint64, which ``can_prove(size != 0)`` does not see (lowering/loop_steps.py)
    if analyzer.can_prove(divisor == zero):
        return False  # always 0 (bx of a one-block grid): a LoweringError at its line (zero_divisors.py)
    return not analyzer.can_prove(divisor != zero) or _minus_one_possible(node, analyzer)


def _traps_on_minus_one(node: Any) -> bool:
    dtype = tvm.DataType(str(node.ty.dtype))
    return dtype.type_code == tvm.DataTypeCode.INT and dtype.bits >= 32


def _minus_one_possible(node: Any, analyzer: Any) -> bool:
    return _traps_on_minus_one(node) and not analyzer.can_prove(node.b != tirx.const(-1, str(node.b.ty.dtype)))


def _is_minimum(value: Any) -> Any:
    """Whether the signed integer ``value`` is its type's minimum, compared as unsigned bits:
    ``(uint32)a == 2147483648u``. Not as ``a == -2**31``: TVM's simplifier moved constants
    across that (``x + 1 == -2**31`` became ``x == -2**31 - 1``, a literal int32 cannot hold).
    The operand is behind a :func:`~.barriers.barrier` so that the simplifier never folds
    ``(uint32)-8`` ("cannot make uint from negative value"); StripBarriers folds it, wrapping."""
    dtype = str(value.ty.dtype)
    unsigned = "u" + dtype
    return tirx.Cast(unsigned, barrier(value)) == tirx.const(1 << (tvm.DataType(dtype).bits - 1), unsigned)


def _safe(node: Any, analyzer: Any) -> Any:
    """``node`` computed without a trap: a divisor of 0 replaced by 1, and so is a signed -1 where
    the dividend is the minimum (``MIN // 1`` is ``MIN``, the wrapped value of ``MIN // -1`` in
    torch; ``MIN % 1`` is 0, as ``MIN % -1``).

    The divisor alone is guarded: no ``Select(b == -1, -q, q)`` around the quotient. Given that
    form, LLVM rewrote the quotient's divisor on the arm where ``b != -1`` (``umax(b, 1)``) while
    still computing it for every ``b``, and ``MIN // -1`` stopped the process with SIGFPE."""
    if not _needs_check(node, analyzer):
        return node
    a, b = node.a, node.b
    dtype = str(b.ty.dtype)
    zero, one = tirx.const(0, dtype), tirx.const(1, dtype)
    unsafe = b == zero
    if _minus_one_possible(node, analyzer):
        unsafe = tirx.Or(unsafe, tirx.And(b == tirx.const(-1, dtype), _is_minimum(a)))
    return type(node)(a, tirx.Select(unsafe, one, b))


def _safe_annotations(loop: Any, analyzer: Any) -> Any:
    """``loop`` with the divisions in its annotations made safe: the frontend's estimate of a block
    loop's work (``BLOCK_LOOP_KEY``, computed before the blocks run) holds the extents of the loops
    in the blocks, ``64 // s`` say."""
    annotations = dict(loop.annotations or {})
    changed = {key: checked_map(value, [(_DIVISIONS, lambda node: _safe(node, analyzer))])
               for key, value in annotations.items() if tvm.ir.is_prim_expr(value)}
    if all(changed[key].same_as(annotations[key]) for key in changed):
        return loop
    annotations.update(changed)
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations,
                    loop.step, loop.span)


def _unguarded(expr: Any) -> Any:
    """``expr`` with the access guards' ``T.if_then_else(in bounds, A[i], 0)`` shown as ``A[i]``."""

    def on_call(call: Any) -> Any:
        if getattr(call.op, "name", None) == _IF_THEN_ELSE and isinstance(call.args[1], tvm.ir.TensorLoad):
            return call.args[1]
        return call

    return checked_map(expr, [(tvm.ir.Call, on_call)])


def _divisions(exprs: Any, analyzer: Any) -> list:
    """``(conditions, division)`` for each division of ``exprs`` (one statement's own expressions)
    that needs a check, with the conditions under which it runs (inner divisions before the ones
    holding them). The walk keeps its own stack: an expression thousands of operations deep is
    fine (Python's recursion limit is not)."""
    found: list = []
    for root in exprs:
        stack: list = [(root, (), False)]
        while stack:
            expr, where, done = stack.pop()
            if done:  # a division whose operands were walked
                if _needs_check(expr, analyzer):
                    found.append((where, expr))
                continue
            if isinstance(expr, _DIVISIONS):
                stack.append((expr, where, True))
            stack.extend(reversed(_operands(expr, where)))
    return found


def _operands(expr: Any, conds: tuple) -> list:
    """``(operand, conditions it runs under, False)`` for each operand of ``expr``, in order: the
    arms of ``T.if_then_else``/``T.Select`` under their condition (or its negation), the right
    operand of ``and``/``or`` under the left one (or its negation); a ``let`` body is left out
    (it uses the let variable, unknown before the statement)."""
    if isinstance(expr, tirx.And):
        return [(expr.a, conds, False), (expr.b, conds + (expr.a,), False)]
    if isinstance(expr, tirx.Or):
        return [(expr.a, conds, False), (expr.b, conds + (tirx.Not(expr.a),), False)]
    if isinstance(expr, tirx.Select):
        return _arms(expr.condition, expr.true_value, expr.false_value, conds)
    if isinstance(expr, tvm.ir.Call) and getattr(expr.op, "name", None) == _IF_THEN_ELSE:
        return _arms(*expr.args, conds)
    if isinstance(expr, tirx.Let):
        return [(expr.value, conds, False)]
    if isinstance(expr, _BINARY):
        return [(expr.a, conds, False), (expr.b, conds, False)]
    if isinstance(expr, (tirx.Not, tirx.BitwiseNot)):
        return [(expr.a, conds, False)]
    if isinstance(expr, (tirx.Cast, tirx.Broadcast)):
        return [(expr.value, conds, False)]
    if isinstance(expr, tvm.ir.Call):
        return [(arg, conds, False) for arg in expr.args]
    if isinstance(expr, tvm.ir.TensorLoad):
        return [(index, conds, False) for index in expr.indices]
    if isinstance(expr, tirx.Ramp):
        return [(expr.base, conds, False), (expr.stride, conds, False)]
    return []


def _arms(cond: Any, then: Any, other: Any, conds: tuple) -> list:
    return [(cond, conds, False), (then, conds + (cond,), False), (other, conds + (tirx.Not(cond),), False)]


def _own_expressions(stmt: Any) -> list:
    """The expressions a statement evaluates before (or instead of) its body."""
    if isinstance(stmt, tirx.BufferStore):
        return [*stmt.indices, stmt.value]
    if isinstance(stmt, tirx.Evaluate):
        return [stmt.value]
    if isinstance(stmt, tirx.Bind):
        return [stmt.value]
    if isinstance(stmt, tirx.IfThenElse):
        return [stmt.condition]
    if isinstance(stmt, tirx.For):
        return [stmt.min, stmt.extent]
    if isinstance(stmt, tirx.AssertStmt):
        return [stmt.condition]
    return []


def _nested(conds: tuple, stmt: Any) -> Any:
    for cond in reversed(conds):
        stmt = tirx.IfThenElse(cond, stmt, None)
    return stmt


def _flat(stmt: Any) -> Any:
    """Nested ``SeqStmt``s spliced into their parent (a ``Bind`` keeps the rest of its sequence)."""

    def on_seq(seq: Any) -> Any:
        if not any(isinstance(s, tirx.SeqStmt) for s in seq.seq):
            return seq
        items: list = []
        for s in seq.seq:
            items.extend(s.seq if isinstance(s, tirx.SeqStmt) else [s])
        return tirx.SeqStmt(items)

    return checked_map(stmt, [(tirx.SeqStmt, on_seq)])


def _is_check(stmt: Any) -> bool:
    texts = [c.args[-1] for c in collect(stmt, tvm.ir.Call)
             if extern_name(c) == DEVICE_ASSERT_CALL and len(c.args) == 3]
    return any(isinstance(t, tvm.ir.StringImm) and t.value.startswith(DIVISION_BY_ZERO_TEXT) for t in texts)


def _contains_check(stmt: Any) -> bool:
    return any(_is_check(e) for e in collect(stmt, tirx.Evaluate))


def _analyzer(body: Any) -> Any:
    """TVM's analyzer knowing every loop variable's range (the proofs only spare checks)."""
    analyzer = tvm.sym.Analyzer()
    for loop in collect(body, tirx.For):
        try:
            analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent), allow_override=True)
        except tvm.error.InternalError:
            continue
    return analyzer


def check_divisions(func: tirx.PrimFunc, form: str, location: str) -> tirx.PrimFunc:
    """``func`` (a CPU kernel after the frontend) with its run-time integer divisions made safe and
    checked, a division by zero reported in ``form`` (one of :data:`FORMS`); ``location`` is the
    kernel's ``file:line``, used where a statement has no line of its own."""
    if form not in FORMS:
        raise ValueError(f"check_divisions: form must be one of {', '.join(FORMS)}, got {form!r}")
    analyzer = _analyzer(func.body)
    texts: list[str] = []
    flag = tirx.decl_buffer([1], "int32", name="tl_division_by_zero", scope="local") if form == "runtime" else None

    def report(conds: tuple, node: Any, where: str) -> Any:
        divisor = _unguarded(node.b)
        text = (f"{DIVISION_BY_ZERO_TEXT}{where}: the divisor {divisor} of "
                f"{division_text(_unguarded(node))} is 0")
        texts.append(text)
        is_zero = node.b == tirx.const(0, str(node.b.ty.dtype))
        if flag is None:
            marker = tirx.Evaluate(tirx.call_extern("int32", DEVICE_ASSERT_CALL, tirx.Not(is_zero),
                                                    tvm.ir.StringImm(text)))
            return _nested(conds, marker)
        first = tirx.BufferLoad(flag, [tirx.const(0, "int32")]) == tirx.const(0, "int32")
        record = tirx.BufferStore(flag, tirx.const(len(texts), "int32"), [tirx.const(0, "int32")])
        return _nested(conds + (is_zero, first), record)  # the first failure of the block, as "status" reports

    def on_stmt(stmt: Any) -> Any:
        found = _divisions(_own_expressions(stmt), analyzer)
        if not found:
            return stmt
        where = node_location(stmt, location)
        checks = [report(conds, node, where) for conds, node in found]
        return tirx.SeqStmt([*checks, stmt])

    kinds = (tirx.BufferStore, tirx.Evaluate, tirx.Bind, tirx.IfThenElse, tirx.For, tirx.AssertStmt)
    body = checked_map(func.body, [(kinds, on_stmt)])
    # made trap-free even where nothing is reported: a division in a ``while`` condition or a
    # ``let`` body has no check of its own, and divided by 0 (SIGFPE) when it was the only one
    body = checked_map(body, [(_DIVISIONS, lambda node: _safe(node, analyzer))])
    body = checked_map(body, [(tirx.For, lambda loop: _safe_annotations(loop, analyzer))])
    if not texts:
        return func if body.same_as(func.body) else func.with_body(body)
    body = _flat(body)
    if flag is None:
        return func.with_body(without_simd_pragmas(body, _contains_check))  # a return may not leave omp simd
    zero = tirx.const(0, "int32")
    raised = [tirx.AssertStmt(tirx.BufferLoad(flag, [zero]) != tirx.const(k + 1, "int32"),
                              tvm.ir.StringImm("RuntimeError"), [tvm.ir.StringImm(text)])
              for k, text in enumerate(texts)]
    return func.with_body(tirx.SeqStmt([tirx.AllocBuffer(flag), tirx.BufferStore(flag, zero, [zero]), body, *raised]))
