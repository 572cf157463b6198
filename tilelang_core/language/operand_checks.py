"""Checks of the operands of allocations and scalar operators, made when a kernel is defined.

Without them a wrong operand reached TVM and failed there with a message that names neither the
operator nor what was expected: ``T.alloc_local((0,), ...)`` stopped C code generation with
"Check failed: constant_size > 0", ``T.if_then_else(None, a, b)`` crashed the process,
``T.max(x, "y")`` gave "Mismatched type on argument #1 when calling ...", a buffer given to
``T.clamp`` gave "Expected `ir.Expr` but got `ir.Var`". Each check here raises a
:class:`~tilelang_core.errors.LoweringError` (also a ``TypeError`` or ``ValueError``) whose
message starts with the kernel's ``file:line`` and names the operator, the operand, what was
expected and what was given.
"""

from __future__ import annotations

from numbers import Integral, Number
from typing import Any, Callable, Optional, Sequence

import tvm
from tvm import tirx

from .expression_depth import check_operand_depth

__all__ = ["check_dtype", "check_extents", "check_grid_extent", "check_integer", "check_loop_bounds", "check_scalar",
           "check_condition", "as_expression", "install"]


def _fail(op: str, message: str, error: str = "type") -> None:
    from .tileops._common import OperandCheckError, OperandTypeError, location  # noqa: F401 - lazy: tileops imports core

    from ..errors import LoweringError

    kind = OperandTypeError if error == "type" else LoweringError
    where = location()
    raise kind(f"{where}: {op}: {message}" if where != "<unknown>" else f"{op}: {message}")


def _is_region(value: Any) -> bool:
    """Whether ``value`` is a region (``A[0:8, 0:16]``): an expression without an element dtype."""
    ty = getattr(value, "ty", None)
    return type(value).__name__ in ("BufferRegion", "TensorRegion") or "Region" in type(ty).__name__


def _given(value: Any) -> str:
    """What the kernel author gave, for messages (``the buffer S (16, 16) float32``, ``str 'x'``)."""
    from .tileops._common import is_buffer

    if is_buffer(value):
        shape = tuple(int(s) if isinstance(s, tirx.IntImm) else s for s in value.shape)
        return f"the buffer {value.name} {shape} {value.dtype}"
    if _is_region(value):
        return f"the region {value}"
    if isinstance(value, tirx.Expr):
        return f"the {value.ty.dtype} expression {value}"
    return f"{type(value).__name__} {value!r}"


def check_dtype(op: str, dtype: Any) -> str:
    """``dtype`` as a dtype name, or an error naming ``op`` (a known dtype string or constant)."""
    from .core import dtype_name

    hint = "expected a dtype string such as 'float32', 'float16', 'int32' or a constant such as T.float32"
    try:
        name = dtype_name(dtype)
    except TypeError:
        _fail(op, f"dtype must be a dtype: {hint}, got {_given(dtype)}")
    if isinstance(dtype, (tirx.Expr, tirx.Buffer)) or not isinstance(name, str):
        _fail(op, f"dtype must be a dtype: {hint}, got {_given(dtype)}")
    try:
        tvm.runtime.DataType(name)
    except Exception:  # noqa: BLE001 - TVM's parse error names neither the operator nor the fix
        _fail(op, f"unknown dtype {name!r}: {hint}")
    return name


def _is_integer_expr(value: Any) -> bool:
    """Whether ``value`` is an integer-typed expression (not a buffer, a region or a float)."""
    from .tileops._common import is_buffer

    return isinstance(value, tirx.Expr) and not is_buffer(value) and not _is_region(value) \
        and str(value.ty.dtype).startswith(("int", "uint"))


