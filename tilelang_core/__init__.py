"""tilelang_core: the minimal core of TileLang-Core.

Importing this package is cheap: it imports no TVM, no torch and no backend plugin. Heavy parts
(``compile``, ``lower``, ``language``, ``tvm``) load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import Any

from .hookspecs import PLUGIN_API_VERSION, hookimpl

__version__ = "0.1.0"

# attribute -> (module, attribute or None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "compile": ("tilelang_core.jit.compile", "compile"),
    "lower": ("tilelang_core.lowering", "lower"),
    "JITKernel": ("tilelang_core.jit.kernel", "JITKernel"),
    "KernelArtifact": ("tilelang_core.artifact", "KernelArtifact"),
    "language": ("tilelang_core.language", None),
    "tvm": ("tvm", None),
    "errors": ("tilelang_core.errors", None),
    "backends": ("tilelang_core.backends", None),
    "jit": ("tilelang_core.jit", None),  # a callable module: @tilelang.jit (see jit/__init__.py)
    "par_compile": ("tilelang_core.jit.parallel", "par_compile"),
    "load": ("tilelang_core.jit.export", "load"),
    "cache": ("tilelang_core.cache", None),
    "profiler": ("tilelang_core.profiler", None),
    "autotuner": ("tilelang_core.autotuner", None),
    "autotune": ("tilelang_core.autotuner", "autotune"),
    "TensorSupplyType": ("tilelang_core.profiler.supply", "TensorSupplyType"),
    "Profiler": ("tilelang_core.profiler", "Profiler"),  # tilelang.Profiler, as upstream exports it
    "devices": ("tilelang_core.devices", None),
}

__all__ = ["PLUGIN_API_VERSION", "hookimpl", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tilelang_core' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
