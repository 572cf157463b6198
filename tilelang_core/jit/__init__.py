"""The JIT front end: ``tilelang.compile``, the :class:`JITKernel` it returns, ``@tilelang.jit``.

This package is itself callable: ``tilelang.jit`` *is* this module, and calling it is calling
:func:`tilelang_core.jit.decorator.jit` (``@tilelang.jit`` and ``@tilelang.jit(out_idx=-1)``).
That keeps ``tilelang.jit`` the decorator even after ``tilelang_core.jit.compile`` was imported,
which makes Python bind the subpackage to the name ``jit``. See docs/jit.md.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .decorator import jit

        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
