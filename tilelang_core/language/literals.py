"""Python number literals next to TIR expressions, kept at their full value.

**Integers in bitwise and shift operators.** TVM 0.27 hands a Python int given to ``&``, ``|``,
``^``, ``<<`` and ``>>`` (and to ``T.bitwise_and`` / ``T.bitwise_or`` / ``T.bitwise_xor`` /
``T.shift_left`` / ``T.shift_right``) to C++ as a 32-bit ``int``. A literal that needs more bits
is cut without a word: ``x & 0x7FFFFFFFFFFFFFFF`` on an int64 ``x`` compiles to ``x & -1``,
``x ^ 0x100000000`` to ``x ^ 0``, and a uint32 operand with a literal of 2**31 or more fails with
"cannot make uint from negative value". Upstream TileLang's TVM converts the literal to the
other operand's dtype first; :func:`install` makes these five operators do the same here:

* a Python int (or bool) next to an integer or bool expression becomes a constant of that
  expression's (element) dtype;
* a literal the dtype cannot hold is refused with a :class:`~tilelang_core.errors.LoweringError`
  (also a ``ValueError``, as upstream raises) that names the operator, the literal, the operand
  and its range. A negative literal next to an unsigned operand means its two's complement
  (``u & -1`` is ``u & 0xFFFFFFFF`` for a uint32 ``u``), as in C.

**Shift amounts outside the width.** A constant amount of ``<<``/``>>`` outside ``0 .. width - 1``
(``x << 40`` of an int32 ``x``) stopped the definition with TVM's internal "Shift amount must be
non-negative and less than 32"; :func:`constant_shift` folds it to the value a run-time amount
gets (:mod:`tilelang_core.lowering.shift_amounts`: 0, or ``x >> (width - 1)`` for a signed ``>>``).
A constant ``<<`` of two constants into the sign bit (``T.int32(1) << 31``) stopped it too ("Literal
value 2147483648 exceeds range of int32"); :func:`folded_left_shift` folds it, wrapping around.

**Floats next to float64 expressions.** (And a Python int past int64 next to a float expression,
``x * 2**63``, which TVM refused with its FFI signature, is taken as a float.) TVM 0.27 checks a Python float given to ``+ - * /``,
comparisons, ``T.max``/``T.min``, ``T.if_then_else`` against float32's range before it promotes it to the
other operand's float64: ``X[i] * 1e300`` or ``T.max(x, -1e300)`` on float64 failed with
"Literal value 1e+300 exceeds maximum of float32". Such a literal becomes a float64 constant.
(Next to 16/32-bit floats TVM's own handling stays: the literal is a float32 constant.)

**Minus of unsigned values.** TVM writes ``-x`` as ``x * -1``, which refused every unsigned ``x``,
and on the LLVM path ``0 - x`` of an unsigned ``x`` computed 0: TVM's LLVM code generator marks
unsigned subtraction as never wrapping (LLVM's ``nuw``). Both are the two's complement here,
written ``(x ^ max) + 1``. (The LLVM path now wraps unsigned ``+ - *`` around anyway,
:mod:`tilelang_core.lowering.wrapping_unsigned`.)

**Float products, quotients and sums with a zero.** TVM folds ``x * 0.0``, ``0.0 * x`` and
``0.0 / x`` to ``0.0`` when it builds them, for float ``x`` too, where IEEE gives NaN for an
infinite or NaN ``x`` (and for ``0 / 0``); a call in ``x`` went with it (``T.atomic_add(...,
return_prev=True) * 0.0`` lost the update). It folds ``x + 0.0``, ``0.0 + x`` and ``x - (-0.0)``
to ``x``, where IEEE gives +0.0 for ``x = -0.0`` (``x + (-0.0)`` and ``x - 0.0`` are ``x`` in IEEE
too, and stay folded). Such an operation is built as the node itself, in the dtype of TVM's
result, and :mod:`tilelang_core.lowering.float_identities` keeps the simplifier from folding it
later. (Integer folds are TVM's, except where they would drop a call with a side effect:
:mod:`tilelang_core.language.kept_effects`.)

Everything else (two expressions, mixed int and float) goes to TVM unchanged. The operators are
TVM's functions in ``tvm.ir.prim._ffi_api``, which both the Python operators of expressions and
``tvm.tirx``'s functions call; :func:`install` wraps them there (once). See
docs/compatibility.md ("Where TVM 0.27 is mended").
"""

