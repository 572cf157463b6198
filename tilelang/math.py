"""``tilelang.math``: integer helpers TileLang kernels use while choosing tile sizes in Python.

``next_power_of_2(x)`` is the smallest power of two that is at least ``x`` (1 for ``x <= 1``);
``cdiv(a, b)`` is ``a / b`` rounded up: an int for Python ints, ``T.ceildiv`` for kernel
expressions (``tilelang.cdiv`` is this function, as upstream).
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x``: ``next_power_of_2(48) == 64``, ``next_power_of_2(64) == 64``.

    :raises TypeError: ``x`` is not an integer.
    """
    n = operator.index(x)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: Any, b: Any) -> Any:
    """``a / b`` rounded up: ``cdiv(10, 4) == 3`` for Python ints; for kernel expressions
    (``cdiv(n, 128)`` with a dynamic ``n``) the expression ``T.ceildiv(a, b)``."""
    if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
        return -(operator.index(a) // -operator.index(b))
    from tilelang_core.language.core import ceildiv

    return ceildiv(a, b)
