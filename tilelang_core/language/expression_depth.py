"""How deeply a kernel's stored expression nests, and the refusal of one too deep for TVM.

TVM's printer, its checks (the ``PrimFunc`` constructor's purity check) and its lowering passes
visit an expression recursively, a few C++ frames per level, on the calling thread's stack. An
expression built in Python without bound (``functools.reduce(lambda acc, c: acc * x + c, ...)``
over a few thousand terms) overflowed an 8 MiB stack: the process died with a segmentation
fault (measured with ``acc * 0.5 + a``: between 1,800 and 2,400 levels when lowering for
``llvm``, between 2,400 and 3,000 for ``c``, and under 40,000 already while parsing).
:func:`check_store_depth` refuses an element store (``B[i] = value``, ``v = value``) whose
value or index nests deeper than :data:`MAX_EXPRESSION_DEPTH` as a
:class:`~tilelang_core.errors.LoweringError` at the kernel's line, before TVM sees it; binding
parts to local names (``t = ...``) keeps each expression shallow and computes the same value.
Other places an expression can go (an ``if`` condition, a loop extent) are not checked: the
stores are where values are computed.

The walk is iterative and visits each distinct node once (an expression that reuses a
sub-expression, ``x = x + x`` repeated, is a DAG, not a tree), and it stops as soon as the limit is
passed. An expression far deeper still (about 100,000 levels) crashes TVM while Python frees it,
before any kernel sees it; nothing here can prevent that.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

__all__ = ["MAX_EXPRESSION_DEPTH", "check_store_depth", "nesting_depth"]

#: The deepest nesting of a stored expression accepted: a node nested inside another counts one
#: level (``a * 0.5 + b`` is 3 deep). A little under half of the shallowest depth measured to
#: overflow an 8 MiB stack (the main thread's and Python threads' default on Linux).
MAX_EXPRESSION_DEPTH = 1000

_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _expression_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(fields holding an expression, fields holding an array of them)`` of a TVM node class,
    its ancestors' included, read once per class from TVM's reflected field types."""
    fields = _FIELDS.get(cls)
    if fields is None:
        single: list[str] = []
        arrays: list[str] = []
        info = getattr(cls, "__tvm_ffi_type_info__", None)
        while info is not None:
            for field in info.fields:
                schema = json.loads(field.metadata.get("type_schema") or "{}")
                if _is_expr_type(schema):
                    single.append(field.name)
                elif schema.get("type") == "ffi.Array" and any(_is_expr_type(arg) for arg in schema.get("args", ())):
                    arrays.append(field.name)
            info = info.parent_type_info
        fields = _FIELDS[cls] = (tuple(single), tuple(arrays))
    return fields


def _is_expr_type(schema: dict) -> bool:
    return str(schema.get("type", "")).endswith("Expr")


def _children(node: Any, expr_type: type) -> Iterator[Any]:
    """The expressions directly inside ``node``: fields that are expressions, or arrays of them
    (a call's arguments, a load's indices)."""
    single, arrays = _expression_fields(type(node))
    for name in single:
        value = getattr(node, name, None)
        if isinstance(value, expr_type):
            yield value
    for name in arrays:
        for item in getattr(node, name, None) or ():
            if isinstance(item, expr_type):
                yield item


def nesting_depth(expr: Any, limit: int = MAX_EXPRESSION_DEPTH) -> int:
    """How many levels ``expr`` nests (a leaf is 1), or ``limit + 1`` as soon as it is known to be
    deeper than ``limit``. Anything that is not a TVM expression (a number) is 0 deep."""
    from tvm import ir

    expr_type = ir.Expr
    if not isinstance(expr, expr_type):
        return 0
    known: dict[int, int] = {}  # a node's handle -> its depth (each distinct node is walked once)
    path: list[tuple[Any, Iterator[Any], int]] = [(expr, _children(expr, expr_type), 1)]
    while path:
        node, children, deepest_below = path[-1]
        child = next(children, None)
        if child is None:
            path.pop()
            known[hash(node)] = deepest_below
            if path:
                parent, parent_children, parent_deepest = path[-1]
                path[-1] = (parent, parent_children, max(parent_deepest, deepest_below + 1))
            continue
        below = known.get(hash(child))
        if below is not None:
            path[-1] = (node, children, max(deepest_below, below + 1))
            if len(path) + below > limit:
                return limit + 1
            continue
        if len(path) + 1 > limit:
            return limit + 1
        path.append((child, _children(child, expr_type), 1))
    return known[hash(expr)]


def check_store_depth(buffer_name: str, value: Any, indices: Any) -> None:
    """Refuse the store ``buffer_name[indices] = value`` when ``value`` or one of ``indices``
    nests deeper than :data:`MAX_EXPRESSION_DEPTH` (a ``LoweringError`` at the kernel's line).
    The message never prints the expression: printing it is what would crash."""
    parts = [("value", value)] + [("index", index) for index in (indices if isinstance(indices, (list, tuple)) else [indices])]
    for what, expr in parts:
        if nesting_depth(expr) > MAX_EXPRESSION_DEPTH:
            from ..errors import LoweringError
            from .tileops._common import location

            raise LoweringError(
                f"{location()}: {buffer_name}[...] = ...: the stored {what} is an expression nested more than "
                f"{MAX_EXPRESSION_DEPTH} levels deep, which TVM's passes cannot handle (they recurse once per "
                f"level and would overflow the stack and crash the process); bind parts of it to local names "
                f"(t = <part>; ... t ...) so that no single expression nests that deep")
