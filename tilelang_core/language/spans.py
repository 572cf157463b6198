"""Source spans on a kernel's IR: which line of the user's file each statement and buffer comes from.

TVM 0.27's TVMScript parser already stamps every statement it builds (and every buffer it
declares: parameters, ``T.alloc_*``, ``T.match_buffer``) with a :class:`tvm.ir.Span` of the
Python line that produced it. This module gives those spans TileLang's helper names
(``tilelang.ir``): read them, set them, turn one into ``(file, line)``, and count how much of
a kernel carries one. Spans never take part in structural equality or in the script printout.

``TILELANG_ENABLE_IR_SPAN=0`` in the environment makes :func:`~tilelang_core.language.core.prim_func`
drop the spans of the kernels it parses (:func:`strip_spans`), for IR that is the same whatever
file it came from.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

__all__ = [
    "ENABLE_ENV",
    "evaluated_text",
    "get_buffer_span",
    "get_stmt_span",
    "make_span",
    "node_location",
    "set_buffer_span",
    "set_stmt_span",
    "source_text",
    "span_coverage",
    "span_to_location",
    "spans_enabled",
    "strip_spans",
    "written_argument",
]

#: Environment variable: ``0`` (or ``false``/``off``/``no``) parses kernels without spans.
ENABLE_ENV = "TILELANG_ENABLE_IR_SPAN"


def spans_enabled() -> bool:
    """Whether kernels keep their spans (``TILELANG_ENABLE_IR_SPAN`` unset, empty or a yes).

    :raises SettingError: the variable is neither a yes nor a no (``maybe`` had meant yes).
    """
    from ..env_switches import switch_from_env

    return switch_from_env(ENABLE_ENV, "keep source locations in kernels", "leave them out (errors then name no "
                           "kernel line)", default=True)


def make_span(file: str, line: int, column: int = 1, end_line: Optional[int] = None, end_column: Optional[int] = None) -> Any:
    """A :class:`tvm.ir.Span` for ``file:line:column`` (one line unless ``end_line`` says otherwise)."""
    from tvm import ir

    if not isinstance(line, int) or line < 1:
        raise ValueError(f"make_span: line must be a positive int, got {line!r}")
    return ir.Span(ir.SourceName(str(file)), line, line if end_line is None else end_line, column, column if end_column is None else end_column)


def span_to_location(span: Any) -> Optional[tuple[str, int]]:
    """``(file, line)`` of a span, or ``None`` for no span.

    A statement that a ``T.macro`` produced carries a sequence of spans (the call, then the
    macro's line); its location is the innermost one, as in a Python traceback.
    """
    if span is None:
        return None
    inner = getattr(span, "spans", None)
    if inner is not None:
        return span_to_location(inner[-1]) if len(inner) else None
    source = getattr(span, "source_name", None)
    if source is None:
        return None
    return (str(source.name), int(span.line))


def node_location(node: Any, fallback: str) -> str:
    """``file:line`` of a statement's (or buffer's) span, else ``fallback``."""
    where = span_to_location(getattr(node, "span", None))
    return f"{where[0]}:{where[1]}" if where else fallback


def source_text(parser: Any, node: Any, fallback: str = "<expression>") -> str:
    """The text of the kernel expression ``node`` (a doc AST node) as the kernel spells it, on one
    line (as Python prints it when it spans several lines or its text cannot be found; ``fallback``
    when neither works). ``parser`` is the TVMScript parser that reads the kernel."""
    import ast

    source = getattr(getattr(parser, "diag", None), "source", None)
    text = None
    if source is not None and isinstance(getattr(source, "source", None), str):
        try:
            text = ast.get_source_segment(source.source, node)
        except Exception:  # noqa: BLE001 - positions that do not fit the text: printed instead
            text = None
    if not text:
        try:
            from tvm.script.parser.core import doc

            text = ast.unparse(doc.from_doc(node))
        except Exception:  # noqa: BLE001 - the text is only for the message
            text = fallback
    if "\n" in text:  # an expression over several lines: one line, without its comments
        try:
            text = ast.unparse(ast.parse(f"(\n{text}\n)", mode="eval"))
        except SyntaxError:
            text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return text


def _evaluations() -> Iterator[tuple[Any, Any, Any]]:
    """``(evaluator, node, fields)`` of each expression TVMScript's evaluator is evaluating now,
    innermost first: ``node`` is the doc AST node as the kernel wrote it, ``fields`` its evaluated
    operands (names of the evaluator's ``value_table``)."""
    import sys

    frame = sys._getframe(1)
    try:
        while frame is not None:
            names = frame.f_locals
            node, fields, evaluator = names.get("node"), names.get("fields"), names.get("self")
            if isinstance(fields, dict) and isinstance(getattr(evaluator, "value_table", None), dict):
                yield evaluator, node, fields
            frame = frame.f_back
    finally:
        del frame


def written_argument(value: Any) -> Optional[str]:
    """The kernel's text of ``value`` when it is an argument of the call being parsed (``T.atomic_load(A[i])
    * 2.0`` where TVM would print the expression it became), else ``None``.

    The call is the innermost one that TVMScript's expression evaluator is evaluating; an argument
    is matched by identity with the value it evaluated to, so a value the operator computed itself,
    or one passed on by a Python helper, is not mistaken for what the kernel wrote. An argument that
    is a plain name gives ``None`` too: the value it stands for says more than the name.
    """
    from tvm.script.parser.core import doc

    for evaluator, node, fields in _evaluations():
        if not isinstance(node, doc.Call):
            continue
        table = evaluator.value_table
        written = list(node.args) + [k.value for k in node.keywords]
        evaluated = list(fields.get("args") or ()) + [k.value for k in fields.get("keywords") or ()]
        for source_node, name in zip(written, evaluated):
            if isinstance(source_node, doc.Name):  # a name: its value says more (describe())
                continue
            if isinstance(name, doc.Name) and table.get(name.id, None) is value:
                return source_text(getattr(evaluator, "parser", None), source_node)
        return None
    return None


def evaluated_text(kind: Any) -> Optional[str]:
    """The kernel's text of the innermost expression of doc AST type ``kind`` (``doc.Compare``)
    that TVMScript's evaluator is evaluating now, else ``None``."""
    for evaluator, node, _fields in _evaluations():
        if isinstance(node, kind):
            return source_text(getattr(evaluator, "parser", None), node)
    return None


def _span_property(node: Any) -> Any:
    for klass in type(node).__mro__:
        prop = klass.__dict__.get("span")
        if prop is not None:
            return prop
    raise TypeError(f"{type(node).__name__} carries no span")


def get_stmt_span(stmt: Any) -> Any:
    """The span of a statement (``None`` when it has none)."""
    return getattr(stmt, "span", None)


def set_stmt_span(stmt: Any, span: Any) -> None:
    """Set a statement's span in place (``None`` removes it)."""
    _span_property(stmt).set(stmt, span)


def get_buffer_span(buffer: Any) -> Any:
    """The span of a buffer: where it was declared (parameter, ``T.alloc_*``, ``T.match_buffer``)."""
    return getattr(buffer, "span", None)


def set_buffer_span(buffer: Any, span: Any) -> None:
    """Set a buffer's span in place (``None`` removes it)."""
    _span_property(buffer).set(buffer, span)


def _walk(func: Any) -> tuple[list[Any], list[Any]]:
    """The statements of ``func``'s body and every buffer it declares (parameters first), once each."""
    import tvm_ffi
    from tvm import tirx
    from tvm.tirx.buffer import is_buffer_var

    stmts: list[Any] = []
    buffers: list[Any] = []
    seen: set[int] = set()

    def add_buffer(buf: Any) -> None:
        if buf is not None and id(buf) not in seen:
            seen.add(id(buf))
            buffers.append(buf)

    for param in func.params:
        if is_buffer_var(param):
            add_buffer(param)

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Stmt):
            stmts.append(node)
            for field in ("buffer",):
                buf = getattr(node, field, None) if isinstance(node, (tirx.AllocBuffer, tirx.DeclBuffer)) else None
                add_buffer(buf)

    tvm_ffi.structural_walk(func.body, ((tirx.Stmt,), visit), order="pre")
    return stmts, buffers


def span_coverage(func: Any) -> dict[str, list[int]]:
    """How much of a kernel carries a span: ``{"stmts": [with, total], "buffers": [with, total]}``.

    Statements are every statement of the body; buffers are the tensor parameters and the
    buffers the body allocates or declares.
    """
    stmts, buffers = _walk(func)
    return {
        "stmts": [sum(1 for s in stmts if get_stmt_span(s) is not None), len(stmts)],
        "buffers": [sum(1 for b in buffers if get_buffer_span(b) is not None), len(buffers)],
    }


def strip_spans(func: Any) -> Any:
    """Remove the spans of ``func``'s statements and buffers in place; returns ``func``."""
    stmts, buffers = _walk(func)
    for stmt in stmts:
        if get_stmt_span(stmt) is not None:
            set_stmt_span(stmt, None)
    for buf in buffers:
        if get_buffer_span(buf) is not None:
            set_buffer_span(buf, None)
    return func
