"""Every error the core raises, under one base class.

Each class also subclasses the built-in exception a caller would naturally catch
(``LookupError`` for "no such thing", ``ValueError`` for "bad value", ``RuntimeError``
for "a tool failed"), and every message says what to do next.
"""

from __future__ import annotations

from typing import Any, Optional


class TileLangError(Exception):
    """Base class of every error raised by tilelang_core."""


# --- plugins and backends -------------------------------------------------------------------


class BackendError(TileLangError):
    """Base class of errors about execution backends."""


class InvalidBackendSpecError(BackendError, ValueError):
    """A plugin's capability declaration (``BackendSpec``) failed validation."""


class BackendNotInstalledError(BackendError, LookupError):
    """An execution backend was asked for by name but no installed distribution provides it."""


class BackendBrokenError(BackendError, RuntimeError):
    """An installed backend plugin failed to load, declare itself, or run a hook, by its own fault.

    The plugin is unusable for the rest of the process; the message quotes the reason (the hook
    and the exception it raised, a hook it lacks, a load that did not finish in time).
    """


class BackendIncompatibleError(BackendError, RuntimeError):
    """An installed backend plugin was written for another plugin API version."""


class BackendTargetUnsupportedError(BackendError, ValueError):
    """A backend was asked to handle a target kind it does not declare."""


class BackendUnavailableError(BackendError, RuntimeError):
    """A backend declares the target but its probe says it cannot work on this machine."""


class MissingDependencyError(TileLangError, ImportError):
    """A Python module tilelang-core or a backend needs is not installed.

    An environment problem, not a bug: the message names the module, who needs it, and the
    ``pip install`` command (from the needing distribution's declared requirement). ``name`` is
    the missing module, as for :class:`ModuleNotFoundError`.
    """


class BackendDependencyError(MissingDependencyError, BackendUnavailableError):
    """A backend's hook needs a Python module that is not installed.

    The backend is not marked broken: installing the module makes it work (``tilelang backends``
    lists its targets as unavailable with the same reason).
    """


class KernelNotSupportedError(BackendError, ValueError):
    """A backend's build hook refuses one kernel it cannot build (the backend stays usable).

    Raise it from ``tilelang_backend_build`` with the reason ("float8 tensors are not supported",
    "more than 3 grid dimensions"). ``execution_backend="auto"`` then tries the next available
    backend; a backend asked for by name gives this error, with the backend's reason.
    """


class NoBackendForTargetError(BackendError, LookupError):
    """``auto`` selection found no available backend for the target."""


class BackendCapabilityError(BackendError, ValueError):
    """A kernel needs something (a dtype, dynamic shapes, ``out_idx``) the backend does not declare."""


# --- compiling ------------------------------------------------------------------------------


class KernelDefinitionError(TileLangError, TypeError):
    """What was passed as a kernel is not one (not a prim_func, wrong argument types)."""


class LoweringError(TileLangError, ValueError):
    """The kernel could not be lowered; the message points at the kernel's source line."""


class TargetFeatureError(LoweringError, RuntimeError):
    """The kernel uses an instruction the chosen target architecture lacks (e.g. stochastic rounding before sm_100a)."""


class PassConfigError(TileLangError, ValueError):
    """An unknown or badly typed ``pass_configs`` entry."""


class TargetError(TileLangError, ValueError):
    """A target that cannot be understood or resolved."""


class OutIdxError(TileLangError, ValueError):
    """``out_idx`` is out of range, repeated, or names an output whose shape no input binds."""


class BuildError(TileLangError, RuntimeError):
    """A backend failed to build native code.

    :param message: what failed and what to do (a backend usually includes the command and the
        compiler's output in it too).
    :param command: the command line that failed, as a list of words (or None).
    :param output: what the compiler printed (or the OS error), or None.
    :param source: path of the generated source the backend kept for inspection, or None.

    The three are attributes of the same names; ``source_path`` is an alias of ``source``.
    ``execution_backend="auto"`` falls back to the next available backend on a ``BuildError``.
    """

    def __init__(self, message: str = "", *, command: Any = None, output: Optional[str] = None,
                 source: Any = None) -> None:
        super().__init__(message)
        self.command: Optional[list[str]] = [str(w) for w in command] if command is not None else None
        self.output = output
        self.source: Optional[str] = str(source) if source is not None else None

    @property
    def source_path(self) -> Optional[str]:
        """Alias of :attr:`source`."""
        return self.source

    @source_path.setter
    def source_path(self, value: Any) -> None:
        self.source = str(value) if value is not None else None


class CompileFlagsError(TileLangError, ValueError, TypeError):
    """``compile_flags`` is neither a string nor a list of strings, or a string that cannot be
    split like a shell command line (an unbalanced quote)."""


# --- artifacts, cache, export ---------------------------------------------------------------


class ArtifactError(TileLangError, ValueError):
    """A serialised kernel artifact or exported kernel directory is invalid or incompatible."""


class CacheError(TileLangError, RuntimeError):
    """The kernel cache cannot be used safely (for example a directory others can write to)."""


# --- settings -------------------------------------------------------------------------------


class SettingError(TileLangError, ValueError):
    """An environment variable of tilelang-core has a value it cannot use (for example
    ``TILELANG_PLUGIN_TIMEOUT=soon``); the message names the variable and what is expected."""
