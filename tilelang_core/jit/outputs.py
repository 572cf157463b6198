"""``out_idx``: normalise it, and bind every symbol from an input rather than an output."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from ..artifact import KernelArtifact, ScalarParam, SymbolBinding, TensorParam
from ..errors import OutIdxError
from ..symbolic import free_symbols
from ..warning_location import warn

OutIdx = Union[None, int, Sequence[int]]


class UnwrittenOutputWarning(UserWarning):
    """``out_idx`` names a parameter the kernel never writes: each call returns the memory
    allocated for it as it was (TileLang allows it; an unused output of a kernel variant)."""


def declared_out_idx(prim_func: Any, out_idx: OutIdx) -> OutIdx:
    """``out_idx`` for compiling ``prim_func``: the indices of the ``T.empty`` outputs a
    ``T.prim_func`` returns (its attribute ``tilelang_out_idx``, jit/eager.py), else ``out_idx``.

    :raises OutIdxError: (a ``ValueError``) both: the kernel already says which parameters are
        outputs, so an ``out_idx`` as well is a conflict (TileLang's rule).
    """
    from .eager import OUT_IDX_ATTR

    attrs = getattr(prim_func, "attrs", None)
    if attrs is None or OUT_IDX_ATTR not in attrs:
        return out_idx
    declared = [int(i) for i in attrs[OUT_IDX_ATTR]]
    if out_idx is not None:
        name = getattr(prim_func, "__name__", None) or "kernel"
        raise OutIdxError(
            f"Out index conflict: kernel {name!r} returns its T.empty outputs (out_idx {declared}) and "
            f"out_idx={out_idx!r} was given as well; leave out_idx out"
        )
    return declared


def normalize_out_idx(out_idx: OutIdx, artifact: KernelArtifact) -> list[int]:
    """Non-negative, checked output indices (an int, a negative int, a list, or None)."""
    n = len(artifact.params)
    if out_idx is None:
        return []
    raw = [out_idx] if isinstance(out_idx, int) and not isinstance(out_idx, bool) else out_idx
    if not isinstance(raw, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        raise OutIdxError(f"out_idx must be an int or a list of ints, got {out_idx!r}")
    result: list[int] = []
    names = [p.name for p in artifact.params]
    for i in raw:
        if not -n <= i < n:
            raise OutIdxError(
                f"out_idx {i} is out of range for kernel {artifact.name!r} with {n} parameters ({', '.join(names)}); "
                f"use an index in [{-n}, {n - 1}]"
            )
        idx = i % n
        if idx in result:
            raise OutIdxError(f"out_idx names parameter {idx} ({names[idx]!r}) more than once: {out_idx!r}")
        if not isinstance(artifact.params[idx], TensorParam):
            raise OutIdxError(f"out_idx {i} names {names[idx]!r}, a scalar; only tensor parameters can be outputs")
        result.append(idx)
    return result


def warn_unwritten_outputs(artifact: KernelArtifact, out_idx: Sequence[int]) -> None:
    """Warn (:class:`UnwrittenOutputWarning`) when ``out_idx`` names parameters ``artifact``'s kernel
    never writes: each call returns the memory allocated for them as it was. TileLang allows it
    (upstream's kda/wy_fast.py returns an output only one variant of its kernel writes). An
    output with a static zero dimension is not named: it has nothing to write."""
    # outputs: TensorParams. One with a static zero dimension has no element to write (the loops
    # over it were folded away, so nothing writes it; every other size of the kernel may)
    unwritten = [artifact.params[i].name for i in out_idx
                 if not artifact.params[i].written and 0 not in artifact.params[i].shape]
    if not unwritten:
        return

    them = "it" if len(unwritten) == 1 else "them"
    warn(
        f"out_idx names {', '.join(repr(n) for n in unwritten)}, which kernel {artifact.name!r} never writes: each "
        f"call returns uninitialised memory there (torch.empty). Leave {them} out of out_idx (pass {them} as input), "
        f"or write {them} in the kernel",
        UnwrittenOutputWarning,
    )


def bind_symbols_from_inputs(artifact: KernelArtifact, out_idx: list[int]) -> KernelArtifact:
    """A copy of ``artifact`` whose symbols are all bound from non-output parameters.

    Outputs may use symbols in their shapes (``n + 1``, ``2 * n``) and may come before the input
    that binds them; a symbol that no input binds raises :class:`OutIdxError`.
    """
    if not out_idx:
        return artifact
    outputs = set(out_idx)
    bindings: list[SymbolBinding] = []
    for binding in artifact.symbols:
        if binding.param_index not in outputs:
            bindings.append(binding)
            continue
        replacement = _input_binding(artifact, binding.name, outputs, binding.dtype)
        if replacement is None:
            users = [
                artifact.params[i].name
                for i in out_idx
                if any(binding.name in free_symbols(d) for d in artifact.params[i].shape)
                or any(binding.name in free_symbols(d) for d in (getattr(artifact.params[i], "strides", None) or ()))
            ]
            raise OutIdxError(
                f"output {', '.join(repr(u) for u in users)} of kernel {artifact.name!r} has a shape or strides that "
                f"use symbol {binding.name!r}, but no input binds it; give an input with that dimension, or pass the "
                f"output yourself (leave it out of out_idx)"
            )
        bindings.append(replacement)
    return artifact.replace(symbols=bindings)


def _input_binding(artifact: KernelArtifact, symbol: str, outputs: set[int], dtype: str) -> Optional[SymbolBinding]:
    for index, param in enumerate(artifact.params):
        if index in outputs:
            continue
        if isinstance(param, ScalarParam) and param.name == symbol:
            return SymbolBinding(name=symbol, param_index=index, dim=None, dtype=dtype)
        if isinstance(param, TensorParam):
            for dim, extent in enumerate(param.shape):
                if extent == symbol:
                    return SymbolBinding(name=symbol, param_index=index, dim=dim, dtype=dtype)
    for index, param in enumerate(artifact.params):  # else a stride of an input
        if index not in outputs and isinstance(param, TensorParam):
            for dim, stride in enumerate(param.strides or []):
                if stride == symbol:
                    return SymbolBinding(name=symbol, param_index=index, dim=dim, stride=True, dtype=dtype)
    return None
