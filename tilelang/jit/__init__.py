"""``tilelang.jit``: the ``@tilelang.jit`` decorator, and the module TileLang code imports from.

``@tilelang.jit`` / ``@tilelang.jit(out_idx=-1)`` work because this package is callable (calling
it is calling :func:`tilelang_core.jit.decorator.jit`). ``from tilelang.jit import jit, compile,
par_compile, JITKernel`` gives the same objects as ``tilelang.<name>``; ``JITImpl`` (upstream's
name of the class of ``@tilelang.jit`` functions) is :class:`~tilelang_core.jit.decorator.JitFunction`. Attributes load on first
use, so importing this module imports no TVM and no torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAMES = {
    "jit": ("tilelang_core.jit.decorator", "jit"),
    "JitFunction": ("tilelang_core.jit.decorator", "JitFunction"),
    "JITImpl": ("tilelang_core.jit.decorator", "JitFunction"),  # upstream's name of the same class
    "TensorSpec": ("tilelang_core.jit.decorator", "TensorSpec"),
    "compile": ("tilelang_core.jit.compile", "compile"),
    "JITKernel": ("tilelang_core.jit.kernel", "JITKernel"),
    "par_compile": ("tilelang_core.jit.parallel", "par_compile"),
}

__all__ = sorted(_NAMES)

#: Submodules reachable as attributes (loaded on first use, as the names above).
_SUBMODULES = ("diagnostics",)


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tilelang_core.jit.decorator import jit

        return jit(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in _SUBMODULES:  # tilelang.jit.diagnostics.jit_phase without importing it first
            return importlib.import_module(f"{__name__}.{name}")
        try:
            module_name, attr = _NAMES[name]
        except KeyError:
            raise AttributeError(f"module 'tilelang.jit' has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module_name), attr)
        setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_NAMES) | set(_SUBMODULES))


sys.modules[__name__].__class__ = _CallableModule