from __future__ import annotations

import math
from typing import Any, Callable

import tvm
from tvm import tirx
from tvm.ir.prim import _ffi_api as _prim_ffi_api

from ..errors import LoweringError
from .dtypes import past_int64

__all__ = ["install", "literal_operands", "float64_operands", "zero_value"]

#: TVM's function name -> the operator as a kernel author writes it.
OPERATORS = {
    "bitwise_and": "&",
    "bitwise_or": "|",
    "bitwise_xor": "^",
    "left_shift": "<<",
    "right_shift": ">>",
}

#: TVM's binary arithmetic, comparison and min/max functions, for the float64 rule.
FLOAT_OPERATORS = (
    "_OpAdd", "_OpSub", "_OpMul", "_OpDiv", "_OpMod", "_OpFloorDiv", "_OpFloorMod", "_OpTruncDiv",
    "_OpTruncMod", "_OpMin", "_OpMax", "_OpEQ", "_OpNE", "_OpLT", "_OpLE", "_OpGT", "_OpGE",
)

_WRAPPED_MARK = "_tilelang_full_width_literals"


def _element_dtype(expr: Any) -> Any:
    """The element dtype of a TIR expression (``int32`` for ``int32x4``); None for anything else."""
    if isinstance(expr, (bool, int, float)) or not tvm.ir.is_prim_expr(expr):
        return None
    dtype = getattr(getattr(expr, "ty", None), "dtype", None)
    if dtype is None:
        return None
    return dtype.with_lanes(1) if dtype.lanes != 1 else dtype


def _integer_dtype(expr: Any) -> Any:
    """The element dtype of an integer, unsigned or bool expression, else None."""
    dtype = _element_dtype(expr)
    return dtype if dtype is not None and (dtype.is_integer or dtype.is_bool) else None


def _value_range(dtype: Any) -> tuple[int, int]:
    """The literals accepted next to ``dtype``: ``(lowest, highest)``."""
    bits = dtype.bits
    if dtype.is_bool:
        return 0, 1
    if str(dtype).startswith("uint"):
        return -(1 << (bits - 1)), (1 << bits) - 1  # negatives: their two's complement
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _constant(name: str, value: int, other: Any, dtype: Any, literal_on_left: bool) -> Any:
    lowest, highest = _value_range(dtype)
    if not lowest <= value <= highest:
        from .core import _caller_location

        where = _caller_location()
        op = OPERATORS[name]
        shown = f"{value} {op} {other}" if literal_on_left else f"{other} {op} {value}"
        if dtype.is_bool:
            holds = "0 or 1"
        elif str(dtype).startswith("uint"):
            holds = f"{lowest}..{highest}, a negative one standing for its two's complement"
        else:
            holds = f"{lowest}..{highest}"
        raise LoweringError(
            f"{where + ': ' if where else ''}{shown}: the literal {value} does not fit the {dtype} operand "
            f"'{other}' (literals next to {dtype} are {holds}); cast the operand to a wider dtype "
            f"(T.Cast(\"int64\", ...)) or give the literal a dtype that holds it (T.int64({value}), T.uint64(...))"
        )
    if str(dtype).startswith("uint") and value < 0:
        value += 1 << dtype.bits
    return tirx.IntImm(str(dtype), value)


def literal_operands(name: str, a: Any, b: Any) -> tuple[Any, Any]:
    """``(a, b)`` with a Python int operand turned into a constant of the other operand's dtype.

    ``name`` is TVM's function name (a key of :data:`OPERATORS`).

    :raises LoweringError: the literal does not fit that dtype.
    """
    a_is_int = isinstance(a, int)
    b_is_int = isinstance(b, int)
    if a_is_int and not b_is_int:
        dtype = _integer_dtype(b)
        if dtype is not None:
            a = _constant(name, int(a), b, dtype, literal_on_left=True)
    elif b_is_int and not a_is_int:
        dtype = _integer_dtype(a)
        if dtype is not None:
            b = _constant(name, int(b), a, dtype, literal_on_left=False)
    return a, b