def plain_extents(op: str, values: Sequence[Any], what: str = "shape") -> tuple:
    """``values`` (a shape or strides) with each integer of another type (``numpy.int64(8)``, taken
    from a numpy shape) as a Python ``int``, which TVM's layouts take and nothing else; a float
    (``N / 2``) is an :class:`OperandTypeError` naming ``op`` (before, a bare ``AssertionError: data
    must be int or Expr, but got 8`` from inside TVM), and so is a negative constant extent of a
    ``shape`` (a tensor no call could match). Every other value is left to the caller."""
    out = []
    for value in values:
        if isinstance(value, float) or type(value).__module__ == "numpy" and not isinstance(value, Integral):
            text = "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
            _fail(op, f"{what} {text}: every extent must be an int or an integer expression (a T.dynamic size), "
                      f"got {_given(value)}" + (" (N / 2 is a float in Python: write N // 2)" if isinstance(value, float)
                                                 else ""))
        number = int(value) if isinstance(value, Integral) and not isinstance(value, bool) else (
            int(value) if isinstance(value, tirx.IntImm) else None)
        if what == "shape" and number is not None and number < 0:
            text = "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
            _fail(op, f"{what} {text}: every extent must be at least 0, got {number} (no tensor has a "
                      f"negative dimension, so no call could match it)", "value")
        if number is not None and not -(2**63) <= number < 2**63:
            # TVM stopped with "Expected `ir.Expr` but got `ffi.BigInt`", naming neither the tensor nor the limit
            text = "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
            limit = (f"every extent must be at most 2**63 - 1 = {2**63 - 1}" if what == "shape" else
                     f"every value must lie in int64 (-2**63 to 2**63 - 1 = {2**63 - 1})")
            _fail(op, f"{what} {text}: {limit}, the limit of tensor dimensions and strides, got {number}; "
                      "no tensor has more elements than int64 counts", "value")
        out.append(int(value) if isinstance(value, Integral) and not isinstance(value, (int, bool)) else value)
    return tuple(out)


def check_extents(op: str, shape: Sequence[Any]) -> None:
    """Each extent of an allocation's ``shape``: an int >= 1 or an integer expression (a
    ``T.dynamic`` size, a launch variable)."""
    text = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    for extent in shape:
        if (isinstance(extent, Integral) and not isinstance(extent, bool)) or isinstance(extent, tirx.IntImm):
            if int(extent) < 1:
                _fail(op, f"shape {text}: every extent must be at least 1, got {int(extent)} "
                          "(a tile needs at least one element)", "value")
        elif not _is_integer_expr(extent):
            _fail(op, f"shape {text}: every extent must be an int or an integer expression "
                      f"(a T.dynamic size), got {_given(extent)}")
    _check_element_count(op, shape, text)


#: The most elements a tile indexed with 32-bit integers holds.
_MAX_32_BIT_ELEMENTS = 2**31 - 1


def _check_element_count(op: str, shape: Sequence[Any], text: str) -> None:
    """A constant shape of 32-bit extents holds at most 2**31 - 1 elements: its flat index is an
    int32 (``(65536, 65536)`` wrapped to 0 elements, and the error said "no element")."""
    count = 1
    for extent in shape:
        if isinstance(extent, tirx.IntImm) and str(extent.ty.dtype) == "int64":
            return  # 64-bit extents: indexed in 64 bits
        if not ((isinstance(extent, Integral) and not isinstance(extent, bool)) or isinstance(extent, tirx.IntImm)):
            return  # a run-time size: checked when the kernel is called (lowering/workspaces.py)
        count *= int(extent)
    if count > _MAX_32_BIT_ELEMENTS:
        _fail(op, f"shape {text} has {count} elements, more than the {_MAX_32_BIT_ELEMENTS} (2**31 - 1) that its "
                  "32-bit indices reach; make it smaller, or give its extents as T.int64(...) to index it in 64 bits",
              "value")


