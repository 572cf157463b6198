"""``import tilelang``: the user-facing name of TileLang-Core.

A thin facade over :mod:`tilelang_core`; ``tilelang.compile``, ``tilelang.lower``,
``tilelang.language``, ``from tilelang import tvm`` and everything else resolve lazily, so
importing this package imports no TVM, no torch and no backend plugin.
"""

from __future__ import annotations

from typing import Any

import tilelang_core as _core
from tilelang_core import PLUGIN_API_VERSION, __version__, hookimpl  # noqa: F401


def __getattr__(name: str) -> Any:
    if name == "language":
        import importlib

        return importlib.import_module("tilelang.language")
    value = getattr(_core, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_core)))
