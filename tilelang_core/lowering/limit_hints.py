"""What to do about TVM's refusals to fold a constant past an integer type's limits.

TVM's simplifier rewrites expressions with constants at or near an integer type's limits into
ones holding a constant the type cannot hold, then stops with its own check text: ``s - 10 <
2147483640`` becomes ``s < 2147483650`` ("Literal value 2147483650 exceeds range of int32"),
``x // -2147483648`` negates the divisor on ``llvm``, and a negative literal meeting an unsigned
value stops it with "cannot make uint from negative value -1". :func:`limit_hint` recognizes
these texts so that the :class:`~tilelang_core.errors.LoweringError` the pipeline raises (with the
kernel's line) also says what to change.
"""

from __future__ import annotations

import re

__all__ = ["limit_hint"]

_PAST_RANGE = re.compile(r"Literal value (-?\d+) exceeds range of (u?int\d+)")
_NEGATIVE_UNSIGNED = ("cannot make uint from negative value", "is negative for unsigned integer type",
                      "which will cause a negative uint")


def limit_hint(text: str) -> str:
    """A sentence to append to a lowering failure's ``text``, or ``""`` when it is not one of
    TVM's integer-limit refusals."""
    past = _PAST_RANGE.search(text)
    if past:
        value, dtype = past.groups()
        return (f" (the constant {value} does not fit {dtype}: either the kernel has it as a literal beside a value"
                f" of type {dtype} (x + 2**40 of an int32 x: compute in int64, T.cast(x, \"int64\") + 2**40), or TVM's"
                f" simplifier made it while rewriting an expression with a constant at or near the limits of {dtype},"
                f" such as 's - 10 < 2147483640', which it turns into 's < 2147483650': compute that expression in a"
                f" wider type, e.g. T.cast(s, \"int64\") - 10 < 2147483640, or keep its constants away from the limits)")
    if any(marker in text for marker in _NEGATIVE_UNSIGNED):
        return (" (a negative constant met an unsigned value in this kernel, or TVM's simplifier made one: write"
                " the constant as the unsigned value it stands for, e.g. T.uint32(4294967295) for -1, or cast a"
                " typed one explicitly, T.cast(T.int32(-1), \"uint32\"))")
    return ""