def float64_operands(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a, b)`` with a Python float next to a float64 expression turned into a float64 constant,
    and a Python int past int64 next to a float expression turned into a float (``x * 2**63``, as
    Python and torch compute it)."""
    if past_int64(a) and _float_dtype(b):
        a = float(a)
    if past_int64(b) and _float_dtype(a):
        b = float(b)
    if isinstance(a, float) and _is_float64(b):
        return tirx.FloatImm("float64", a), b
    if isinstance(b, float) and _is_float64(a):
        return a, tirx.FloatImm("float64", b)
    return a, b


def half_pair_operands(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a, b)`` with a bfloat16 expression next to a float16 one both widened to float32, as
    torch promotes them (neither holds the other: float16 lacks bfloat16's range, bfloat16
    float16's precision); TVM 0.27 cast the bfloat16 operand to float16 (lanes kept)."""
    if sorted(str(_element_dtype(x)) for x in (a, b)) == ["bfloat16", "float16"]:
        return tuple(tirx.Cast(str(tvm.DataType("float32").with_lanes(x.ty.dtype.lanes)), x) for x in (a, b))
    return a, b


def _float_dtype(expr: Any) -> bool:
    dtype = _element_dtype(expr)
    return dtype is not None and dtype.is_float


def _is_float64(expr: Any) -> bool:
    dtype = _element_dtype(expr)
    return dtype is not None and dtype.is_float and dtype.bits == 64


def _full_width(name: str, args: tuple) -> tuple:
    """Bitwise and shift operators: ``(a, b, span)`` with an int literal at its full value."""
    return (*literal_operands(name, *signed_constants_as_unsigned(args[0], args[1])), *args[2:])


def _as_unsigned(constant: Any, other: Any) -> Any:
    """``constant`` as a constant of ``other``'s unsigned dtype when it is a negative signed
    integer constant that arithmetic converts to that dtype (``other`` unsigned and at least as
    wide: ``T.int32(-1)`` next to a uint32 is 4294967295), else ``constant`` unchanged."""
    if not isinstance(constant, tirx.IntImm) or int(constant.value) >= 0:
        return constant
    dtype, wide = constant.ty.dtype, _integer_dtype(other)
    if wide is None or not str(wide).startswith("uint") or not str(dtype).startswith("int") or wide.bits < dtype.bits:
        return constant
    return tirx.IntImm(str(wide), int(constant.value) + (1 << wide.bits))


