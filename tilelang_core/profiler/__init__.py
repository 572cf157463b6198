"""``tilelang.profiler``: benchmark and check compiled kernels, time any callable.

* ``kernel.get_profiler(tensor_supply_type, dynamic_sizes)`` -> :class:`Profiler`, which makes
  inputs for the kernel (:class:`TensorSupplyType`) on its device family and offers
  ``do_bench``, ``assert_allclose``, ``manual_assert_close``, ``assert_consistent``, ``run_once``;
* :func:`do_bench` times any callable with the timer of its device family (wall clock on CPU,
  device events, CUDA graphs or CUPTI on GPUs). See docs/profiler.md.

Importing this package imports no torch and no TVM.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule; resolved on first use, so ``JITKernel`` (which needs only TensorSupplyType)
# does not import the timers and the profiler when a kernel is loaded from the cache
_LAZY = {
    "TIMERS": "bench",
    "BenchmarkError": "bench",
    "BenchmarkTimeout": "bench",
    "do_bench": "bench",
    "resolve_timer": "bench",
    "assert_tensors_close": "compare",
    "Profiler": "profiler",
    "ProfilerError": "profiler",
    "TensorSupplyError": "supply",
    "TensorSupplyType": "supply",
    "make_tensor": "supply",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tilelang_core.profiler' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
