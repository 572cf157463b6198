"""``with set_autotune_inputs(a, b):``: the inputs tuning uses instead of generated ones."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional

_local = threading.local()


def _stack() -> list[list[Any]]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextlib.contextmanager
def set_autotune_inputs(*inputs: Any) -> Iterator[None]:
    """Tune kernels called inside this block on these inputs (tensors and scalars, in the
    order the kernel takes its non-output parameters).

    ``set_autotune_inputs([a, b])`` and ``set_autotune_inputs(a, b)`` are the same. Needed for
    kernels with scalar parameters or dynamic dimensions, or to tune on real data. The inputs
    become part of the tuning cache key by shape, dtype and device (scalars by value).
    """
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        items = list(inputs[0])
    else:
        items = list(inputs)
    stack = _stack()
    stack.append(items)
    try:
        yield
    finally:
        stack.pop()


def get_autotune_inputs() -> Optional[list[Any]]:
    """The inputs of the innermost :func:`set_autotune_inputs` block of this thread, or None."""
    stack = _stack()
    return list(stack[-1]) if stack else None


__all__ = ["get_autotune_inputs", "set_autotune_inputs"]