def signed_constants_as_unsigned(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a, b)`` with a negative signed integer constant next to an unsigned operand at least as
    wide written as its two's complement in that dtype, the value a run-time operand converts to
    (C's rule). TVM 0.27 stopped ``T.int32(-1) + T.uint32(1)`` and ``T.int8(-1) < T.uint8(1)``
    with its internal "Check failed: (value >= 0) is false: cannot make uint from negative
    value -1" when it converted the constant."""
    return _as_unsigned(a, b), _as_unsigned(b, a)


def narrow_left_shift_error(dtype: Any, operand: Any, amount: Any, widened_to: Any = None) -> LoweringError:
    """The refusal of a left shift of an 8- or 16-bit integer whose dropped bits C would keep.

    TIR types ``x << n`` of a uint16 ``x`` as uint16: the bits shifted past 16 are gone (by 20:
    the result is 0). C and CUDA first widen a narrow operand to ``int``, so upstream TileLang's
    C and CUDA kernels keep them, and code such as DeepSeek's e5m6 packing
    (``T.cast(h << 20, T.uint32) | T.cast(h << 8, T.uint32)`` of uint16 ``h``) depends on it: it
    gave other bits here, without an error. Such a shift is refused, saying how to write either
    meaning."""
    from .core import _caller_location

    where = _caller_location()
    amount = amount.value if isinstance(amount, tirx.IntImm) else amount
    wide = str(widened_to) if widened_to is not None else "int32"
    shown = f"T.cast({operand} << {amount}, {wide!r})" if widened_to is not None else f"{operand} << {amount}"
    meant = (f"T.cast({operand} << {amount}, \"{dtype}\") if dropping the bits is meant" if widened_to is not None
             else "0 if a result of 0 is meant")
    return LoweringError(
        f"{where + ': ' if where else ''}{shown}: the shift is done in {dtype}, so the bits shifted past "
        f"{dtype.bits} are dropped{' before the cast widens it' if widened_to is not None else ' (the result is 0)'}; "
        f"C and CUDA widen a {dtype} operand to int first and keep them (as upstream TileLang's C and CUDA kernels "
        f"do). Write T.cast({operand}, {wide!r}) << {amount} to shift in {wide}, or {meant}")


def narrow_left_shift_dtype(value: Any) -> Any:
    """The dtype of ``x`` when ``value`` is ``x << n`` of a scalar 8- or 16-bit integer ``x`` (see
    :func:`narrow_left_shift_error`), else None."""
    dtype = _integer_dtype(value) if isinstance(value, tirx.LShift) else None
    return dtype if dtype is not None and not dtype.is_bool and dtype.lanes == 1 and dtype.bits < 32 else None


def constant_shift(name: str, a: Any, b: Any) -> Any:
    """``a << b`` / ``a >> b`` (``name``: ``left_shift`` / ``right_shift``) of a scalar integer ``a``
    by a constant ``b`` outside ``0 .. width - 1``, as a shift by a run-time amount computes it
    (lowering/shift_amounts.py: 0, or ``a >> (width - 1)`` for a signed right shift); None for any
    other operands. TVM refused such a constant with its internal "Shift amount must be
    non-negative and less than 32" check failure."""
    dtype = _integer_dtype(a)
    if dtype is None or dtype.is_bool or dtype.lanes != 1 or not isinstance(b, tirx.IntImm) or isinstance(a, int):
        return None
    amount = int(b.value)
    if str(b.ty.dtype).startswith("uint"):
        amount &= (1 << b.ty.dtype.bits) - 1
    if 0 <= amount < dtype.bits:
        return None
    if name == "left_shift" and dtype.bits < 32 and amount < 32:  # C keeps these bits (int promotion)
        raise narrow_left_shift_error(dtype, a, amount)
    if name == "right_shift" and not str(dtype).startswith("uint"):
        return _prim_ffi_api.right_shift(a, tirx.IntImm(str(b.ty.dtype), dtype.bits - 1), None)
    from .kept_effects import has_side_effect

    zero = tirx.IntImm(str(dtype), 0)
    return tirx.Mul(a, zero) if has_side_effect(a) else zero


def folded_left_shift(name: str, a: Any, b: Any) -> Any:
    """``a << b`` of two integer constants of one dtype, wrapped around in it (a left shift into or
    past the sign bit wraps, as in torch: ``T.int32(1) << 31`` is ``-2**31``); None for any other
    operands. TVM folded it without wrapping and stopped the definition with "Literal value
    2147483648 exceeds range of int32"."""
    if name != "left_shift" or not (isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm)):
        return None
    dtype = _integer_dtype(a)
    if dtype is None or dtype.is_bool or dtype.lanes != 1 or str(a.ty.dtype) != str(b.ty.dtype):
        return None
    amount, bits = int(b.value), dtype.bits
    if not 0 <= amount < bits:
        return None
    value = (int(a.value) << amount) % 2**bits
    if not str(dtype).startswith("uint") and value >= 2 ** (bits - 1):
        value -= 2**bits
    return tirx.IntImm(str(dtype), value)


def _wrap_shift(name: str, ffi_function: Callable[..., Any]) -> Callable[..., Any]:
    """A shift operator: literals at their full value, a constant amount outside the width defined."""
    wrapped = _wrap(name, ffi_function, _full_width)

    def operator(*args: Any) -> Any:
        a, b, *rest = _full_width(name, args)
        defined = constant_shift(name, a, b)
        if defined is None:
            defined = folded_left_shift(name, a, b)
        return defined if defined is not None else ffi_function(a, b, *rest)

    operator.__name__ = name
    operator.__doc__ = wrapped.__doc__ + "; a constant amount outside the width is defined (constant_shift)"
    setattr(operator, _WRAPPED_MARK, ffi_function)
    return operator


def _float64_pair(name: str, args: tuple) -> tuple:
    """Binary operators: ``(a, b, [span])`` with a float literal next to float64 kept in float64,
    bfloat16 next to float16 in float32, a negative signed constant next to an unsigned operand
    as its two's complement."""
    return (*half_pair_operands(*float64_operands(*signed_constants_as_unsigned(args[0], args[1]))), *args[2:])


