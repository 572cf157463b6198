"""``T.max_value``, ``T.min_value`` and ``T.infinity`` right for every float dtype.

TVM 0.27's own functions, which ``T.`` exported unchanged:

* ``T.max_value("bfloat16")`` was float32's largest value, which is ``inf`` once stored as a
  bfloat16, so ``T.min(x, T.max_value(dt))`` let an infinity through; the float8 variants
  ``e4m3fnuz`` (448 and 0 for 240 and -240) and ``e8m0fnu`` were wrong as well;
* ``T.infinity`` knew float16/32/64 only: ``-T.infinity("bfloat16")``, the usual start of a
  running maximum, stopped the kernel's definition with "Cannot decide infinity".

The limits of the low-precision floats are torch's (``torch.finfo``), which agrees with TVM for
float16, float32 and float64 and with the formats' definitions for the others, or, for formats
torch lacks (``float8_e4m3``, ``float8_e3m4``, float6, float4), ml_dtypes' (TVM's said 448 for
``float8_e4m3``, whose largest value is 240); integer dtypes keep TVM's answer. Any spelling of
a dtype is taken (``"bf16"``, ``T.bfloat16``, ``torch.bfloat16``), a vector dtype gets each
lane's value, bool ``True``/``False``.
"""

from __future__ import annotations

from typing import Any, Optional

from tvm import tirx

__all__ = ["max_value", "min_value", "infinity"]

#: float8 dtypes with an infinity, and its bits (a float8 infinity constant prints as ``inff`` in
#: CUDA, no such identifier); the sign bit is 0x80. ``float8_e4m3`` and ``float8_e3m4`` are the
#: IEEE-like formats (ml_dtypes' definitions), not ``float8_e4m3fn``.
_FLOAT8_INFINITY_BITS = {"float8_e5m2": 0x7C, "float8_e4m3": 0x78, "float8_e3m4": 0x70}


def _finfo(dtype: str) -> Optional[Any]:
    """``torch.finfo`` of a scalar float ``dtype`` torch knows, else ``ml_dtypes.finfo`` of one
    it defines (``float8_e4m3``, ``float8_e3m4``, ``float8_e4m3b11fnuz``, the float6 and float4
    formats; TVM's own limits of those were wrong: 448 for ``float8_e4m3``, whose largest value
    is 240), else None (integers, vectors such as ``float16x2``)."""
    import torch

    torch_dtype = getattr(torch, dtype, None)
    if isinstance(torch_dtype, torch.dtype):
        try:
            return torch.finfo(torch_dtype)
        except TypeError:
            return None
    if not dtype.startswith("float"):
        return None
    import ml_dtypes  # a dependency of apache-tvm

    kind = getattr(ml_dtypes, dtype, None)
    return ml_dtypes.finfo(kind) if kind is not None else None


def _constant(function: str, dtype: str, value: float, span: Any) -> Any:
    """``value`` as a constant of ``dtype``.

    :raises ValueError: TVM cannot hold it (TVM 0.27 takes the float8 ``fnuz`` formats for
        unsigned: it refuses ``T.min_value("float8_e4m3fnuz")``, -240, where it gave 0).
    """
    try:
        return tirx.FloatImm(dtype, value, span)
    except ValueError as exc:
        raise ValueError(f"T.{function}({dtype!r}) is {value}, which TVM 0.27 cannot hold in a {dtype} "
                         f"constant: {str(exc).strip().splitlines()[-1]}") from None


def _scalar_dtype(dtype: Any) -> tuple[str, int]:
    """``(scalar dtype name, lanes)`` of any dtype spelling: a name or alias (``"bf16"``,
    ``"float"``), a ``T.`` dtype, a torch dtype, a vector dtype (``"float16x2"``: lanes 2)."""
    import tvm

    from .dtypes import dtype as as_dtype

    name = str(as_dtype(dtype))
    data_type = tvm.DataType(name)
    scalar = data_type.with_lanes(1) if data_type.lanes != 1 else data_type
    text = str(scalar)
    if scalar.type_code == tvm.DataType("bfloat16").type_code and scalar.bits == 16:
        text = "bfloat16"  # TVM keeps the alias bf16 as its own spelling
    return text, data_type.lanes


def _lanes(value: Any, lanes: int) -> Any:
    return value if lanes == 1 else tirx.Broadcast(value, lanes)


def _limit(function: str, dtype: Any, span: Any, largest: bool) -> Any:
    name, lanes = _scalar_dtype(dtype)
    if name == "bool":
        return _lanes(tirx.const(largest, "bool"), lanes)
    info = _finfo(name)
    if info is None:
        value = tirx.max_value(name, span) if largest else tirx.min_value(name, span)
    else:
        value = _constant(function, name, float(info.max if largest else info.min), span)
    return _lanes(value, lanes)


def max_value(dtype: Any, span: Any = None) -> Any:
    """The largest finite value of ``dtype`` (any spelling: ``"bfloat16"``, ``"bf16"``,
    ``T.bfloat16``, ``torch.bfloat16``), as a constant of that dtype; of each lane for a vector
    dtype (``"float16x2"``); ``True`` for bool."""
    return _limit("max_value", dtype, span, largest=True)


def min_value(dtype: Any, span: Any = None) -> Any:
    """The lowest finite value of ``dtype`` (the most negative; the smallest for a dtype without
    negative values, float8_e8m0fnu; ``False`` for bool), as :func:`max_value` takes it."""
    return _limit("min_value", dtype, span, largest=False)


def infinity(dtype: Any, span: Any = None) -> Any:
    """Positive infinity of the float ``dtype`` (``-T.infinity(dtype)`` for the negative one), as
    :func:`max_value` takes it; each lane's for a vector dtype.

    :raises ValueError: ``dtype`` has no infinity (integers, bool, float8_e4m3fn and the other
        float8, float6 and float4 formats without one: all but float8_e5m2, float8_e4m3 and
        float8_e3m4), naming its largest finite value.
    """
    name, lanes = _scalar_dtype(dtype)
    if name in ("float16", "float32", "float64"):
        return _lanes(tirx.infinity(name, span), lanes)
    if name == "bfloat16":
        return _lanes(tirx.FloatImm(name, float("inf"), span), lanes)
    if name in _FLOAT8_INFINITY_BITS:
        return _lanes(tirx.reinterpret(name, tirx.IntImm("uint8", _FLOAT8_INFINITY_BITS[name])), lanes)
    largest = max_value(name) if name != "bool" else None
    hint = f"; its largest finite value is {largest.value} (T.max_value({name!r}))" if largest is not None else ""
    raise ValueError(f"T.infinity: {name} has no infinity{hint}")


def extreme(dtype: Any, positive: bool) -> Any:
    """``+inf`` (``positive``) or ``-inf`` of a float ``dtype`` that has an infinity, else its
    largest or lowest finite value: what a running minimum or maximum starts from (the
    reductions' start values, tileops/reduce.py). Integers and bool get their limits."""
    name, lanes = _scalar_dtype(dtype)
    if name in _FLOAT8_INFINITY_BITS:
        bits = _FLOAT8_INFINITY_BITS[name] | (0 if positive else 0x80)
        return _lanes(tirx.reinterpret(name, tirx.IntImm("uint8", bits)), lanes)
    if name in ("float16", "bfloat16", "float32", "float64"):
        return _lanes(tirx.FloatImm(name, float("inf") if positive else float("-inf")), lanes)
    return _limit("max_value" if positive else "min_value", name, None, largest=positive)
