"""Chained assignment in kernels: ``A[i] = B[i] = C[i] = 1`` (TVMScript refuses ``a = b = c``).

Python evaluates the value once and stores it into each target, left to right. In a kernel the
value is a TIR expression without side effects, so storing it target by target is the same
*unless* it reads one of the targets (``A[i] = B[i] = B[i] + 1``): then a later store would see
an earlier one. :func:`install` teaches TVMScript's ``tirx`` parser the first case and keeps a
clear error for the second. Targets that are names (``a = b = 0``) keep TVMScript's error.
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import wrap_visitor

__all__ = ["install"]


def _reads(value: Any, buffers: list) -> bool:
    import tvm
    import tvm_ffi

    found = [False]

    def visit(load: Any) -> None:
        if any(load.source.same_as(b) for b in buffers):
            found[0] = True

    tvm_ffi.structural_walk(value, ((tvm.ir.TensorLoad,), visit), order="pre")
    return found[0]


def _visit_assign(original: Any, self: Any, node: Any) -> None:
    from tvm.script.parser.core import doc

    targets = list(node.targets)
    if len(targets) < 2 or not all(isinstance(t, doc.Subscript) for t in targets):
        return original(self, node)
    value = self.eval_expr(node.value)
    buffers = [self.eval_expr(t.value) for t in targets]
    if not isinstance(value, (bool, int, float)) and _reads(value, buffers):
        self.report_error(
            node,
            "a chained assignment whose value reads one of its targets is not supported here; "
            "assign the value to one target first, then copy it to the others",
        )
    for target in targets:
        single = doc.Assign(targets=[target], value=node.value, lineno=node.lineno, col_offset=node.col_offset,
                            end_lineno=node.end_lineno, end_col_offset=node.end_col_offset)
        original(self, single)
    return None


def install() -> None:
    """Register the chained-assignment form with TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("Assign", _visit_assign)
