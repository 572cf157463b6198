"""``tilelang.language.tir.ir``: ``T.cast`` with TileLang's rounding arguments, and TIR types.

``cast(value, dtype, round="", sat=True, rbits=None)`` accepts TileLang's signature. The
default conversion (``round=""`` or ``"rn"``, round to nearest even, with ``sat=True``) is TVM's
cast. The PTX rounding modes ``"rz"``, ``"rp"``, ``"rm"``, stochastic rounding ``"rs"`` (with
``rbits``) and ``sat=False`` build a marked cast that lowering turns into the target's
conversion (:mod:`tilelang_core.lowering.casts`: stochastic rounding on CUDA sm_100a, directed
rounding to float16/bfloat16 on CUDA); a target without that conversion refuses the kernel with
a :class:`~tilelang_core.errors.LoweringError` at the ``T.cast`` line, instead of silently
rounding another way.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

__all__ = ["cast", "Shuffle", "Select", "IntImm", "StringImm", "PrimExpr", "Any"]

#: Rounding modes ``cast`` accepts: ``""`` (the default), and PTX's ``rn``, ``rz``, ``rp``, ``rm``, ``rs``.
_VALID_CAST_ROUNDING_MODES = {"", "rn", "rz", "rp", "rm", "rs"}

#: Name of the extern call a cast with a non-default rounding becomes until lowering:
#: ``call_extern(dtype, ROUNDED_CAST, value, mode, sat, "file:line"[, rbits])``.
ROUNDED_CAST = "tl.cast_rounded"

Shuffle = tirx.Shuffle
Select = tirx.Select
IntImm = tirx.IntImm
StringImm = tvm.ir.StringImm
PrimExpr = tirx.Expr


def cast(value: Any, dtype: Any, round: str = "", sat: bool = True, rbits: Any = None, span: Any = None) -> Any:  # noqa: A002 - TileLang's name
    """``value`` converted to ``dtype``; see the module docstring for ``round``/``sat``/``rbits``.

    :raises LoweringError: (a ``ValueError``) an unknown ``round``, a ``sat`` that is not a bool, ``round="rs"`` without
        ``rbits``, or ``rbits`` with another mode.
    """
    from ...errors import LoweringError  # a ValueError
    from ..core import _caller_location
    from ..operand_checks import check_dtype, check_scalar

    check_scalar("T.cast", "the value", value)
    value = getattr(value, "scalar", value)  # T.alloc_var's wrapper
    where = f"{_caller_location()}: T.cast: " if _caller_location() else "T.cast: "
    if round not in _VALID_CAST_ROUNDING_MODES:
        raise LoweringError(f"{where}Invalid round {round!r}. "
                         f"Must be one of: {sorted(_VALID_CAST_ROUNDING_MODES)}")
    if not isinstance(sat, bool):
        raise LoweringError(f"{where}Invalid sat {sat!r}. Must be a bool (True: saturate to the finite range)")
    if round == "rs" and rbits is None:
        raise LoweringError(f"{where}rbits is required when round='rs' (stochastic rounding)")
    if round != "rs" and rbits is not None:
        raise LoweringError(f"{where}rbits is only valid with round='rs' (stochastic rounding)")
    target = check_dtype("T.cast", dtype)
    from ..literals import narrow_left_shift_dtype, narrow_left_shift_error

    narrow = narrow_left_shift_dtype(value)
    if narrow is not None:  # T.cast(h << 8, "uint32") of a uint16 h: C keeps the high bits
        wide = tvm.DataType(str(target))
        if wide.lanes == 1 and wide.is_integer and wide.bits > narrow.bits:
            raise narrow_left_shift_error(narrow, value.a, value.b, target)
    if round in ("", "rn") and sat:
        return tirx.Cast(target, value) if isinstance(value, tirx.Expr) else tvm.tirx.const(value, target)
    value = value if isinstance(value, tirx.Expr) else tvm.tirx.const(value, "float32")
    if rbits is not None and not isinstance(rbits, tirx.Expr):
        rbits = tvm.tirx.const(rbits, "uint32")
    extra = [rbits] if rbits is not None else []
    loc = tvm.ir.StringImm(_caller_location() or "<unknown>")
    return tirx.call_extern(target, ROUNDED_CAST, value, tvm.ir.StringImm(round or "rn"), bool(sat), loc, *extra)
