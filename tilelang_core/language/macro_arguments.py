"""Arguments of a ``@T.macro`` call bound as Python binds a function's arguments.

TVMScript expands a macro by putting each argument's expression into the macro's name table, so
the expression was pasted wherever the body named its parameter:

* an argument with a side effect ran once per use, or never when the body did not use it:
  ``twice(B, i, T.atomic_add(C[0], 1, return_prev=True))`` whose body is ``B[i] = v + v``
  added twice;
* a parameter the body assigns to (``x = x * 2.0`` in a loop or an ``if``, ``x += 1``) got a
  new binding local to that loop or branch, and the old value came back after it (the product
  was lost without a word);
* a scalar of the caller (``x = A[i]`` in the kernel) passed to a macro that assigns its
  parameter was changed in the caller too (``swap(a, b)`` swapped the caller's variables).

:func:`bind_arguments` gives every parameter the body assigns to a scalar of its own in the
macro, holding the argument's value (as in Python, the caller's variable is not changed), and
binds every other argument with a side effect to a variable (a let), evaluated once at the call. A ``T.alloc_var``
of the caller stays shared (assigning to the parameter stores into it), as in TileLang, where it
is a buffer; so do buffers and tiles. A load from a buffer passed to the same call (``m(A, A[i])``,
whose body may write ``A[i]`` before it reads the parameter) is evaluated at the call too. Other
arguments (loop variables, constants, other loads, index arithmetic) are still used as written:
they have no side effect, and index arithmetic must stay arithmetic for the tile operators'
region analysis. A Python value (``2.0``) stays a Python value, as in TileLang, so a macro that
assigns such a parameter in a run-time loop still gets a new binding local to the loop.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Iterable

__all__ = ["assigned_names", "bind_arguments", "declare_variable"]

#: Buffers of ``T.alloc_var`` scalars (shared with a macro they are passed to) of the kernel being
#: built, and that kernel's IR builder (the buffers of earlier kernels are dropped with it).
_declared: dict[Any, None] = {}
_declared_by: list = [None]


def declare_variable(buffer: Any) -> None:
    """Remember ``buffer`` as a ``T.alloc_var`` scalar (passed to macros by reference)."""
    from tvm.script.ir_builder import IRBuilder

    builder = IRBuilder.current() if IRBuilder.is_in_scope() else None
    if _declared_by[0] is not builder:  # another kernel: what earlier parses left goes
        _declared.clear()
        _declared_by[0] = builder
    _declared[buffer] = None


def assigned_names(body: Iterable[ast.stmt]) -> set:
    """The names ``body`` binds (assignment, augmented and annotated assignment, ``for`` and
    ``with`` targets, ``:=``), not counting functions, classes and comprehensions nested in it:
    the function's local names, as Python decides them."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
              ast.DictComp, ast.GeneratorExp)
    stored: set = set()
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored.add(node.id)
        if isinstance(node, nested):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return stored


def _shared_scalar(value: Any) -> bool:
    from tvm.ir import TensorLoad

    return isinstance(value, TensorLoad) and value.source in _declared


def _needs_own_scalar(value: Any, assigned: bool) -> bool:
    import tvm
    from tvm.ir import PointerType

    from .kept_effects import has_side_effect

    if not isinstance(value, tvm.ir.Expr) or not tvm.ir.is_prim_expr(value):
        return False  # a Python value, a buffer, a tile region: as TVMScript binds it
    if isinstance(getattr(value, "ty", None), PointerType) or _shared_scalar(value):
        return False
    return assigned or has_side_effect(value)


def _reads_any(value: Any, buffers: list) -> bool:
    """Whether the expression ``value`` loads from one of ``buffers``."""
    import tvm

    from .tileops._common import collect

    if not buffers or not isinstance(value, tvm.ir.Expr):
        return False
    return any(load.source.same_as(b) for load in collect(value, tvm.ir.TensorLoad) for b in buffers)


def _bound_once(name: str, value: Any) -> Any:
    """``value`` bound to an immutable variable named ``name`` (a let: evaluated once, here; no
    local buffer, which kept target c's ``#pragma omp simd`` off a ``T.Parallel`` loop)."""
    from tvm import tirx
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script import builder

    var = tirx.Var(name, value.ty)
    IRBuilder.name(name, var)
    builder.Bind(value, var=var)
    return var


