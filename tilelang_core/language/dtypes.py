"""Dtypes as values: ``T.float16``, ``T.dtype("float32")``, ``T.float16.as_torch()``.

Every dtype name of the kernel language (``T.float16``, ``T.int32``, ``T.bfloat16``,
``T.float8_e4m3fn``, vector forms such as ``T.float16x2``, TileLang's aliases ``T.half``,
``T.float``, ``T.int``, ``T.long``, ...) is a :class:`dtype` instance. A :class:`dtype` *is* a
string (a subclass of TVM's ``tvm.DataType``, itself a ``str``), so it works wherever a dtype
string does: ``T.alloc_shared(shape, T.float16)``, ``T.Tensor(shape, T.float16)``,
``T.cast(x, T.float32)``, ``tvm.ir.PrimType(T.float16)``, ``getattr(torch, T.float16)``. It is
also callable the way TVMScript's dtype constructors are (``T.float32(0)`` is a constant,
``alpha: T.float32`` declares a scalar parameter, ``T.float32x2(a, b)`` packs a vector) and
converts to torch with :meth:`dtype.as_torch`.

Only dtypes this TVM (0.27) knows are provided; see docs/compatibility.md.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import tvm
import tvm_ffi
from tvm import tirx

from ..dtype_names import SCALAR_DTYPES, VECTOR_LANES

__all__ = [
    "dtype",
    "AnyDType",
    "get_tvm_dtype",
    "resolve_torch_storage_dtype",
    "is_float4",
    "is_float4_e2m1fn",
    "is_float4_e2m1_unpacked",
    "is_f8f6f4_family",
]

#: TileLang's C-style aliases and their canonical names.
ALIASES = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "uint": "uint32",
    "ulong": "uint64",
    # TensorFloat-32 is a tensor-core compute mode over float32 storage; TVM 0.27 has no such
    # dtype, so it is float32 here (stored the same; computed at full float32 precision)
    "tfloat32": "float32",
}

_PYTHON_TYPES = {bool: "bool", int: "int32", float: "float32"}

#: Canonical dtype name -> name of the torch dtype (when it differs or only to say it exists).
_TORCH_NAMES = {
    "bool": "bool",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2": "float8_e5m2",
    "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu",
    # torch stores FP4 values two per byte; one fp4 element's storage is that packed type
    "float4_e2m1fn": "float4_e2m1fn_x2",
    "float4_e2m1fnx2": "float4_e2m1fn_x2",
}


def _canonical_name(value: Any) -> str:
    """The canonical dtype string of a string, torch/numpy dtype or Python type."""
    if isinstance(value, str):
        if value.startswith("tfloat32x"):  # vector forms of an alias: float32xN
            return "float32" + value[len("tfloat32") :]
        return ALIASES.get(value, value)
    if value in _PYTHON_TYPES:
        return _PYTHON_TYPES[value]
    text = str(value)
    if text.startswith("torch."):
        name = text[len("torch.") :]
        for canonical, torch_name in _TORCH_NAMES.items():
            if torch_name == name and canonical != "float4_e2m1fn":
                return canonical
        return name
    numpy_name = getattr(value, "name", None)  # numpy dtypes and numpy scalar types
    if isinstance(numpy_name, str):
        return numpy_name
    numpy_type = getattr(value, "__name__", None)
    if isinstance(numpy_type, str) and getattr(value, "__module__", "") == "numpy":
        return "bool" if numpy_type == "bool_" else numpy_type
    raise TypeError(
        f"not a dtype: {value!r} ({type(value).__name__}); give a dtype name such as 'float16', a constant such as "
        "T.float16, a torch dtype or a Python type (bool, int, float)"
    )


def _constructors() -> dict[str, Any]:
    """TVMScript's dtype constructors by dtype string (``"float32"`` -> ``T.float32`` of TVMScript)."""
    from tvm.script import tirx as tvm_script

    table: dict[str, Any] = {}
    for name in dir(tvm_script):
        value = getattr(tvm_script, name)
        dtype_str = getattr(value, "_dtype_str", None)
        if isinstance(dtype_str, str) and callable(value):
            table.setdefault(dtype_str, value)
    table["bool"] = tvm_script.boolean
    return table


_CONSTRUCTORS: Optional[dict[str, Any]] = None


#: (significant bits, least normal exponent, largest exponent) of the 16-bit float dtypes.
_FORMATS_16 = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127)}


def is_dtype_like(value: Any) -> bool:
    """Whether ``value`` names a dtype as a string, a ``T.float16``-style constant, a torch or numpy
    dtype, or a Python type (``bool``, ``int``, ``float``): what may end ``T.empty(shape..., dtype)``."""
    import numbers

    if isinstance(value, str):
        return True
    if isinstance(value, (numbers.Number, tuple, list)) or hasattr(value, "ty"):
        return False  # a dimension (an int or an expression), or a shape
    try:
        _canonical_name(value)
    except (TypeError, ValueError):
        return False
    return True


