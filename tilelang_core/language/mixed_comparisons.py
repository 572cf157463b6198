"""Comparisons of expressions of two dtypes in kernels: ``i < m`` of an int32 ``i`` and an int16 ``m``.

TVMScript's parser builds a comparison in a kernel body (``==``, ``!=``, ``<``, ``<=``, ``>``,
``>=``) as the node itself, and TVM 0.27 refuses the node when its operands' dtypes differ:
``if bx * 64 + i < m:`` with an int16 scalar parameter ``m`` stopped the parse with "mismatched
types. int32 vs. int16", while ``bx * 64 + i + m`` was fine, because arithmetic goes through
TVM's operator functions, which first bring both operands to one dtype. :func:`install` makes the
six comparisons of two expressions of different dtypes go through the same functions
(``tvm.ir.prim._ffi_api._OpLT`` and the others), so they follow the rules of arithmetic: the
narrower integer is widened (``int16`` next to ``int32`` -> ``int32``), signed next to unsigned of
the same width is unsigned, as in C, and an integer next to a float, or a narrower float next to
a wider one, becomes the float. Comparisons with a Python number, and of two expressions of the
same dtype, keep TVMScript's handling. A comparison of an expression with ``None``
(``A[i] == None``, which TVMScript stopped with "'NoneType' object has no attribute 'expr_ty'")
is refused at its line, as the kernel wrote it.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["install"]

_INSTALLED = False

#: TVMScript's comparison node -> TVM's operator function that matches the operands' dtypes.
_OPERATORS = {"Eq": "_OpEQ", "NotEq": "_OpNE", "Lt": "_OpLT", "LtE": "_OpLE", "Gt": "_OpGT", "GtE": "_OpGE"}


def _element_dtype(value: Any) -> Any:
    """The element dtype of a TIR expression (``None`` for anything else, a Python number too)."""
    import tvm
    from tvm.ir import PrimType

    if not tvm.ir.is_prim_expr(value):
        return None
    ty = value.ty
    if not isinstance(ty, PrimType):
        return None
    return ty.dtype.with_lanes(1)


def _as_float(value: Any, dtype: Any, other: Any) -> Any:
    """``value`` (an expression of element dtype ``dtype``) ready to be compared with the Python
    number ``other``:

    * an integer expression compared with a Python float (``A[i] < 2.5``) is a float expression:
      TVMScript made the float a constant of the integer dtype and stopped ("FloatImm supports only
      float, but int32 was supplied"). 8- and 16-bit integers become float32, wider ones float64, so
      that every value converts exactly and the comparison is Python's;
    * a float expression compared with a number its dtype cannot hold: :func:`_past_range`.

    Anything else: unchanged."""
    if dtype is None or isinstance(other, bool) or not isinstance(other, (int, float)):
        return value
    if dtype.is_float:
        return _past_range(value, dtype, other)
    if isinstance(other, float) and str(dtype).startswith(("int", "uint")):
        from tvm import tirx

        return tirx.Cast("float32" if dtype.bits <= 16 else "float64", value)
    return value


def _as_float_number(value: Any, other_dtype: Any) -> Any:
    """A Python int compared with a float expression, as a Python float: TVMScript made a constant
    of the expression's dtype for ``float*`` dtypes only, so ``A_bf16[i] <= 7`` (bfloat16, float8)
    stopped with "'int' object has no attribute 'expr_ty'"."""
    if isinstance(value, int) and not isinstance(value, bool) and other_dtype is not None and other_dtype.is_float:
        return float(value)
    return value


def _past_range(value: Any, dtype: Any, other: Any) -> Any:
    """A float expression compared with a Python number its dtype cannot hold (``A_f16 < 70000.0``,
    ``F_f32 < 1e300``), as a wider float expression, so the comparison is exact: TVMScript made the
    number a constant of the expression's dtype and stopped with "Literal value 70000 exceeds
    maximum of float16". float32 when it holds the number exactly, else float64. Numbers within
    the range (and infinities, NaN) keep TVMScript's handling."""
    import math

    import tvm
    from tvm import tirx

    from .dtypes import nearest_float32

    number = float(other)
    if not math.isfinite(number) or dtype.bits >= 64:
        return value
    limit = float(tvm.tirx.max_value(str(dtype)).value)
    if abs(number) <= limit:
        return value
    wide = "float32" if nearest_float32(number) == number and dtype.bits <= 32 else "float64"
    if str(dtype) == wide:
        return value
    return tirx.Cast(str(tvm.DataType(wide).with_lanes(value.ty.dtype.lanes)), value)


#: TVM's operator function -> the comparison as Python writes it.
_SYMBOLS = {"_OpEQ": "==", "_OpNE": "!=", "_OpLT": "<", "_OpLE": "<=", "_OpGT": ">", "_OpGE": ">="}


def _refuse_none(value: Any, symbol: str) -> None:
    """Refuse ``value <symbol> None`` (``A[i] == None``) of a kernel expression ``value``: TVMScript
    stopped with "'NoneType' object has no attribute 'expr_ty'"."""
    from tvm.script.parser.core import doc

    from .operand_checks import _fail, _given
    from .spans import evaluated_text

    written = evaluated_text(doc.Compare) or f"{value} {symbol} None"
    _fail(written, f"a kernel value is never None ({_given(value)} is a number known when the kernel runs); "
                   "compare it with a number (x == 0) or test T.isnan(x), and test an optional Python value "
                   "with 'is None' / 'is not None'")


def _matching(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    from tvm.ir.prim import _ffi_api

    def compare(a: Any, b: Any) -> Any:
        if a is None or b is None:
            _refuse_none(a if b is None else b, _SYMBOLS[name])
        left, right = _element_dtype(a), _element_dtype(b)
        if (left is None) != (right is None):  # an expression and a Python value
            a, b = _as_float(a, left, b), _as_float(b, right, a)
            a, b = _as_float_number(a, _element_dtype(b)), _as_float_number(b, _element_dtype(a))
            left, right = _element_dtype(a), _element_dtype(b)
        if left is None or right is None or left == right:
            return original(a, b)
        return getattr(_ffi_api, name)(a, b, None)  # looked up per call: literals.py may wrap it

    compare.__doc__ = f"TVMScript's comparison, operands of two dtypes matched as by {name}."
    return compare


def install() -> None:
    """Make kernels' comparisons of expressions of two dtypes match the dtypes first (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm import tirx
    from tvm.script.parser.core import dispatch, doc

    for operand_type in (tirx.Expr, tirx.IterVar):
        for node, name in _OPERATORS.items():
            for index in (0, 1):
                original = dispatch.get_op(operand_type, getattr(doc, node), index)
                if original is not None:
                    dispatch.register_op(operand_type, getattr(doc, node), index)(_matching(name, original))
    _INSTALLED = True
