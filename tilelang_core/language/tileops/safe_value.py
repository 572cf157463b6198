"""``T.annotate_safe_value({A: v})``: what reads outside ``A`` give, instead of 0.

``T.copy`` never reads outside its source buffer: the destination gets 0 there (partial tiles
at the edges of a matrix). After ``T.annotate_safe_value({A: -99})`` the destination gets
``-99`` (converted to the destination's dtype) for the parts outside ``A``, and an element copy
``T.copy(A[i, j], B[i, j])`` and the loads of ``A`` in ``T.Parallel`` loops
(``S[i] = A[i - 10]``) are guarded the same way; for a tensor (global memory) every load the
kernel makes outside it gives the value, in serial loops too (lowering/access_guards.py, which
guards such loads with 0 otherwise). The annotation holds in the scope it is
written in (the kernel, or the ``T.sblock`` / ``with`` block around it), for ``T.copy`` calls
that follow it; an inner annotation of the same buffer wins.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ...errors import KernelDefinitionError

__all__ = ["SAFE_VALUE_CALL", "annotate_safe_value", "safe_value"]

#: Marker call ``tl.safe_value(address_of(A[0, ..]), value)`` the annotation leaves in the kernel: the
#: frontend guards the loads of ``A`` in the ``T.Parallel`` loops that follow it in its scope
#: (lowering/frontend.py) and drops the marker.
SAFE_VALUE_CALL = "tl.safe_value"

#: Active annotations: (builder, frame, buffer, value), most recent last.
_ACTIVE: list[tuple[Any, Any, Any, Any]] = []


def _scope() -> tuple[Any, Any]:
    from tvm.script.ir_builder import IRBuilder

    builder = IRBuilder.current()
    frames = list(builder.frames)
    return builder, (frames[-1] if frames else None)


def _in_scope(builder: Any, frame: Any) -> bool:
    from tvm.script.ir_builder import IRBuilder

    if not IRBuilder.is_in_scope():
        return False
    current = IRBuilder.current()
    if not current.same_as(builder):
        return False
    return frame is None or any(f.same_as(frame) for f in current.frames)


def annotate_safe_value(safe_value_map: Mapping[Any, Any]) -> None:
    """``T.annotate_safe_value({buffer: value, ...})``: the value of reads outside each buffer (see the module docstring).

    :raises KernelDefinitionError: not a dict of buffers to scalar values (a ``TypeError``).
    """
    from tvm import tirx
    from tvm.tirx.buffer import is_buffer_var
    from tvm.tirx.script.builder import ir as _B

    if not isinstance(safe_value_map, Mapping):
        raise KernelDefinitionError(f"T.annotate_safe_value expects a dict {{buffer: value}}, got {type(safe_value_map).__name__}")
    builder, frame = _scope()
    _ACTIVE[:] = [entry for entry in _ACTIVE if _in_scope(entry[0], entry[1])]
    for buffer, value in safe_value_map.items():
        if not is_buffer_var(buffer):
            raise KernelDefinitionError(f"T.annotate_safe_value: keys must be buffers (kernel parameters, T.alloc_*), got {buffer!r}")
        if not isinstance(value, (int, float, bool)) and getattr(getattr(value, "ty", None), "dtype", None) is None:
            raise KernelDefinitionError(f"T.annotate_safe_value: the value for '{buffer.name}' must be a scalar, got {type(value).__name__}")
        _ACTIVE.append((builder, frame, buffer, value))
        _B.evaluate(
            tirx.call_extern("int32", SAFE_VALUE_CALL, tirx.address_of(buffer[tuple(0 for _ in buffer.shape)]), value)
        )


def safe_value(buffer: Any) -> Optional[Any]:
    """The annotated value of reads outside ``buffer`` where the kernel is being written now, or None."""
    for builder, frame, annotated, value in reversed(_ACTIVE):
        if annotated.same_as(buffer) and _in_scope(builder, frame):
            return value
    return None