def bind_arguments(parser: Any, node: Any, parameters: Iterable[str], assigned: set) -> None:
    """Give each parameter in ``parameters`` that needs one (module docstring) a scalar of its
    own, holding its argument's value; ``node`` is the macro's definition (for errors). A load
    from a buffer that is passed too (``m(A, A[i])``, which the body may write before it reads the
    parameter) is evaluated at the call as well."""
    from tvm.tirx.script.parser import parser as tirx_parser

    table = parser.var_table
    current = table.get()
    values = [current.get(name) for name in parameters]
    passed = [v for v in values if tirx_parser.is_buffer_var(v)]
    for name, value in zip(parameters, values):
        if name in assigned:
            if _needs_own_scalar(value, True):
                own = tirx_parser.bind_assign_value(parser, node, name, value)  # x = value: a local scalar
                table.add(name, own, allow_shadowing=True)
        elif _needs_own_scalar(value, _reads_any(value, passed)):
            table.add(name, _bound_once(name, value), allow_shadowing=True)


# -- macros called where their statements cannot run as Python would run them ------------------

_CONTEXTS = "_tilelang_expression_contexts"


class expression_context:
    """``with expression_context(parser, what, consequence):`` marks the evaluation of an
    expression whose macro calls must not run statements: ``what`` names the place (``"the
    condition of a while loop"``), ``consequence`` says what would go wrong."""

    def __init__(self, parser: Any, what: str, consequence: str) -> None:
        self.parser, self.entry = parser, (what, consequence)

    def __enter__(self) -> None:
        stack = getattr(self.parser, _CONTEXTS, None)
        if stack is None:
            stack = []
            setattr(self.parser, _CONTEXTS, stack)
        stack.append(self.entry)

    def __exit__(self, *exc: Any) -> None:
        getattr(self.parser, _CONTEXTS).pop()


def check_statement_free(parser: Any, macro_name: str, call_site: str, first_statement: Callable[[], Any]) -> None:
    """Refuse a macro with statements called in an :class:`expression_context`;
    ``first_statement()`` gives ``(its first statement, "file:line")``, or ``(None, "")`` for a
    macro that is one expression (asked only inside such a context). TVMScript emitted the
    statements where the expression was evaluated: once before a ``while`` loop (its condition
    never changed: the kernel hung), and unconditionally for a branch of ``x if c else y`` or an
    operand of ``and``/``or`` (an atomic ran for every element). TileLang refuses such calls too."""
    stack = getattr(parser, _CONTEXTS, None)
    if not stack:
        return
    statement, where = first_statement()
    if statement is None:
        return
    from ..errors import KernelDefinitionError

    what, consequence = stack[-1]
    raise KernelDefinitionError(
        f"{call_site}: macro '{macro_name}' runs statements (its line {where}) and is called in {what}: {consequence}. "
        f"Call it in a statement of its own and use the variable it is assigned to"
    )


#: ``(what, consequence)`` of the places :class:`expression_context` marks.
WHILE_CONDITION = (
    "the condition of a while loop",
    "its statements would run once, before the loop, so the condition would never change and the kernel could "
    "hang (Python calls it at each test); compute the condition before the loop and again at the end of the "
    "loop's body (ok = m(...); while ok: ...; ok = m(...))",
)
CONDITIONAL_BRANCH = (
    "a branch of 'x if c else y' whose condition is known only when the kernel runs",
    "both branches are evaluated, so its statements would run whatever the condition (Python runs the branch "
    "taken only); use an if statement",
)
BOOLEAN_OPERAND = (
    "the right operand of 'and'/'or' after a value known only when the kernel runs",
    "its statements would run even where the left operand decides (Python would not call it); use nested if "
    "statements",
)


def _bool_operation(self: Any, node: Any) -> Any:
    """``a and b`` / ``a or b``: of a left operand known when the kernel is parsed (a Python bool,
    int, None, ...), Python's (``USE and m(x)`` with ``USE = 1`` is ``m(x)``; TVMScript
    short-circuited on bools only and evaluated ``m(x)`` after a 0); of a run-time one, TVMScript's
    operation, the right operands evaluated in :data:`BOOLEAN_OPERAND`'s context."""
    from tvm.script.parser.core import doc
    from tvm.script.parser.core.evaluator import _eval_op

    op = node.op
    if not isinstance(op, (doc.And, doc.Or)):
        raise TypeError(f"Unexpected operator: {op}")
    from .python_conditions import is_python_condition

    value = self._eval_expr(self._visit(node.values[0]))
    for rhs_node in node.values[1:]:
        if isinstance(value, bool) or is_python_condition(value):  # known when parsed: Python's and/or
            if (isinstance(op, doc.And) and not value) or (isinstance(op, doc.Or) and value):
                return value
            value = self._eval_expr(self._visit(rhs_node))
            continue
        with expression_context(self.parser, *BOOLEAN_OPERAND):
            rhs = self._eval_expr(self._visit(rhs_node))
        value = _eval_op(op, values=[value, rhs])
    return value


def install() -> None:
    """Mark the right operands of ``and``/``or`` (idempotent; the ``while`` condition and the
    branches of ``x if c else y`` are marked where they are evaluated)."""
    from tvm.script.parser.core.evaluator import ExprEvaluator

    ExprEvaluator._eval_bool_op = _bool_operation