def _float64_branches(name: str, args: tuple) -> tuple:
    """``if_then_else``: ``(cond, t, f, [span])`` with a float branch next to a float64 one kept in
    float64, bfloat16 next to float16 in float32."""
    return (args[0], *half_pair_operands(*float64_operands(args[1], args[2])), *args[3:])


def _wrap(name: str, ffi_function: Callable[..., Any], convert: Callable[[str, tuple], tuple]) -> Callable[..., Any]:
    """``ffi_function`` with its arguments passed through ``convert`` first."""

    def operator(*args: Any) -> Any:
        return ffi_function(*convert(name, args))

    operator.__name__ = name
    operator.__doc__ = f"TVM's {name}; {convert.__doc__} (tilelang_core.language.literals)"
    setattr(operator, _WRAPPED_MARK, ffi_function)
    return operator


def _float_expression(value: Any) -> bool:
    """Whether ``value`` is a float TIR expression that is not a constant."""
    dtype = _element_dtype(value)
    if dtype is None:
        return False
    scalar = value.value if isinstance(value, tirx.Broadcast) else value
    return not isinstance(scalar, (tirx.FloatImm, tirx.IntImm)) and str(dtype).startswith(("float", "bfloat"))


def zero_value(value: Any) -> Any:
    """The float value of a zero operand (a Python number, an ``IntImm`` or ``FloatImm``, or a
    broadcast of one: ``0.0``, ``-0.0``, ``T.float32(0)``), else None."""
    if isinstance(value, tirx.Broadcast):
        value = value.value
    if isinstance(value, (tirx.FloatImm, tirx.IntImm)):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == 0 else None


#: TVM's function -> the node it builds, for the folds with a float zero that IEEE does not allow.
_ZERO_NODES = {"_OpMul": tirx.Mul, "_OpDiv": tirx.Div, "_OpAdd": tirx.Add, "_OpSub": tirx.Sub}


def _positive(zero: float) -> bool:
    return math.copysign(1.0, zero) > 0


def _wrong_fold(name: str, a: Any, b: Any) -> Any:
    """``(the float expression, the zero)`` where TVM folds ``a <op> b`` and IEEE disagrees, else None:
    ``x * 0``, ``0 * x``, ``0 / x`` (NaN for an infinite or NaN ``x``), ``x + 0.0``, ``0.0 + x`` and
    ``x - (-0.0)`` (+0.0 for ``x = -0.0``). ``x + (-0.0)`` and ``x - 0.0`` are ``x`` in IEEE too."""
    if _float_expression(a):
        zero = zero_value(b)
        if zero is not None and (name == "_OpMul" or (name == "_OpAdd" and _positive(zero))
                                 or (name == "_OpSub" and not _positive(zero))):
            return a, zero
    if _float_expression(b):
        zero = zero_value(a)
        if zero is not None and (name in ("_OpMul", "_OpDiv") or (name == "_OpAdd" and _positive(zero))):
            return b, zero
    return None


def _unfolded_zero(name: str, ffi_op: Callable[..., Any]) -> Callable[..., Any]:
    """TVM's ``_OpMul`` / ``_OpDiv`` / ``_OpAdd`` / ``_OpSub``, building the operations of
    :func:`_wrong_fold` of a float ``x`` as the node itself instead of what TVM folds them to
    (module docstring), in the dtype TVM's result has."""
    from .kept_effects import matched

    node = _ZERO_NODES[name]

    def operator(a: Any, b: Any, *rest: Any) -> Any:
        result = ffi_op(a, b, *rest)  # TVM's checks, and the dtype of the result
        found = _wrong_fold(name, a, b)
        if found is None or not tvm.ir.is_prim_expr(result):
            return result
        expr, zero = found
        dtype = result.ty.dtype
        pair = (matched(dtype, expr), matched(dtype, zero))
        return node(*pair) if expr is a else node(*reversed(pair))

    operator.__name__ = name
    operator.__dict__.update(getattr(ffi_op, "__dict__", {}))  # the marks of what it wraps (install() checks them)
    setattr(operator, _ZERO_MARK, ffi_op)
    setattr(operator, _WRAPPED_MARK, getattr(ffi_op, _WRAPPED_MARK, ffi_op))
    return operator