def nearest_float32(value: float) -> float:
    """The float32 value nearest to ``value`` (a double), as C and torch store it: an infinity past
    float32's largest finite value (beyond the rounding boundary), a NaN stays a NaN."""
    import struct

    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def nearest_16bit(value: float, dtype_name: str) -> float:
    """The ``float16`` or ``bfloat16`` value nearest to ``value`` (a double), rounded once, ties to
    even; an infinity past the largest finite value, a NaN stays a NaN."""
    import math

    if math.isnan(value) or math.isinf(value) or value == 0.0:
        return value
    bits, min_exp, max_exp = _FORMATS_16[dtype_name]
    _, e = math.frexp(abs(value))  # 2**(e - 1) <= abs(value) < 2**e
    step = 2.0 ** max(e - bits, min_exp - bits + 1)  # below the normal range the spacing stays
    result = round(abs(value) / step) * step  # the division is exact; round() ties to even
    return math.copysign(math.inf if result >= 2.0 ** (max_exp + 1) else result, value)


def representable_constant(expr: Any) -> Any:
    """A float16/bfloat16 constant with its value rounded to that type (``T.bfloat16(1.1)`` is
    1.1015625, as ``torch.tensor(1.1, dtype=torch.bfloat16)``): TVM keeps the double it is given,
    and folds ``X_f32 * T.bfloat16(1.1)`` into a product with 1.1 while the kernel is parsed.
    Other expressions are returned as they are."""
    if not isinstance(expr, tirx.FloatImm) or str(expr.ty.dtype) not in _FORMATS_16:
        return expr
    value = float(expr.value)
    rounded = nearest_16bit(value, str(expr.ty.dtype))
    return expr if rounded == value or rounded != rounded else tirx.FloatImm(str(expr.ty.dtype), rounded)


def past_int64(value: Any) -> bool:
    """Whether ``value`` is a Python int outside int64 (not a bool), which TVM hands to C++ as a big
    integer that its constructors and operators refuse ("Expected ir.Expr but got ffi.BigInt")."""
    return isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 63)


class dtype(tvm_ffi.dtype):
    """A dtype of the kernel language; a ``str`` (and a ``tvm.DataType``) with extras.

    ``dtype(x)`` accepts a dtype string (aliases such as ``"half"`` and ``"float"`` are
    canonicalised), another dtype, a torch dtype, a NumPy dtype or ``bool``/``int``/``float``.
    An unknown name raises ``TypeError``/``ValueError`` naming it.

    Calling a dtype builds an expression of it, like TVMScript's dtype constructors:
    ``T.float32(0)`` is the constant ``0.0f``, ``T.int32(x)`` casts ``x``, ``T.float32()``
    declares a scalar (also what the annotation ``alpha: T.float32`` does), and a vector dtype
    called with one value per lane (``T.float16x2(a, b)``) packs them.
    """

    __slots__ = ()

    def __new__(cls, value: Any) -> "dtype":
        if isinstance(value, cls):
            return value
        name = _canonical_name(value)
        try:
            return super().__new__(cls, name)
        except Exception:  # noqa: BLE001 - TVM's message is terse; say what was given
            raise ValueError(f"unknown dtype {name!r} (given {value!r}); this TVM does not support it") from None

    def __call__(self, *args: Any) -> Any:
        return representable_constant(self._build(*args))

    def _build(self, *args: Any) -> Any:
        if len(args) > 1:
            if len(args) != self.lanes:
                raise ValueError(f"{self}(...) packs one value per lane: {self.lanes} expected, got {len(args)}")
            return tirx.Shuffle([tirx.const(a, str(self.element_of)) if isinstance(a, (int, float)) else a for a in args],
                                list(range(len(args))))
        if args and args[0] is None:
            from .operand_checks import _fail

            # TVMScript took None for no argument: a new variable, which the kernel never defines
            _fail(f"T.{self}(None)", f"None is not a value to convert to {self}; give a number or an expression "
                                     f"(T.{self}(0), T.{self}(A[i]))")
        expr = args[0] if args else None
        global _CONSTRUCTORS
        if _CONSTRUCTORS is None:
            _CONSTRUCTORS = _constructors()
        constructor = _CONSTRUCTORS.get(str(self)) if self.lanes == 1 else None
        if past_int64(expr):
            return tirx.const(expr, str(self))  # T.uint64(0xFFFFFFFFFFFFFFFF): past int64, which the constructors take
        if isinstance(expr, float) and str(self) == "float64":  # numpy's float64 too
            return tirx.FloatImm("float64", float(expr))  # T.float64(1e300): the constructor checked float32's range
        if constructor is not None:
            try:
                return constructor(expr)
            except AttributeError:  # TVMScript lists the name but its builder lacks the function
                pass
        if expr is None:
            return tirx.Var("v", str(self))
        if isinstance(expr, str):
            expr = float(expr)  # "inf", "-inf", "nan", as TVMScript's constructors accept
        if self.lanes > 1:
            scalar = self.element_of(expr)
            return tirx.Broadcast(scalar, self.lanes)
        if isinstance(expr, (bool, int, float)):
            return tirx.const(expr, str(self))
        return tirx.Cast(str(self), expr)

    @property
    def element_of(self) -> "dtype":
        """The scalar dtype of a vector dtype (``T.float16x2.element_of`` is ``T.float16``)."""
        return dtype(self.with_lanes(1)) if self.lanes > 1 else self

    @property
    def bytes(self) -> int:
        """Size of one element in bytes (``itemsize``)."""
        return self.itemsize

    def as_torch(self) -> Any:
        """The torch dtype of this dtype (``T.float16.as_torch()`` is ``torch.float16``).

        FP4 dtypes map to torch's packed storage dtype ``torch.float4_e2m1fn_x2``.

        :raises TypeError: torch has no such dtype (e.g. ``int4``, ``float8_e4m3``).
        """
        import torch

        torch_name = _TORCH_NAMES.get(str(self))
        found = getattr(torch, torch_name, None) if torch_name else None
        if not isinstance(found, torch.dtype):
            raise TypeError(f"dtype {str(self)!r} has no torch equivalent in torch {torch.__version__}")
        return found

    def is_float4_e2m1fn(self) -> bool:
        """Whether this is ``float4_e2m1fn`` (any lane count)."""
        return str(self.element_of) == "float4_e2m1fn"

    def is_float4_e2m1_unpacked(self) -> bool:
        """Always False: the unpacked FP4 storage type of TileLang is not a dtype of this TVM."""
        return False

    def is_float4(self) -> bool:
        """Whether this is a 4-bit float dtype."""
        return self.is_float4_e2m1fn()

    def __reduce__(self) -> Any:
        return (dtype, (str(self),))


