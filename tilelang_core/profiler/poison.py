"""Outputs of a checked call start as NaN (integers: their largest value), not as old memory.

A kernel compiled with ``out_idx`` allocates its outputs itself (``torch.empty`` in its
backend's dispatcher), and the allocator hands back memory freed moments before: often the
previous candidate's output, or a reference's temporary, holding the right answer. A kernel
that writes only part of its output then passes a correctness check on values it never wrote.

:func:`poisoned_allocations` closes that hole for every backend without a hook in any of them:
while it is active, torch fills each tensor its ``empty`` factories return (``torch.empty``,
``empty_like``, ``empty_strided`` and their C++ and DLPack-allocator forms, on CPU and CUDA) with
NaN, or the dtype's largest value for integers and ``True`` for bools. That is torch's
``torch.use_deterministic_algorithms`` with ``torch.utils.deterministic.fill_uninitialized_memory``;
only the checked call runs under it (never a timed one, never the reference), in ``warn_only``
mode so that no operation is refused. The setting is process-wide in torch, so entering and
leaving are counted across threads and the caller's own setting is restored when the last one
leaves.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator, Optional
from ..fork_locks import renew_after_fork

_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_lock")  # a fork child gets a fresh one
_depth = 0
_saved: Optional[tuple[bool, bool, bool]] = None


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Fill the memory of every tensor torch allocates in this block (see the module's doc)."""
    import torch
    import torch.utils.deterministic as fill_module

    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
                bool(fill_module.fill_uninitialized_memory),
            )
            if not _saved[0]:  # the caller's own strict setting is kept as it is
                _set_deterministic(True, warn_only=True)
            fill_module.fill_uninitialized_memory = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                enabled, warn_only, fill = _saved
                _set_deterministic(enabled, warn_only=warn_only)
                fill_module.fill_uninitialized_memory = fill
                _saved = None


def _set_deterministic(mode: bool, *, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms(mode, warn_only=warn_only)``, without its import of
    ``torch._inductor`` where inductor is not loaded yet.

    The public function also sets ``torch._inductor.config.deterministic``, and importing that
    module the first time took 2.3 s of the first checked call of every process (torch 2.13 on
    the 2-core development machine). Where inductor is already loaded (the process uses
    ``torch.compile``), the public function runs; where torch lacks the setter it calls, too.
    """
    import torch

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


def unwritten_elements(actual: object, expected: object) -> int:
    """How many elements of the kernel's output ``actual`` hold the fill value where
    ``expected`` does not: elements the kernel most likely never wrote (0 for non-tensors)."""
    return unwritten_positions(actual, expected, limit=0)[0]


def unwritten_positions(actual: object, expected: object, limit: int = 8) -> tuple[int, list[tuple[int, ...]]]:
    """``(count, positions)``: how many elements of ``actual`` hold the fill value where
    ``expected`` does not (see :func:`unwritten_elements`) and the indices of the first
    ``limit`` of them, in row-major order."""
    import torch

    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor) or actual.shape != expected.shape:
        return 0, []
    a, e = _plain(actual), _plain(expected)
    if a.dtype == torch.bool:
        return 0, []  # True is the fill value, and too common a result to point at
    try:
        if a.dtype.is_floating_point or a.dtype.is_complex:
            hit = torch.isnan(a)
            if e.dtype.is_floating_point or e.dtype.is_complex:
                hit &= ~torch.isnan(e)
        else:
            top = torch.iinfo(a.dtype).max
            hit = (a == top) & (e != top)
        count = int(hit.sum().item())
    except (RuntimeError, TypeError):  # a dtype torch cannot compare this way: no hint, the check stands
        return 0, []
    if not count or limit <= 0:
        return count, []
    return count, [tuple(p) for p in torch.nonzero(hit)[:limit].tolist()]  # row-major order


def describe_unwritten(count: int, positions: list[tuple[int, ...]], total: int) -> str:
    """The sentence a check says about ``count`` unwritten elements (of ``total``) at ``positions``."""
    where = ", ".join(str(p[0]) if len(p) == 1 else str(p) for p in positions)
    more = ", ..." if count > len(positions) else ""
    return (
        f"{count} element(s) of the kernel's output still hold the value outputs are filled with before the checked "
        f"call (NaN; integers: their largest value), {count / max(total, 1):.2%} of {total}, at {where}{more}: the "
        f"kernel did not write them"
    )


def _plain(t: object) -> object:
    """``t`` on the CPU, float8 as float32 (no isnan there)."""
    import torch

    t = t.detach().cpu()  # type: ignore[attr-defined]
    return t.to(torch.float32) if "float8" in str(t.dtype) else t


__all__ = ["describe_unwritten", "poisoned_allocations", "unwritten_elements", "unwritten_positions"]
