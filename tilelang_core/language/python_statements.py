"""``global``, ``nonlocal``, ``del``, ``try`` and ``raise`` in a kernel body.

TVMScript has no visitor for them and stopped with "Visitor of AST node is not implemented:
Global", marking the whole ``with T.Kernel`` body rather than the statement. TileLang accepts the
first three. :func:`install` registers visitors: ``global G`` and ``nonlocal n`` have nothing to
do (a kernel reads module and closure names anyway; an assignment in a kernel binds a kernel
variable), ``del name`` neither (the kernel is built when it is parsed, so nothing is freed); ``del
B[1]`` or ``del obj.attr`` is refused at its line (it was ignored: nothing can remove an element of
a tensor), and ``try`` is refused at its line: a kernel cannot catch an error while it runs. ``raise`` is
:mod:`.raise_statements`'s visitor. A ``def`` inside a kernel body is refused saying to define the
helper outside the kernel (TVMScript: "Function must be decorated"). ``with open(...)`` is refused
before the file is opened (it ran when the kernel was parsed: "No such file or directory", or "Do
not know how to bind type: <class '_io.TextIOWrapper'>"), and ``with X as x`` where ``X`` is any
Python context manager says that ``x`` is a Python object, not a kernel scope's variable.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]


def _nothing(self: Any, node: Any) -> None:
    """``global`` / ``nonlocal``: nothing to do in a kernel (module docstring)."""
    return None


def _delete(self: Any, node: Any) -> None:
    """``del name``: nothing to do (module docstring). ``del B[1]`` or ``del obj.attr`` is refused at
    its target: TVMScript's parser ignored it, so the kernel was built as if it were not there."""
    from tvm.script.parser.core import doc

    from .spans import source_text

    pending = list(node.targets)
    while pending:
        target = pending.pop(0)
        if isinstance(target, (doc.Tuple, doc.List)):
            pending[:0] = list(target.elts)
        elif not isinstance(target, doc.Name):
            what = source_text(self, target, "<target>")
            element = isinstance(target, doc.Subscript)
            self.report_error(target, f"del {what} is not supported in a kernel: "
                                      + ("a tensor's elements cannot be removed (its shape is fixed); store a value "
                                         f"instead ({what} = 0)" if element else
                                         "an attribute cannot be removed from a kernel value")
                                      + "; only 'del name' is accepted (it does nothing)")


def _refuse_try(self: Any, node: Any) -> None:
    self.report_error(node, "try/except is not supported in a kernel: nothing in a kernel raises while it runs "
                            "(a failed T.device_assert stops the call); handle errors around the kernel call")


_FILES = ("a kernel cannot read or write files: open() would run once, when the kernel is parsed, not when it "
          "runs; read the file before defining the kernel and pass what it holds as parameters or constants")


def _visit_with(previous: Any, self: Any, node: Any) -> Any:
    """``with`` in a kernel: ``with open(...)`` is refused before it opens anything (module docstring);
    every other ``with`` is TVMScript's."""
    import builtins
    import io

    from tvm.script.parser.core import doc

    from .python_calls import _resolve
    from .spans import source_text

    for item in node.items:
        call = item.context_expr
        found = _resolve(self, call.func) if isinstance(call, doc.Call) else None
        if found is not None and found[2] in (builtins.open, io.open):
            self.report_error(call, f"with {source_text(self, call)}: {_FILES}")
    return previous(self, node)


def _bind_with_value(original: Any) -> Any:
    """TVMScript's binding of a ``with ... as name`` value, with a value that is not a kernel
    variable (a Python object from a Python context manager) refused naming what it is: TVMScript
    said "Do not know how to bind type: <class '...'> in with statement"."""

    def bind_with_value(self: Any, node: Any, var_name: str, value: Any) -> Any:
        import tvm

        if not isinstance(value, (list, tuple, tvm.ir.Var)):
            kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
            self.report_error(node, f"with ... as {var_name}: the with statement gave a Python {kind}, not a kernel "
                                    "scope; in a kernel, with takes T.Kernel(...) and the other T. scopes, whose "
                                    "'as' names are their index variables. Python context managers run once, when "
                                    "the kernel is parsed: use them outside the kernel")
        return original(self, node, var_name, value)

    bind_with_value.__doc__ = original.__doc__
    bind_with_value._tilelang_checked = True  # type: ignore[attr-defined]
    return bind_with_value


def _inside_a_kernel() -> bool:
    """Whether the parser is inside a kernel's body now (a ``def`` there is a nested one)."""
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import frame

    return IRBuilder.is_in_scope() and any(isinstance(f, frame.PrimFuncFrame) for f in IRBuilder.current().frames)


_NESTED_DEF = "_tilelang_nested_def_refused"


def _refuse_nested_defs(parser_class: Any) -> None:
    """A ``def`` (or ``@T.macro``) inside a kernel body is refused saying where to put it: TVMScript
    said "Function must be decorated" or "The parser does not understand the decorator"."""
    original = parser_class.visit_FunctionDef
    if getattr(original, _NESTED_DEF, False):
        return

    def visit_function_def(self: Any, node: Any) -> Any:
        if _inside_a_kernel():
            self.report_error(node, f"def {node.name}(...) inside kernel code (a kernel body, or a T.macro used in "
                                    "one) is not supported: define the helper outside the code TileLang parses, at "
                                    "module level, or before the T.prim_func in the function that builds it (not in an "
                                    "eager @tilelang.jit function, whose body is the kernel); a @T.macro for kernel "
                                    "code, or a plain Python function of parse-time values. A lambda works here too")
        return original(self, node)

    visit_function_def.__doc__ = original.__doc__
    setattr(visit_function_def, _NESTED_DEF, True)
    parser_class.visit_FunctionDef = visit_function_def


def install() -> None:
    """Give TVMScript's parser visitors for these statements where it has none, and refuse a nested
    ``def``, ``with open(...)`` and a ``with ... as`` of a Python object clearly (idempotent)."""
    from tvm.script.parser.core.parser import Parser
    from tvm.tirx.script.parser import parser as tirx_parser

    from .tirx_visitors import wrap_visitor

    _refuse_nested_defs(Parser)
    wrap_visitor("With", _visit_with)
    if not getattr(tirx_parser.bind_with_value, "_tilelang_checked", False):
        tirx_parser.bind_with_value = _bind_with_value(tirx_parser.bind_with_value)  # looked up by name per with

    from .raise_statements import visit_raise

    for type_name, visit in (("Global", _nothing), ("Nonlocal", _nothing), ("Delete", _delete),
                             ("Try", _refuse_try), ("TryStar", _refuse_try), ("Raise", visit_raise)):
        if getattr(Parser, "visit_" + type_name, None) is None:
            setattr(Parser, "visit_" + type_name, visit)
