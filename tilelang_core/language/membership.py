"""``x in (1, 2)``, ``x not in values``, ``i in range(a, b)`` on a run-time value in a kernel.

TVMScript evaluated ``in`` with Python's own operator, which asks ``bool(x == item)`` of TVM's
lazy comparison, and TVM answers whether the two sides are the same object: ``A[i] in (1, 2)``
became ``False`` when the kernel was parsed, and its branch was dropped without a word (TileLang
drops it too). :func:`install` builds the test the kernel runs instead:

* over a tuple, list or set of values: ``x == a or x == b ...`` (``False`` for an empty one);
* over a ``range``: ``start <= x < stop`` and ``(x - start) % step == 0`` (negative steps alike);

``not in`` is its negation. Any other container is a ``TypeError`` saying what is supported.
A left side known when the kernel is parsed (a Python value) keeps Python's ``in``.
"""

from __future__ import annotations

from typing import Any

from .operand_checks import as_expression

__all__ = ["install"]

_INSTALLED = False


def _in_range(x: Any, r: range) -> Any:
    from tvm import tirx

    if len(r) == 0:
        return False
    if r.step > 0:
        inside = tirx.And(x >= r.start, x < r.stop)
        offset = x - r.start
    else:
        inside = tirx.And(x <= r.start, x > r.stop)
        offset = r.start - x
    step = abs(r.step)
    return inside if step == 1 else tirx.And(inside, tirx.floormod(offset, step) == 0)


def _membership(x: Any, container: Any) -> Any:
    """The kernel's test of ``x in container``."""
    from tvm import tirx

    if isinstance(container, range):
        return _in_range(x, container)
    if isinstance(container, (tuple, list, set, frozenset)):
        result: Any = False
        for item in container:
            test = as_expression(x == item)  # TVM's lazy EqualOp, as the comparison
            result = test if result is False else tirx.Or(result, test)
        return result
    raise TypeError(
        f"'in' of a run-time value tests it against a tuple, list or set of values or a range (x in (1, 2), "
        f"i in range(0, n, 2)), got {type(container).__name__}"
    )


def _not_contains(a: Any, b: Any) -> Any:
    from tvm import tirx

    result = _membership(a, b)
    return (not result) if isinstance(result, bool) else tirx.Not(result)


def install() -> None:
    """Register ``in`` / ``not in`` of a TIR expression with TVMScript's parser (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm import tirx
    from tvm.script.parser.core import dispatch, doc

    for operand_type in (tirx.Expr, tirx.IterVar):
        dispatch.register_op(operand_type, doc.In, 0)(_membership)
        dispatch.register_op(operand_type, doc.NotIn, 0)(_not_contains)
    _INSTALLED = True
