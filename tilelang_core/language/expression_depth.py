"""How deeply a kernel's expressions nest, and the refusal of one too deep for TVM.

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
:func:`check_operand_depth` does the same for a loop bound, a ``T.Kernel`` grid extent and what
``T.print`` prints (the frontend simplifies or prints them while parsing), and
:func:`check_function_depth` walks the whole parsed kernel for the rest (``if`` and ``while``
conditions, shapes, ``T.assume``), before anything prints or lowers it. An expression there over
about 6,000 levels deep can still crash TVM while the kernel is parsed (leaving a ``T.Kernel``
builds its statements).

The walk is iterative and visits each distinct node once (an expression that reuses a
sub-expression, ``x = x + x`` repeated, is a DAG, not a tree), and it stops as soon as the limit is
passed. An expression far deeper still (about 100,000 levels) crashes TVM while Python frees it,
before any kernel sees it; nothing here can prevent that.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

__all__ = ["MAX_EXPRESSION_DEPTH", "STATEMENT_LEVELS", "check_function_depth", "check_operand_depth", "check_store_depth", "nesting_depth"]

#: The deepest nesting of a stored expression accepted: a node nested inside another counts one
#: level (``a * 0.5 + b`` is 3 deep). A little under half of the shallowest depth measured to
#: overflow an 8 MiB stack (the main thread's and Python threads' default on Linux).
MAX_EXPRESSION_DEPTH = 1000

#: The levels :func:`check_function_depth` allows on top of that for the statements around an
#: expression (the kernel, its loops and branches, the tile operators' loops), which TVM's
#: passes recurse through as well: a stored expression just under the limit stays accepted.
STATEMENT_LEVELS = 256

#: Why an expression too deep is refused (every refusal says it).
_WHY = ("which TVM's passes cannot handle (they recurse once per level and would overflow the stack and crash "
        "the process)")

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


def _walk(root: Any, children: Callable[[Any], Iterator[Any]], limit: int) -> tuple[int, list]:
    """``(depth of root, [])``, or ``(limit + 1, the path from root down to where it went past
    limit)`` as soon as that is known. Iterative; each distinct node (by handle) is walked once."""
    known: dict[int, int] = {}  # a node's handle -> its depth
    path: list[list] = [[root, children(root), 1]]  # [node, its children not walked yet, deepest below]
    while path:
        top = path[-1]
        child = next(top[1], None)
        if child is None:
            path.pop()
            known[top[0].__chandle__()] = top[2]
            if path:
                path[-1][2] = max(path[-1][2], top[2] + 1)
            continue
        below = known.get(child.__chandle__())
        if below is not None:
            top[2] = max(top[2], below + 1)
            if len(path) + below > limit:
                return limit + 1, [entry[0] for entry in path] + [child]
            continue
        if len(path) + 1 > limit:
            return limit + 1, [entry[0] for entry in path] + [child]
        path.append([child, children(child), 1])
    return known[root.__chandle__()], []


def nesting_depth(expr: Any, limit: int = MAX_EXPRESSION_DEPTH) -> int:
    """How many levels ``expr`` nests (a leaf is 1), or ``limit + 1`` as soon as it is known to be
    deeper than ``limit``. Anything that is not a TVM expression (a number) is 0 deep."""
    from tvm import ir

    expr_type = ir.Expr
    if not isinstance(expr, expr_type):
        return 0
    return _walk(expr, lambda node: _children(node, expr_type), limit)[0]


_ALL_FIELDS: dict[type, tuple[str, ...]] = {}


def _object_children(node: Any) -> Iterator[Any]:
    """Every TVM object directly inside ``node``: its reflected fields but spans, with arrays and
    maps looked through (their elements are the children; a container is not a level)."""
    import tvm_ffi

    names = _ALL_FIELDS.get(type(node))
    if names is None:
        found: list[str] = []
        info = getattr(type(node), "__tvm_ffi_type_info__", None)
        while info is not None:
            found.extend(f.name for f in info.fields if f.name != "span" and f.name not in found)
            info = info.parent_type_info
        names = _ALL_FIELDS[type(node)] = tuple(found)
    pending = []
    for name in names:
        try:
            pending.append(getattr(node, name))
        except Exception:  # noqa: BLE001 - a field that cannot be read has nothing to walk
            continue
    while pending:
        value = pending.pop()
        if isinstance(value, (tvm_ffi.Array, tvm_ffi.List)):
            pending.extend(value)
        elif isinstance(value, (tvm_ffi.Map, tvm_ffi.Dict)):
            pending.extend(value.values())
        elif isinstance(value, tvm_ffi.Object) and not isinstance(value, str):
            yield value


_STATEMENT_WORDS = {
    "IfThenElse": "an if condition", "While": "a while condition", "For": "a loop", "AttrStmt": "a T.Kernel or "
    "scope (its extent)", "Evaluate": "a statement (T.evaluate, T.assume, T.print, a call)", "AssertStmt": "an assertion",
    "Bind": "a bound name", "LetStmt": "a bound name", "AllocBuffer": "a tile's shape", "DeclBuffer": "a buffer's shape",
}


def check_function_depth(func: Any, kernel_location: str) -> None:
    """Refuse a parsed kernel in which anything nests deeper than :data:`MAX_EXPRESSION_DEPTH`
    plus :data:`STATEMENT_LEVELS` levels, counted from the function (an expression in an ``if`` or
    ``while`` condition, a loop or grid extent, a shape, a call's arguments, with the statements
    around it): a ``LoweringError`` naming the line of the
    innermost statement around it when the kernel keeps spans, else the kernel's ``def`` line.
    Element stores are checked as they are parsed (:func:`check_store_depth`); this catches the
    rest before anything prints or lowers the kernel."""
    from tvm import tirx

    _, path = _walk(func, _object_children, MAX_EXPRESSION_DEPTH + STATEMENT_LEVELS)
    if not path:
        return
    where, what = kernel_location, "the kernel"
    for node in reversed(path):
        if isinstance(node, tirx.Stmt):
            what = _STATEMENT_WORDS.get(type(node).__name__, f"a {type(node).__name__} statement")
            span = getattr(node, "span", None)
            line = getattr(span, "line", 0) if span is not None else 0
            if line and line > 0:
                where = f"{span.source_name.name}:{line}"
            break
    from ..errors import LoweringError

    raise LoweringError(
        f"{where}: {what} holds an expression nested about {MAX_EXPRESSION_DEPTH} levels deep or more, {_WHY}; "
        f"compute parts of it into local names first (t = <part>; ... t ...) so that no single expression "
        f"nests that deep")


def check_operand_depth(op: str, name: str, value: Any) -> None:
    """Refuse an operand of ``op`` (a loop bound, a ``T.Kernel`` grid extent, what ``T.print``
    prints) nested deeper than :data:`MAX_EXPRESSION_DEPTH`, before the construct simplifies or
    prints it (both recurse in TVM): a ``LoweringError`` at the kernel's line naming ``name``."""
    if nesting_depth(value) > MAX_EXPRESSION_DEPTH:
        from ..errors import LoweringError
        from .tileops._common import location

        raise LoweringError(
            f"{location()}: {op}: {name} is an expression nested more than {MAX_EXPRESSION_DEPTH} levels deep, "
            f"{_WHY}; compute parts of it into local names first (t = <part>; ... t ...)")


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
                f"{MAX_EXPRESSION_DEPTH} levels deep, {_WHY}; bind parts of it to local names "
                f"(t = <part>; ... t ...) so that no single expression nests that deep")
