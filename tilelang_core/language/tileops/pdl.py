"""Programmatic dependent launch (PDL) of the kernel language (TileLang names).

Two kernels launched one after the other on a stream may overlap on Hopper GPUs (sm_90 and
later) when the second is launched with programmatic stream serialization:

- ``T.pdl_trigger()``: this block has written what the next kernel in the stream needs; that
  kernel may start (CUDA ``griddepcontrol.launch_dependents``, i.e.
  ``cudaTriggerProgrammaticLaunchCompletion()``).
- ``T.pdl_sync()``: wait until the previous kernel in the stream has finished and its writes to
  global memory are visible (CUDA ``griddepcontrol.wait``, i.e.
  ``cudaGridDependencySynchronize()``).

Both are statements without arguments. They lower to nothing where the launches are serialized
anyway: CUDA architectures before sm_90, and CPU targets (c, llvm). See
:mod:`tilelang_core.lowering.pdl` and docs/tile-operators.md.
"""

from __future__ import annotations

from typing import Any

from ._common import OperandTypeError, fail
from .intrinsics import math_call

#: Marker names (lowering/pdl.py).
TRIGGER = "pdl_trigger"
SYNC = "pdl_sync"
MARKERS = (TRIGGER, SYNC)


def _no_arguments(name: str, args: tuple, kwargs: dict) -> None:
    if args or kwargs:
        given = list(args) + [f"{k}={v!r}" for k, v in kwargs.items()]
        fail(f"T.{name}", given, f"T.{name}() takes no arguments, {len(given)} given: write T.{name}()",
             OperandTypeError)


def pdl_trigger(*args: Any, **kwargs: Any) -> Any:
    """Let the next kernel in the stream start: this block has done the work it depends on.

    A statement, no arguments. The dependent kernel still waits in ``T.pdl_sync()`` until this
    kernel has finished entirely; the trigger only lets its blocks be scheduled (and run the
    code before their ``T.pdl_sync()``) earlier. CUDA sm_90 and later: ``griddepcontrol.
    launch_dependents``; earlier CUDA architectures and CPU targets: nothing (their launches are
    serialized).
    """
    _no_arguments(TRIGGER, args, kwargs)
    return math_call("int32", TRIGGER)


def pdl_sync(*args: Any, **kwargs: Any) -> Any:
    """Wait until the previous kernel in the stream has completed and its memory is visible.

    A statement, no arguments. Global memory the previous kernel writes must be read after it.
    CUDA sm_90 and later: ``griddepcontrol.wait``, and the kernel's pointer parameters lose
    ``__restrict__`` (and its ``T.__ldg`` loads become plain loads) so that the compiler neither
    moves reads above the wait nor reads through the non-coherent cache; earlier CUDA
    architectures and CPU targets: nothing (their launches are serialized).
    """
    _no_arguments(SYNC, args, kwargs)
    return math_call("int32", SYNC)