_ZERO_MARK = "_tilelang_unfolded_float_zero"


def _unsigned_negation(x: Any, dtype: Any) -> Any:
    """``-x`` of an unsigned ``x`` as C computes it (two's complement), written ``(x ^ max) + 1``.

    Not ``0 - x``: TVM's LLVM code generator emits that as a subtraction that never wraps (``nuw``),
    and LLVM folded it to 0, a wrong result without an error.
    """
    all_ones = tirx.const((1 << dtype.bits) - 1, str(x.ty.dtype))
    return _prim_ffi_api._OpAdd(_prim_ffi_api.bitwise_xor(x, all_ones, None), tirx.const(1, str(x.ty.dtype)), None)


def _unsigned(x: Any) -> Any:
    """The element dtype of an unsigned integer expression, else None."""
    dtype = _integer_dtype(x)
    return dtype if dtype is not None and str(dtype).startswith("uint") else None


def _negate(ffi_negate: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """TVM's ``-x``, which multiplies by ``-1`` and so refused every unsigned ``x`` ("cannot make
    uint from negative value"); for those the two's complement, as negative literals next to
    unsigned operands are (above)."""

    def negate(x: Any) -> Any:
        dtype = _unsigned(x)
        return _unsigned_negation(x, dtype) if dtype is not None else ffi_negate(x)

    negate.__name__ = "__neg__"
    setattr(negate, _WRAPPED_MARK, ffi_negate)
    return negate


def _is_zero(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value == 0
    return isinstance(value, tirx.IntImm) and int(value.value) == 0


def _zero_minus(ffi_sub: Callable[..., Any]) -> Callable[..., Any]:
    """TVM's subtraction, with ``0 - x`` of an unsigned ``x`` written as its negation (see above)."""

    def subtract(a: Any, b: Any, *rest: Any) -> Any:
        dtype = _unsigned(b)
        if dtype is not None and _is_zero(a) and "x" not in str(b.ty.dtype):
            return _unsigned_negation(b, dtype)
        return ffi_sub(a, b, *rest)

    subtract.__name__ = "_OpSub"
    setattr(subtract, _ZERO_MINUS_MARK, ffi_sub)
    setattr(subtract, _WRAPPED_MARK, getattr(ffi_sub, _WRAPPED_MARK, ffi_sub))
    return subtract


_ZERO_MINUS_MARK = "_tilelang_unsigned_zero_minus"


def install() -> None:
    """Wrap TVM's bitwise, shift, arithmetic, comparison and min/max functions and unary minus (idempotent)."""
    from tvm.ir import _overload_prim_expr
    from tvm.tirx.script.builder import _ffi_api as _builder_ffi_api  # TVMScript's T.max / T.min

    if getattr(_overload_prim_expr.__neg__, _WRAPPED_MARK, None) is None:
        _overload_prim_expr.__neg__ = _negate(_overload_prim_expr.__neg__)

    for module, names, convert in (
        (_prim_ffi_api, OPERATORS, _full_width),
        (_prim_ffi_api, FLOAT_OPERATORS, _float64_pair),
        (_builder_ffi_api, ("max", "min"), _float64_pair),  # no span argument
        (_prim_ffi_api, ("_OpIfThenElse",), _float64_branches),
    ):
        for name in names:
            current = getattr(module, name)
            if getattr(current, _WRAPPED_MARK, None) is None:
                wrapper = _wrap_shift(name, current) if name in ("left_shift", "right_shift") else _wrap(name, current, convert)
                setattr(module, name, wrapper)
    if getattr(_prim_ffi_api._OpSub, _ZERO_MINUS_MARK, None) is None:
        _prim_ffi_api._OpSub = _zero_minus(_prim_ffi_api._OpSub)  # around the float64 rule's wrapper
    for name in _ZERO_NODES:
        current = getattr(_prim_ffi_api, name)
        if getattr(current, _ZERO_MARK, None) is None:
            setattr(_prim_ffi_api, name, _unfolded_zero(name, current))  # around the float64 rule's wrapper