def check_loop_bounds(op: str, **bounds: Any) -> None:
    """Each bound of a loop (``extent=16``, ``start=``, ``stop=``, ``step=``): an int or an integer
    expression (a ``T.dynamic`` size, another loop's variable); ``stop`` and ``step`` may be None
    (not given). A lone ``start`` (``T.serial(n)``, no ``stop``) is the loop's extent and is named so."""
    if "start" in bounds and "stop" in bounds and bounds["stop"] is None:
        bounds = {("extent" if name == "start" else name): value for name, value in bounds.items()}
    for name, value in bounds.items():
        value = getattr(value, "scalar", value)  # T.alloc_var's wrapper
        if value is None and name in ("stop", "step"):
            continue
        if isinstance(value, Integral) and not isinstance(value, bool):
            if not -(2**63) <= int(value) < 2**63:  # no loop variable holds it (TVM: "Literal value ... exceeds range")
                _fail(op, f"{name} is {int(value)}, which no loop variable holds: a loop bound must lie in int64 "
                          f"(-2**63 to 2**63 - 1 = {2**63 - 1}); split the loop", "value")
            continue
        if _is_integer_expr(value):
            check_operand_depth(op, name, value)  # before the zero-division check simplifies it
            _check_no_zero_division(op, name, value)
            continue
        _fail(op, f"{name} must be an int or an integer expression (a T.dynamic size, a loop variable), "
                  f"got {_given(value)}")


def check_integer(op: str, name: str, value: Any, advice: str = "") -> None:
    """``value`` is an int or an integer expression (not a bool, a float, a buffer, a string);
    ``advice`` ends the message (what to write for other operands)."""
    value = getattr(value, "scalar", value)  # T.alloc_var's wrapper
    if (isinstance(value, Integral) and not isinstance(value, bool)) or _is_integer_expr(value):
        return
    _fail(op, f"{name} must be an int or an integer expression, got {_given(value)}{advice}")


def _check_no_zero_division(op: str, name: str, value: Any) -> None:
    from .zero_divisors import zero_division

    why = zero_division(value)
    if why is not None:
        _fail(op, f"{name} {value}: {why}; divide by a value that is at least 1", "value")


def check_grid_extent(index: int, value: Any) -> None:
    """A ``T.Kernel`` grid extent given as an expression: an integer expression of the kernel's
    sizes (a ``T.dynamic`` size, ``T.ceildiv(n, 64)``); not a float, a buffer or a region."""
    if _is_integer_expr(value):
        check_operand_depth("T.Kernel", f"grid extent #{index}", value)
        return
    _fail("T.Kernel", f"grid extent #{index} must be an int or an integer expression of the kernel's sizes "
                      f"(a T.dynamic size, T.ceildiv(n, 64)), got {_given(value)}")


def _scalar_error(op: str, name: str, value: Any) -> None:
    from .tileops._common import is_buffer

    advice = ""
    if is_buffer(value):
        advice = f" (index it, {value.name}[...], for one element)"
    elif _is_region(value):
        advice = " (a region is a tile; index the buffer for one element)"
    _fail(op, f"{name} must be a scalar expression (a number, an element A[i], a T.alloc_var), "
              f"got {_given(value)}{advice}")


def as_expression(value: Any) -> Any:
    """``value`` with T.alloc_var's wrapper and TVM's lazy comparisons taken off: ``i == j`` of two
    expressions outside a kernel body (in a Python helper a kernel calls) is an ``EqualOp`` /
    ``NotEqualOp``, which TVM's functions take as the comparison (``asobject()``)."""
    import tvm_ffi

    value = getattr(value, "scalar", value)
    return value.asobject() if isinstance(value, tvm_ffi.core.ObjectConvertible) else value


def check_scalar(op: str, name: str, value: Any) -> None:
    """``value`` is a number or a scalar TIR expression (not a buffer, region, string, None, tuple)."""
    from .tileops._common import is_buffer

    value = as_expression(value)
    if isinstance(value, Number):
        return
    if isinstance(value, tirx.Expr) and not is_buffer(value) and not _is_region(value) \
            and not str(value.ty.dtype).startswith("handle"):
        return
    _scalar_error(op, name, value)


def check_condition(op: str, cond: Any) -> None:
    """``cond`` is a boolean expression (a comparison) or a Python bool."""
    check_scalar(op, "the condition", cond)
    cond = as_expression(cond)
    if isinstance(cond, bool):
        return
    dtype = str(cond.ty.dtype) if isinstance(cond, tirx.Expr) else type(cond).__name__
    if not dtype.startswith("bool"):
        _fail(op, f"the condition must be a boolean expression (a comparison such as A[i] > 0), "
                  f"got {_given(cond)}; compare it (x != 0) to test a number")


