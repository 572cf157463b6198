"""``tilelang.autotune`` and ``tilelang.autotuner``: pick a kernel's tile sizes by timing them.

* ``@tilelang.autotune(configs=[...])`` above ``@tilelang.jit``: each distinct call is tuned
  once (or its stored result read back) and returns the best kernel;
* :class:`AutoTuner` (``AutoTuner.from_kernel(fn, configs).set_compile_args(...)
  .set_profile_args(...).run()``) returns an :class:`AutotuneResult`;
* ``set_autotune_inputs(...)``: tune on given inputs.

Works with any installed execution backend; results are stored as JSON in the kernel cache
directory; ``executor=`` spreads candidates over a Dask cluster. See docs/autotune.md.
Importing this package imports no torch and no TVM.
"""

from __future__ import annotations

from .capture import get_autotune_inputs, set_autotune_inputs
from .decorator import AutoTuneImpl, autotune
from .param import (
    AutotuneConfigError,
    AutotuneError,
    AutotuneResult,
    CallbackError,
    CompileArgs,
    MissingTuningInputs,
    NestedTuningError,
    ProfileArgs,
    TrialResult,
)
from .tuner import AutoTuner

__all__ = [
    "AutoTuneImpl",
    "AutoTuner",
    "AutotuneConfigError",
    "AutotuneError",
    "AutotuneResult",
    "CallbackError",
    "CompileArgs",
    "MissingTuningInputs",
    "NestedTuningError",
    "ProfileArgs",
    "TrialResult",
    "autotune",
    "get_autotune_inputs",
    "set_autotune_inputs",
]
