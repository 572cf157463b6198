"""``global``, ``nonlocal``, ``del``, ``try`` and ``raise`` in a kernel body.

TVMScript has no visitor for them and stopped with "Visitor of AST node is not implemented:
Global", marking the whole ``with T.Kernel`` body rather than the statement. TileLang accepts the
first three. :func:`install` registers visitors: ``global G`` and ``nonlocal n`` have nothing to
do (a kernel reads module and closure names anyway; an assignment in a kernel binds a kernel
variable), ``del name`` neither (the kernel is built when it is parsed, so nothing is freed), and
``try`` is refused at its line: a kernel cannot catch an error while it runs. ``raise`` is
:mod:`.raise_statements`'s visitor.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]


def _nothing(self: Any, node: Any) -> None:
    """``global`` / ``nonlocal`` / ``del``: nothing to do in a kernel (module docstring)."""
    return None


def _refuse_try(self: Any, node: Any) -> None:
    self.report_error(node, "try/except is not supported in a kernel: nothing in a kernel raises while it runs "
                            "(a failed T.device_assert stops the call); handle errors around the kernel call")


def install() -> None:
    """Give TVMScript's parser visitors for these statements where it has none (idempotent)."""
    from tvm.script.parser.core.parser import Parser

    from .raise_statements import visit_raise

    for type_name, visit in (("Global", _nothing), ("Nonlocal", _nothing), ("Delete", _nothing),
                             ("Try", _refuse_try), ("TryStar", _refuse_try), ("Raise", visit_raise)):
        if getattr(Parser, "visit_" + type_name, None) is None:
            setattr(Parser, "visit_" + type_name, visit)
