"""``tilelang.math``: integer helpers TileLang kernels use while choosing tile sizes in Python.

``next_power_of_2(x)`` is the smallest power of two that is at least ``x`` (1 for ``x <= 1``);
``cdiv(a, b)`` is ``a / b`` rounded up, for Python ints (``T.ceildiv`` is the kernel-side one).
"""

from __future__ import annotations

import operator

__all__ = ["cdiv", "next_power_of_2"]


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x``: ``next_power_of_2(48) == 64``, ``next_power_of_2(64) == 64``.

    :raises TypeError: ``x`` is not an integer.
    """
    n = operator.index(x)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """``a / b`` rounded up, for Python ints: ``cdiv(10, 4) == 3``."""
    return -(operator.index(a) // -operator.index(b))