AnyDType = Union[dtype, str, type, Any]


def get_tvm_dtype(value: Any) -> Any:
    """``value`` as a :class:`dtype` (a ``tvm.ir.Type`` is returned unchanged)."""
    if isinstance(value, (dtype, tvm.ir.Type)):
        return value
    return dtype(value)


def resolve_torch_storage_dtype(value: Any) -> dtype:
    """The dtype of the torch tensor that stores values of ``value``.

    The same dtype when torch has it; ``int8`` for sub-byte integers (``int4``); FP4 maps to
    torch's packed ``float4_e2m1fnx2`` (``int8`` when this torch lacks it).
    """
    d = get_tvm_dtype(value)
    if d.is_float4_e2m1fn():
        try:
            d.as_torch()
            return dtype("float4_e2m1fnx2")
        except TypeError:
            return dtype("int8")
    try:
        return dtype(d.as_torch())
    except TypeError:
        if d.type_code in (0, 1) and d.bits < 8:  # int / uint narrower than a byte
            return dtype("int8" if d.type_code == 0 else "uint8")
        raise


def is_float4_e2m1fn(value: Any) -> bool:
    """Whether ``value`` names ``float4_e2m1fn`` (any lane count)."""
    return get_tvm_dtype(value).is_float4_e2m1fn()


def is_float4_e2m1_unpacked(value: Any) -> bool:
    """Always False (see :meth:`dtype.is_float4_e2m1_unpacked`)."""
    return False


def is_float4(value: Any) -> bool:
    """Whether ``value`` names a 4-bit float dtype."""
    return get_tvm_dtype(value).is_float4()


def is_f8f6f4_family(value: Any) -> bool:
    """Whether ``value`` is an 8-, 6- or 4-bit float dtype (the FP8/FP6/FP4 family)."""
    d = get_tvm_dtype(value)
    name = str(d.element_of)
    return name.startswith(("float8", "float6", "float4"))


# -- the dtype names -------------------------------------------------------------------------

_SCALARS, _LANES = SCALAR_DTYPES, VECTOR_LANES
_SHORT = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
          "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


def _all_names() -> dict[str, dtype]:
    names: dict[str, dtype] = {}
    for scalar in _SCALARS:
        try:
            names[scalar] = dtype(scalar)
        except (TypeError, ValueError):
            continue
        if scalar == "bool":
            continue
        for lanes in _LANES:
            try:
                names[f"{scalar}x{lanes}"] = dtype(f"{scalar}x{lanes}")
            except (TypeError, ValueError):
                pass
    for alias, canonical in {**ALIASES, **_SHORT}.items():
        if canonical in names:
            names[alias] = names[canonical]
    for lanes in _LANES:  # the vector forms of TensorFloat-32 (see ALIASES)
        if f"float32x{lanes}" in names:
            names[f"tfloat32x{lanes}"] = names[f"float32x{lanes}"]
    return names


#: Every dtype name this module defines, mapped to its :class:`dtype`.
DTYPES: dict[str, dtype] = _all_names()
__all__ += list(DTYPES)

#: TileLang's list of dtype names (its aliases and every scalar and vector name), as TileLang
#: code iterates it; TVMScript's short names (``f16``, ``i32``, ...) are left out.
_all_dtypes = [name for name in DTYPES if name not in _SHORT]


def __getattr__(name: str) -> Any:
    # dtype names are looked up here rather than stored as globals, so names such as ``bool``,
    # ``int`` and ``float`` keep meaning Python's types inside this module
    try:
        return DTYPES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(DTYPES))