_CHECKED_MARK = "_tilelang_operands_checked"


def _checked(op: str, original: Callable[..., Any], names: Sequence[str], condition: bool = False) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        for i, (name, value) in enumerate(zip(names, args)):
            if condition and i == 0:
                check_condition(op, value)
            else:
                check_scalar(op, name, value)
        return original(*args, **kwargs)

    return _checking(call, op, original)


def _checking(call: Callable[..., Any], op: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, a checking wrapper of ``original``, with its name, docstring and mark."""
    call.__name__ = getattr(original, "__name__", op)
    call.__doc__ = original.__doc__
    call.__wrapped__ = original
    setattr(call, _CHECKED_MARK, True)
    return call


#: TVM's math functions that compute only on floats, and how many leading operands are floats
#: (``T.ldexp(x, n)`` takes an integer ``n``). Given an integer or bool operand, TVM built them and
#: C code generation failed with "Unresolved call ir.Op(... name="tirx.exp" ...)" (no kernel
#: line), LLVM's with "Cannot find intrinsic declaration, possible type mismatch: llvm.exp" or
#: "unknown intrinsic", gcc with an error in the generated source; or llvm computed a wrong value.
FLOAT_MATH = {
    **dict.fromkeys(("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
                     "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf", "sigmoid",
                     "ldexp"), 1),
    **dict.fromkeys(("atan2", "hypot", "copysign", "nextafter", "fmod", "pow"), 2),
    # T.fma(x, y, 1.0) of float64 x, y read the float32 1.0's bits on llvm (x * y + 0), and an
    # int32 z: gcc failed on the generated source
    "fma": 3,
}


def _dtype_of(value: Any) -> str:
    return str(value.ty.dtype) if isinstance(value, tirx.Expr) and not _is_region(value) else ""


def _promoted(dtypes: list) -> Optional[str]:
    """The float type that float operands of ``dtypes`` compute in, as torch promotes: the widest,
    or float32 for two kinds of one width (float16 with bfloat16); None without a float."""
    if not dtypes:
        return None
    bits = max(tvm.DataType(d).bits for d in dtypes)
    widest = {d for d in dtypes if tvm.DataType(d).bits == bits}
    if len(widest) == 1:
        return widest.pop()
    lanes = tvm.DataType(dtypes[0]).lanes
    return "float32" if lanes == 1 else f"float32x{lanes}"


#: Arguments of the float functions that take more than their float operands (``T.ldexp(x, n)``).
_ARGUMENTS = {"ldexp": 2}


def check_float_operands(op: str, values: Sequence[Any], more: int = 0) -> list:
    """``values`` ready for the float function ``op``: Python ints made floats (``T.exp(2)`` is
    ``T.exp(2.0)``); with two or three operands, an integer or bool expression, or a float of another type,
    converted to the type the float operands compute in, as torch promotes (a Python float
    counts: ``T.pow(2.0, n)`` is computed in float32). TVM's ``T.atan2``, ``T.fmod``, ``T.hypot``,
    ... took the first operand's type for the call and read the other's bits: ``T.fmod(x, n)``
    gave 3e-20 on ``llvm``. Beside a vector (``float64x2``) a scalar is broadcast to its lanes.
    Without any float operand it is an error naming ``op`` and the operand (``more``: how many
    other arguments ``op`` takes after these, for the example of the message)."""
    checked = [as_expression(value) for value in values]
    floats = [_dtype_of(v) for v in checked if _dtype_of(v).startswith(("float", "bfloat"))]
    target = _promoted(floats)
    if target is None and any(isinstance(v, float) for v in checked):
        target = "float32"  # a Python float next to an integer expression: TVM's type of a float literal
    lanes = tvm.DataType(target).lanes if target is not None else 1
    element = str(tvm.DataType(target).with_lanes(1)) if target is not None else None
    for position, value in enumerate(checked):
        if isinstance(value, Integral) and not isinstance(value, bool):
            value = checked[position] = float(value)  # T.exp(2) is T.exp(2.0); not a float operand for T.pow(n, 2)
        if isinstance(value, float) and (element == "float64" or lanes > 1):
            # float64: TVM made it float32 and fmod(x64, 0.1) read its bits; a vector: one lane.
            # Beside narrower floats it stays float32, as for scalars (T.fmod(v, 0.1) of float16
            # computes with float32's 0.1, as torch does)
            constant = tirx.FloatImm(element if tvm.DataType(element).bits >= 32 else "float32", value)
            checked[position] = constant if lanes == 1 else tirx.Broadcast(constant, lanes)
            continue
        dtype = _dtype_of(value)
        if not dtype or dtype == target or dtype.startswith("handle"):
            continue
        if target is None:
            _fail(op, _not_float_message(op, len(values), more, position, value))
        if tvm.DataType(dtype).lanes == lanes:
            checked[position] = tirx.Cast(target, value)
        elif tvm.DataType(dtype).lanes == 1:
            checked[position] = tirx.Broadcast(tirx.Cast(element, value), lanes)
    return checked


def _not_float_message(op: str, count: int, more: int, position: int, value: Any) -> str:
    """The message of a float function given no float operand: which operand, and a call that
    converts that one."""
    names = ["x", "y", "z"][:count] + ["n"] * more
    which = "its operand" if count == 1 else f"its {('first', 'second', 'third')[position]} operand"
    names[position] = f'T.cast({names[position]}, "float32")'
    return (f"computes on floating-point values only, but {which} is {_given(value)}; convert it first, for "
            f"example {op}({', '.join(names)})")


def _float_math(op: str, original: Callable[..., Any], floats: int) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        args = (*check_float_operands(op, args[:floats], more=_ARGUMENTS.get(op[2:], floats) - floats),
                *args[floats:])
        return original(*args, **kwargs)

    return _checking(call, op, original)


def install(namespace: dict) -> None:
    """Put checked ``T.if_then_else``, ``T.max``, ``T.min``, ``T.truncdiv``, ``T.vectorized`` and
    the float math of :data:`FLOAT_MATH` into ``namespace`` (the language module)."""
    for key, floats in FLOAT_MATH.items():
        original = namespace.get(key)
        if original is not None and not getattr(original, _CHECKED_MARK, False):
            namespace[key] = _float_math(f"T.{key}", original, floats)
    for key, names, condition in (
        ("if_then_else", ("the condition", "the true value", "the false value"), True),
        ("max", ("the first operand", "the second operand"), False),
        ("min", ("the first operand", "the second operand"), False),
    ):
        original = namespace[key]
        if not getattr(original, _CHECKED_MARK, False):
            namespace[key] = _checked(f"T.{key}", original, names, condition)
    truncdiv = namespace["truncdiv"]
    if not getattr(truncdiv, _CHECKED_MARK, False):
        def checked_truncdiv(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
            for name, value in (("the dividend", a), ("the divisor", b)):
                check_integer("T.truncdiv", name, value, "; for floats write T.trunc(x / y)")
            return truncdiv(a, b, *args, **kwargs)

        checked_truncdiv.__doc__ = truncdiv.__doc__
        setattr(checked_truncdiv, _CHECKED_MARK, True)
        namespace["truncdiv"] = checked_truncdiv
    vectorized = namespace["vectorized"]
    if not getattr(vectorized, _CHECKED_MARK, False):
        def checked_vectorized(start: Any, stop: Any = None, *args: Any, **kwargs: Any) -> Any:
            check_loop_bounds("T.vectorized", start=start, stop=stop)
            return vectorized(start, stop, *args, **kwargs)

        checked_vectorized.__doc__ = vectorized.__doc__
        setattr(checked_vectorized, _CHECKED_MARK, True)
        namespace["vectorized"] = checked_vectorized
