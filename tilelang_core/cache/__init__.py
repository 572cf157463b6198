"""The kernel cache of ``tilelang.compile``: memory in front of disk, safe across processes.

``tilelang.compile`` looks a kernel up by a hash of its canonical TIR text and every setting
that changes the result (see :mod:`tilelang_core.cache.key`), first in memory, then on disk
under ``$TILELANG_CACHE_DIR`` (default: the platform's user cache directory, e.g.
``~/.cache/tilelang``), and only then lowers and builds it. ``TILELANG_DISABLE_CACHE=1`` turns
both layers off. See docs/cache.md.

Importing this package imports no TVM and no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .location import CACHE_DIR_ENV, DISABLE_ENV, cache_disabled, default_cache_dir

if TYPE_CHECKING:  # pragma: no cover
    from .store import CacheWarning, KernelCache, active_cache, get_cache

_FROM_STORE = ("CacheWarning", "KernelCache", "active_cache", "get_cache")


def __getattr__(name: str) -> Any:
    # the store is imported on first use, so `tilelang.load` (which reads entries only) skips it
    if name in _FROM_STORE:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module 'tilelang_core.cache' has no attribute {name!r}")


def cache_dir() -> Path:
    """The cache directory in use: ``$TILELANG_CACHE_DIR``, else the platform user cache dir."""
    return default_cache_dir()


def clear(directory: Optional[Path] = None) -> int:
    """Remove every cached kernel (memory and disk); returns how many disk entries were removed.

    Removes only what the cache made: files and links found among the entries (including a
    ``kernels/`` or shard folder that is a link) are unlinked, never followed; folders the cache
    did not create are kept, and so is what another process is writing in ``tmp/``. What could
    not be removed (a folder that cannot be written) is not counted, and is said in a
    ``CacheWarning``. Raises :class:`~tilelang_core.errors.CacheError` when the cache
    directory is one other users can write to.
    """
    from .store import get_cache, warn_blocked, warn_failed

    report = clear_report(directory)
    warn_failed(report, "clear")
    warn_blocked(report, get_cache(directory).root)
    return report["entries"]


def clear_report(directory: Optional[Path] = None) -> dict[str, Any]:
    """:func:`clear`, returning ``{"entries": n, "tuning_records": n, "removed_junk": [paths], "kept": [paths],
    "in_use": [{"path": p, "why": w}], "failed": [{"path": p, "error": e}]}`` (``failed``: not removed, and why)."""
    import sys

    compile_module = sys.modules.get("tilelang_core.jit.compile")
    if compile_module is not None:
        compile_module.clear_memory()
    tuner_module = sys.modules.get("tilelang_core.autotuner.tuner")
    if tuner_module is not None:  # results tuned in this process go with the stored ones
        tuner_module.AutoTuner.clear_memory()
    from .store import get_cache

    return get_cache(directory).clear_report()


def prune(older_than_days: float = 30.0, directory: Optional[Path] = None) -> dict[str, int]:
    """Remove the disk entries that will not be loaded again or were not used lately.

    Goes: entries of a backend that is not installed or installed in another version, entries
    whose metadata cannot be read (corrupt), and entries neither saved nor loaded from disk in
    the last ``older_than_days`` days (only the last reason for entries another tilelang-core
    wrote). Returns ``{"unused": n, "not_installed": n, "unreadable": n}``; what could not be
    removed is not counted, and is said in a ``CacheWarning``.
    Kernels this process holds in memory stay usable. Raises
    :class:`~tilelang_core.errors.CacheError` when the directory is not the cache's own.
    """
    from .store import get_cache

    return get_cache(directory).prune(_days(older_than_days))


def prune_report(older_than_days: float = 30.0, directory: Optional[Path] = None) -> dict[str, Any]:
    """:func:`prune`, returning also ``"other_core_kept": n`` (entries of other tilelang-cores, kept because used
    lately) and ``"failed": [{"path": p, "error": e}]`` (not removed, and why)."""
    from .store import get_cache

    return get_cache(directory).prune_report(_days(older_than_days))


def _days(older_than_days: Any) -> float:
    """``older_than_days`` as a float; ValueError unless it is a finite number >= 0."""
    import math

    if isinstance(older_than_days, bool) or not isinstance(older_than_days, (int, float)) or not (
            math.isfinite(older_than_days) and older_than_days >= 0):
        raise ValueError(f"prune: older_than_days must be a number of days >= 0, got {older_than_days!r}")
    return float(older_than_days)


def info(directory: Optional[Path] = None) -> dict[str, Any]:
    """Location, entry count, total size and size per backend of the kernel cache.

    ``"junk"`` lists what lies among the entries that the cache did not make (files, links,
    folders of other names), as ``{"path": ..., "kind": ...}``; it is not counted as entries.
    ``"problems"`` says why each of the cache's folders ``kernels/``, ``tmp/`` and ``locks/`` that
    is not usable is not (a file or a link where the folder should be): compiles fail until then.
    """
    from .store import get_cache

    return get_cache(directory).info()


__all__ = [
    "CACHE_DIR_ENV",
    "DISABLE_ENV",
    "CacheWarning",
    "KernelCache",
    "active_cache",
    "cache_dir",
    "cache_disabled",
    "clear",
    "clear_report",
    "get_cache",
    "info",
    "prune",
    "prune_report",
]
