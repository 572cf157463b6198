"""Kernel parameters typed in the body: ``def k(A, B):`` then ``A: T.Tensor[...]`` as statements.

TileLang accepts a kernel whose parameters carry no annotation in the signature when the first
statements of its body annotate them (``A: T.Tensor[[32, 32], T.float32]``, without a value);
TVMScript requires the annotation in the signature. :func:`install` teaches TVMScript's
``tirx`` parser this form: before parsing a function, each such leading bare annotation of an
unannotated parameter moves into the signature. Other statements end the leading block; a
parameter left without an annotation keeps TVMScript's error.
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import wrap_visitor

__all__ = ["install"]


def _move_body_annotations(node: Any, doc: Any) -> Any:
    """``node`` (a ``doc.FunctionDef``) with its leading parameter annotations in the signature,
    or ``node`` itself when there are none."""
    params = {a.arg: a for a in node.args.args if a.annotation is None}
    if not params:
        return node
    annotations: dict[str, Any] = {}
    rest = list(node.body)
    while rest:
        stmt = rest[0]
        if (isinstance(stmt, doc.AnnAssign) and stmt.value is None and isinstance(stmt.target, doc.Name)
                and stmt.target.id in params and stmt.target.id not in annotations):
            annotations[stmt.target.id] = stmt.annotation
            rest.pop(0)
            continue
        break
    if not annotations:
        return node
    args = [doc.arg(arg=a.arg, annotation=annotations.get(a.arg, a.annotation)) for a in node.args.args]
    old = node.args
    new_args = doc.arguments(args=args, vararg=old.vararg, kwonlyargs=old.kwonlyargs, kw_defaults=old.kw_defaults,
                             kwarg=old.kwarg, defaults=old.defaults, posonlyargs=old.posonlyargs)
    return doc.FunctionDef(name=node.name, args=new_args, body=rest or [doc.Pass()],
                           decorator_list=node.decorator_list, returns=node.returns,
                           type_params=getattr(node, "type_params", None), lineno=node.lineno,
                           col_offset=node.col_offset, end_lineno=node.end_lineno,
                           end_col_offset=node.end_col_offset)


def _without_annotation_text(supplied: Any) -> Any:
    """The annotations TVMScript falls back on when evaluating one fails, without those that are
    text (``from __future__ import annotations``): TVMScript took the text itself then and stopped
    with "Unexpected type for TIR Arg: ffi.String", hiding the evaluation's own error (a negative
    extent, a float shape); without it that error is the one reported, at the parameter."""
    if not isinstance(supplied, dict):
        return supplied
    return {name: {arg: value for arg, value in (values or {}).items() if not isinstance(value, str)}
            for name, values in supplied.items()}


def _visit_function_def(original: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    supplied = self.function_annotations
    self.function_annotations = _without_annotation_text(supplied)
    try:
        return original(self, _move_body_annotations(node, doc))
    finally:
        self.function_annotations = supplied


def install() -> None:
    """Register the body-annotation form with TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("FunctionDef", _visit_function_def)
