"""``import tilelang``: the user-facing name of TileLang-Core.

A thin facade over :mod:`tilelang_core`; ``tilelang.compile``, ``tilelang.lower``,
``tilelang.language``, ``from tilelang import tvm`` and everything else resolve lazily, so
importing this package imports no TVM, no torch and no backend plugin.

The modules TileLang code imports from exist here too: ``tilelang.language``
(with ``tilelang.language.dtypes`` & co.), ``tilelang.jit``, ``tilelang.testing``,
``tilelang.cache``, ``tilelang.engine``, ``tilelang.transform``, ``tilelang.env``; see
docs/compatibility.md for what is and is not provided.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import Any, Optional, Union

import tilelang_core as _core
from tilelang_core import PLUGIN_API_VERSION, __version__, hookimpl  # noqa: F401

#: Submodules of this package, imported on first attribute access.
_SUBMODULES = ("language", "jit", "testing", "cache", "engine", "transform", "env", "layout", "profiler", "autotuner", "ir", "errors",
               "math")

#: Other names TileLang code uses: name -> (module, attribute).
_NAMES = {
    "PassConfigKey": ("tilelang_core.lowering.configs", "PassConfigKey"),
    "cdiv": ("tilelang.math", "cdiv"),
    "next_power_of_2": ("tilelang.math", "next_power_of_2"),  # upstream's `from .math import *`
    "dtypes": ("tilelang_core.language.dtypes", None),
    # TVM, with the names TileLang code expects from its bundled TVM (tvm.tirx.Call, tvm.arith, ...)
    "tvm": ("tilelang_core.language.tvm_names", "tvm"),
    "DataType": ("tvm", "DataType"),  # upstream re-exports its TVM's (from tilelang import DataType)
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"tilelang.{name}")
    if name in _NAMES:
        module_name, attr = _NAMES[name]
        module = importlib.import_module(module_name)
        value = module if attr is None else getattr(module, attr)
    else:
        value = getattr(_core, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_core)) | set(_SUBMODULES) | set(_NAMES))


#: The ``tilelang`` logger: the parent of every logger of this package (``tilelang.autotuner``,
#: ``tilelang.jit.diagnostics``); it has no handler of its own, so nothing prints unless the
#: program configures logging.
logger = logging.getLogger("tilelang")


def set_log_level(level: Union[int, str]) -> None:
    """Set the level of the ``tilelang`` logger (and so of every ``tilelang.*`` logger).

    :param level: a ``logging`` level (``logging.INFO``) or its name (``"WARNING"``, any case).
    :raises ValueError: ``level`` is not a level ``logging`` knows, naming the ones it does.
    """
    if isinstance(level, str):
        number = logging.getLevelName(level.upper())
        if not isinstance(number, int):
            raise ValueError(
                f"tilelang.set_log_level: unknown level {level!r}; use one of DEBUG, INFO, WARNING, ERROR, "
                "CRITICAL or a logging level number"
            )
        level = number
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ValueError(f"tilelang.set_log_level: level must be a logging level name or a non-negative int, got {level!r}")
    logger.setLevel(level)


def disable_cache() -> None:
    """Switch the kernel cache off for this process (and the processes it starts).

    Sets ``TILELANG_DISABLE_CACHE=1``; kernels compiled from now on are neither looked up nor
    stored (docs/cache.md). :func:`enable_cache` switches it back on.
    """
    os.environ["TILELANG_DISABLE_CACHE"] = "1"


def enable_cache() -> None:
    """Switch the kernel cache back on after :func:`disable_cache` (clears ``TILELANG_DISABLE_CACHE``)."""
    os.environ.pop("TILELANG_DISABLE_CACHE", None)


def is_cache_enabled() -> bool:
    """Whether ``tilelang.compile`` uses the kernel cache now."""
    from tilelang_core.cache.location import cache_disabled

    return not cache_disabled()


class _CoreAliasFinder(MetaPathFinder, Loader):
    """Makes ``tilelang.<package>.<sub>`` the very module ``tilelang_core.<package>.<sub>`` for the
    packages this package *is* the core's (``tilelang.language``, ``tilelang.autotuner``,
    ``tilelang.profiler``, ``tilelang.cache``: each replaces itself in ``sys.modules``).

    Without this, importing ``tilelang.language.dtypes`` or ``tilelang.autotuner.param`` (as
    TileLang code does: ``from tilelang.autotuner.param import CompileArgs``) loaded a second copy
    of the core's submodule under the other name, with classes of its own: an ``AutotuneResult``
    that was not the tuner's, relative imports that failed.
    """

    _PREFIXES = {f"tilelang.{name}.": f"tilelang_core.{name}." for name in ("language", "autotuner", "profiler", "cache")}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Optional[ModuleSpec]:
        for prefix, core in self._PREFIXES.items():
            if fullname.startswith(prefix):
                real = core + fullname[len(prefix) :]
                if importlib.util.find_spec(real) is None:
                    return None
                return ModuleSpec(fullname, self, origin=real)
        return None

    def create_module(self, spec: ModuleSpec) -> Any:
        module = importlib.import_module(str(spec.origin))
        spec.loader_state = module.__spec__  # the import system replaces __spec__; put it back below
        return module

    def exec_module(self, module: Any) -> None:
        # the real module is already executed; only undo the import system's __spec__ change
        alias_spec = module.__spec__
        if isinstance(alias_spec, ModuleSpec) and alias_spec.loader is self and alias_spec.loader_state is not None:
            module.__spec__ = alias_spec.loader_state


if not any(isinstance(f, _CoreAliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _CoreAliasFinder())


class _TvmAliasFinder(MetaPathFinder, Loader):
    """``from tvm import arith`` (and ``import tvm.tirx.stmt_functor``) after ``import tilelang``.

    Those are modules of upstream TileLang's bundled TVM that TVM 0.27 spells differently
    (:mod:`tilelang_core.language.tvm_names`). Their aliases are installed when
    ``tilelang.language`` or ``tilelang.tvm`` is first used; a test that imports them right after
    ``import tilelang`` reaches here first, and this installs them then. Nothing happens until
    such a module is imported, so ``import tilelang`` still imports no TVM.
    """

    _NAMES = ("tvm.arith", "tvm.tirx.stmt_functor")

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Optional[ModuleSpec]:
        if fullname not in self._NAMES:
            return None
        from tilelang_core.language import tvm_names

        tvm_names.install()
        return ModuleSpec(fullname, self) if fullname in sys.modules else None

    def create_module(self, spec: ModuleSpec) -> Any:
        return sys.modules[spec.name]

    def exec_module(self, module: Any) -> None:
        return None  # the aliased module is TVM's own, already executed


if not any(isinstance(f, _TvmAliasFinder) for f in sys.meta_path):
    sys.meta_path.append(_TvmAliasFinder())


#: Upstream TileLang's modules this package does not provide: what each is (docs/compatibility.md).
_NOT_PROVIDED = {
    "tilelang.carver": "hardware-aware tile-size search, built on its C++ library (libtilelang)",
    "tilelang.analysis": "analyses of its own compiler, built on its C++ library (libtilelang)",
    "tilelang.tools": "compiler tooling (lower traces, pass visualisers)",
    "tilelang._ffi_api": "binding of its C++ library (libtilelang)",
    "tilelang.tileop": "tile-operator classes of its compiler (the tile operators here: docs/tile-operators.md)",
    "tilelang.backend": "target and pass-pipeline registry (targets here are TVM's; execution backends are "
                        "plugins, listed by `tilelang backends`)",
    "tilelang.jit.adapter": "execution adapters (execution backends here are plugins, listed by `tilelang backends`)",
    "tilelang.jit.abi": "host calling convention (each execution backend plugin has its own)",
    "tilelang.language.eager": "AST builder (the eager style of @tilelang.jit here is a source transformation "
                               "read by TVMScript, docs/jit.md)",
    "tilelang.instrumentation": "compiler instrumentation",
    "tilelang.contrib.cutedsl": "CuTe DSL code generator",
    "tilelang.autodd": "test-case reducer for its compiler's failures",
    "tilelang.cache.kernel_cache": "kernel cache class (this package's cache API is tilelang.cache itself: "
                                   "clear, info, cache_dir, KernelCache; docs/cache.md)",
    "tilelang.utils.language": "buffer helpers of its tile operators' lowering (is_shared, retrieve_ptr, ...; a "
                               "buffer's scope here is buffer.scope())",
    "tilelang.utils.device": "device flags (IS_CUDA, get_current_device, ...; use torch.cuda.is_available() and "
                             "torch.cuda.current_device())",
    "tilelang.utils.target": "target helpers (determine_target, ...; targets here are TVM's, and "
                             "tilelang.compile(target='auto') picks one from the tensors' device)",
    "tilelang.utils.pass_diff": "pass-by-pass IR diff tool of its compiler",
}


class _NotProvidedFinder(MetaPathFinder):
    """``import tilelang.carver`` (and upstream's other modules in :data:`_NOT_PROVIDED`): a
    ``ModuleNotFoundError`` saying what the module is upstream and that this package has none, as a
    missing ``T.`` name says (before: Python's bare "No module named ..."). Consulted last, so it
    never hides a module that exists; ``importlib.util.find_spec`` of such a name raises it too."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Optional[ModuleSpec]:
        for name, what in _NOT_PROVIDED.items():
            if fullname == name or fullname.startswith(name + "."):
                raise ModuleNotFoundError(
                    f"No module named {fullname!r}: {name} is upstream TileLang's {what}, which tilelang-core "
                    f"does not provide (docs/compatibility.md)",
                    name=fullname,
                )
        return None


if not any(isinstance(f, _NotProvidedFinder) for f in sys.meta_path):
    sys.meta_path.append(_NotProvidedFinder())
