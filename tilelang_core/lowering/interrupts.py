"""A Ctrl-C that arrived while TVM ran one of this pipeline's Python passes.

Python raises ``KeyboardInterrupt`` in whatever Python code runs when SIGINT arrives; during
lowering that is often a pass written in Python (a ``prim_func_pass``/``module_pass`` callback)
that TVM called from C++. TVM's FFI forwards an exception it has no type for as an empty
``RuntimeError``, so the interrupt came back as ``RuntimeError('')``, and ``lower`` reported it
as "lowering kernel ... failed: " (the autotuner then skipped the configuration as one that does
not compile and went on). :func:`interrupted_in_callback` recognises such an error, and ``lower``
raises ``KeyboardInterrupt`` instead.
"""

from __future__ import annotations

import traceback

__all__ = ["interrupted_in_callback"]

#: The frame TVM's FFI adds to the traceback of an exception raised in a Python callback.
_FORWARDING_FRAME = "ForwardPyErrorToFFI"


def interrupted_in_callback(exc: BaseException) -> bool:
    """Whether ``exc`` is an exception without text that TVM's FFI forwarded from a Python callback
    (a ``KeyboardInterrupt`` or a ``SystemExit`` of no code there; every ``Exception`` type
    this pipeline raises has a message and keeps its own type or text)."""
    if type(exc) is not RuntimeError or str(exc).strip():
        return False
    return any(_FORWARDING_FRAME in frame.name for frame in traceback.extract_tb(exc.__traceback__))
