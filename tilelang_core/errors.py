"""Every error the core raises, under one base class.

Each class also subclasses the built-in exception a caller would naturally catch
(``LookupError`` for "no such thing", ``ValueError`` for "bad value", ``RuntimeError``
for "a tool failed"), and every message says what to do next.
"""

from __future__ import annotations


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
    """An installed backend plugin failed to load, declare itself, or run a hook."""


class BackendIncompatibleError(BackendError, RuntimeError):
    """An installed backend plugin was written for another plugin API version."""


class BackendTargetUnsupportedError(BackendError, ValueError):
    """A backend was asked to handle a target kind it does not declare."""


class BackendUnavailableError(BackendError, RuntimeError):
    """A backend declares the target but its probe says it cannot work on this machine."""


class NoBackendForTargetError(BackendError, LookupError):
    """``auto`` selection found no available backend for the target."""


class BackendCapabilityError(BackendError, ValueError):
    """A kernel needs something (a dtype, dynamic shapes, ``out_idx``) the backend does not declare."""


# --- compiling ------------------------------------------------------------------------------


class KernelDefinitionError(TileLangError, TypeError):
    """What was passed as a kernel is not one (not a prim_func, wrong argument types)."""


class LoweringError(TileLangError, ValueError):
    """The kernel could not be lowered; the message points at the kernel's source line."""


class PassConfigError(TileLangError, ValueError):
    """An unknown or badly typed ``pass_configs`` entry."""


class TargetError(TileLangError, ValueError):
    """A target that cannot be understood or resolved."""


class OutIdxError(TileLangError, ValueError):
    """``out_idx`` is out of range, repeated, or names an output whose shape no input binds."""


class BuildError(TileLangError, RuntimeError):
    """A backend failed to build native code (carries the command line and compiler output)."""


# --- artifacts, cache, export ---------------------------------------------------------------


class ArtifactError(TileLangError, ValueError):
    """A serialised kernel artifact or exported kernel directory is invalid or incompatible."""


class CacheError(TileLangError, RuntimeError):
    """The kernel cache cannot be used safely (for example a directory others can write to)."""
