"""``tilelang.env``: the environment variables TileLang-Core reads, as attributes of ``env``.

``from tilelang.env import env``; ``env.TILELANG_CACHE_DIR`` reads the variable (or its default)
when accessed, and assigning to it sets the variable for this process. ``env.disable_cache()``,
``env.enable_cache()`` and ``env.is_cache_enabled()`` are ``tilelang.disable_cache`` & co.
Variables upstream TileLang reads for its own compiler (CUTLASS and TVM paths, pass diffs, ...)
are not listed: nothing here reads them.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Optional

__all__ = ["env", "Environment", "get_default_target"]


class _Variable:
    """One environment variable: read on access, set on assignment (``None`` unsets it)."""

    def __init__(self, name: str, default: Optional[str], doc: str) -> None:
        self.name = name
        self.default = default
        self.__doc__ = doc

    def __get__(self, instance: Any, owner: Any) -> Any:
        if instance is None:
            return self
        if self.name == "TILELANG_CACHE_DIR" and self.name not in os.environ:
            from tilelang_core.cache import cache_dir

            return str(cache_dir())
        return os.environ.get(self.name, self.default)

    def __set__(self, instance: Any, value: Any) -> None:
        if value is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = str(value)


class Environment:
    """The variables that change what TileLang-Core does (docs/cache.md, docs/pipeline.md)."""

    TILELANG_CACHE_DIR = _Variable("TILELANG_CACHE_DIR", None, "Directory of the kernel cache.")
    TILELANG_DISABLE_CACHE = _Variable("TILELANG_DISABLE_CACHE", "0", "1 turns the kernel cache off.")
    CUDA_HOME = _Variable("CUDA_HOME", None, "CUDA toolkit location, for backends that compile CUDA.")
    TILELANG_DEFAULT_TARGET = _Variable(
        "TILELANG_DEFAULT_TARGET", "auto",
        "The target ``target='auto'`` means: a target string or a JSON object (docs/jit.md).",
    )
    TILELANG_EXECUTION_BACKEND = _Variable(
        "TILELANG_EXECUTION_BACKEND", "auto",
        "The execution backend of a compile that names none (``tilelang.compile``, ``@tilelang.jit``, the autotuner).",
    )
    TILELANG_VERBOSE = _Variable(
        "TILELANG_VERBOSE", "0", "1 (true, yes, on) makes a compile that does not give ``verbose`` verbose.",
    )
    TILELANG_AUTO_TUNING_DISABLE_CACHE = _Variable(
        "TILELANG_AUTO_TUNING_DISABLE_CACHE", "0",
        "1 (true, yes, on): every tuning run tunes; tuning results are neither read nor saved (docs/autotune.md).",
    )
    TILELANG_CLEANUP_TEMP_FILES = _Variable(
        "TILELANG_CLEANUP_TEMP_FILES", "1",
        "0 keeps the temporary folder of a ``tilelang.contrib.nvcc.compile_cuda`` call (source and output).",
    )
    TILELANG_COMPILE_TIMEOUT_SECONDS = _Variable(
        "TILELANG_COMPILE_TIMEOUT_SECONDS", None,
        "Seconds a ``tilelang.contrib.nvcc.compile_cuda`` call may run nvcc (unset, empty or 0: no limit), and a "
        "backend's compiler run (unset or empty: 600; 0: no limit).",
    )

    def get_default_target(self) -> Any:
        """The target ``target="auto"`` means from ``TILELANG_DEFAULT_TARGET`` (as upstream TileLang).

        :returns: ``"auto"`` when the variable is unset, empty or ``auto``; a ``dict`` when it holds
            a JSON object (``{"kind": "cuda", "arch": "sm_90"}``); otherwise the target string.
        :raises tilelang_core.errors.TargetError: (a ``ValueError``) the value starts like a JSON
            object but does not parse, or has no ``"kind"`` string.
        """
        from tilelang_core.lowering.target import env_default_target

        value = env_default_target()
        return "auto" if value is None else value

    def get_default_execution_backend(self) -> str:
        """The backend a compile that names none uses: ``$TILELANG_EXECUTION_BACKEND``, else ``"auto"``."""
        from tilelang_core.backends.selection import default_execution_backend

        return default_execution_backend()

    def get_default_verbose(self) -> bool:
        """``verbose`` of a compile that does not give it (``$TILELANG_VERBOSE``).

        :raises tilelang_core.errors.SettingError: the value is not a yes/no value.
        """
        from tilelang_core.jit.compile import default_verbose

        return default_verbose()

    def is_autotune_cache_disabled(self) -> bool:
        """Whether every tuning run tunes (``$TILELANG_AUTO_TUNING_DISABLE_CACHE``).

        :raises tilelang_core.errors.SettingError: the value is not a yes/no value.
        """
        from tilelang_core.autotuner.records import tuning_cache_disabled

        return tuning_cache_disabled()

    def is_cache_enabled(self) -> bool:
        """Whether the kernel cache is on."""
        import tilelang

        return tilelang.is_cache_enabled()

    def enable_cache(self) -> None:
        """Switch the kernel cache on (see ``tilelang.enable_cache``)."""
        import tilelang

        tilelang.enable_cache()

    def disable_cache(self) -> None:
        """Switch the kernel cache off (see ``tilelang.disable_cache``)."""
        import tilelang

        tilelang.disable_cache()


#: The process's environment, seen through :class:`Environment`.
env = Environment()

#: ``tilelang.env.get_default_target()``, as upstream calls it on the module.
get_default_target = env.get_default_target


class _EnvModule(types.ModuleType):
    """``tilelang.env`` itself reads and sets the variables too (``tilelang.env.TILELANG_CACHE_DIR``,
    ``tilelang.env.TILELANG_CACHE_DIR = path``, ``tilelang.env.disable_cache()``), as upstream
    TileLang's ``tilelang.env`` is its environment object."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(env, name)
        except AttributeError:
            raise AttributeError(
                f"tilelang.env has no variable or function {name!r}; it has: "
                f"{', '.join(n for n in dir(Environment) if not n.startswith('_'))}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(getattr(Environment, name, None), _Variable):
            setattr(env, name, value)
        else:
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _EnvModule
