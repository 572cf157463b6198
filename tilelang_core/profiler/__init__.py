"""``tilelang.profiler``: benchmark and check compiled kernels, time any callable.

* ``kernel.get_profiler(tensor_supply_type, dynamic_sizes)`` -> :class:`Profiler`, which makes
  inputs for the kernel (:class:`TensorSupplyType`) on its device family and offers
  ``do_bench``, ``assert_allclose``, ``manual_assert_close``, ``assert_consistent``, ``run_once``;
* :func:`do_bench` times any callable with the timer of its device family (wall clock on CPU,
  device events, CUDA graphs or CUPTI on GPUs). See docs/profiler.md.

Importing this package imports no torch and no TVM.
"""

from __future__ import annotations

from .bench import TIMERS, BenchmarkError, BenchmarkTimeout, do_bench, resolve_timer
from .compare import assert_tensors_close
from .profiler import Profiler, ProfilerError
from .supply import TensorSupplyError, TensorSupplyType, make_tensor

__all__ = [
    "TIMERS",
    "BenchmarkError",
    "BenchmarkTimeout",
    "Profiler",
    "ProfilerError",
    "TensorSupplyError",
    "TensorSupplyType",
    "assert_tensors_close",
    "do_bench",
    "make_tensor",
    "resolve_timer",
]
