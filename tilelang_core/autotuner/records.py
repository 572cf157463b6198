"""Tuning results on disk: JSON files in the kernel cache directory, written atomically.

::

    <cache dir>/autotune/<k[:2]>/<key>.json   one TuningRecord per tuning key
    <cache dir>/tmp/                          records being written (renamed into place)
    <cache dir>/locks/autotune-<key>.lock     one process tunes a key, the others wait and read

The directory, its privacy check, the ``tmp/`` staging area and the per-key ``fcntl`` locks are
the kernel cache's own (:class:`~tilelang_core.cache.store.DiskCache`). A record names the kernel
cache key of the best kernel; a later process defines that config's kernel again and finds it in
the kernel cache without tuning, lowering or compiling (a different key means the kernel changed
since it was tuned: the configs are tuned again). Nothing is pickled: a record is JSON validated by pydantic
and checked for consistency (:func:`inconsistency`: latencies finite and >= 0, ``best_index`` the best
trial's), and a record that does not validate is removed with a :class:`~tilelang_core.cache.CacheWarning`
(the configs are then tuned again).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from .. import schema
from ..warning_location import warn

#: Version of the record layout; a record of another version is ignored (and tuned again).
RECORD_FORMAT_VERSION = 1
RECORDS_DIR = "autotune"
#: Environment variable: 1 (true, yes, on) makes every tuning run tune, neither reading nor saving results.
DISABLE_ENV = "TILELANG_AUTO_TUNING_DISABLE_CACHE"

_STRICT = {"extra": "forbid", "use_attribute_docstrings": True}


def tuning_cache_disabled() -> bool:
    """Whether ``$TILELANG_AUTO_TUNING_DISABLE_CACHE`` says every tuning run tunes: results are
    neither read (from disk or from this process's memory) nor saved, as in upstream TileLang.

    :raises SettingError: the value is not a yes/no value.
    """
    from ..env_switches import switch_from_env

    return switch_from_env(DISABLE_ENV, "tune on every run (tuning results neither read nor saved)", "keep them")


@dataclass(kw_only=True)
class TrialRecord:
    """One configuration's outcome as stored."""

    __pydantic_config__ = _STRICT

    index: int
    config: dict[str, Any]
    """The config, encoded by :func:`encode_config`."""
    status: str
    latency: Optional[float] = None
    """Milliseconds, for status 'ok'."""
    reason: str = ""
    worker: str = ""


@dataclass(kw_only=True)
class TuningRecord:
    """Contents of ``autotune/<k[:2]>/<key>.json``."""

    __pydantic_config__ = _STRICT

    format_version: int = RECORD_FORMAT_VERSION
    key: str
    function: str
    """Qualified name of the tuned function (for people reading the file)."""
    best_index: int
    best_config: dict[str, Any]
    latency: float
    """Milliseconds per call of the best config."""
    ref_latency: Optional[float] = None
    timer: str
    device: dict[str, Any]
    """Identity of the device the configs were timed on."""
    target: str
    backend_name: str
    backend_version: str
    kernel_cache_key: Optional[str] = None
    """Kernel cache key of the best kernel; None when it could not be cached."""
    call: str = ""
    """Digest of the tuned call's complete arguments: a call with other ``do_not_specialize``
    values shares the record but not ``kernel_cache_key`` ("" in records written before)."""
    trials: list[TrialRecord] = field(default_factory=list)
    core_version: str = ""
    created: float = 0.0
    """time.time() when it was written."""


# -- configs as JSON, without loss --------------------------------------------------------------


class NotEncodable(ValueError):
    """A config value JSON cannot hold without loss."""


def encode_value(value: Any) -> Any:
    """``value`` as JSON data; tuples become ``{"__tuple__": [...]}`` so they come back as tuples."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise NotEncodable(f"{value!r} is not a JSON number")
        return value
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value) or "__tuple__" in value:
            raise NotEncodable(f"dict {value!r} has keys JSON cannot hold")
        return {k: encode_value(v) for k, v in value.items()}
    raise NotEncodable(f"{type(value).__name__} value {value!r}")


def decode_value(value: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(decode_value(v) for v in value["__tuple__"])
        return {k: decode_value(v) for k, v in value.items()}
    return value


def encode_config(config: dict[str, Any]) -> dict[str, Any]:
    """A config dict as JSON data (raises :class:`NotEncodable` naming the bad value)."""
    return {str(k): encode_value(v) for k, v in config.items()}


def decode_config(data: dict[str, Any]) -> dict[str, Any]:
    return {k: decode_value(v) for k, v in data.items()}


# -- the store -----------------------------------------------------------------------------------


class TuningStore:
    """Tuning records in one kernel cache directory."""

    def __init__(self, disk: Any) -> None:
        self.disk = disk  # tilelang_core.cache.store.DiskCache
        self.root = Path(disk.root) / RECORDS_DIR

    @classmethod
    def active(cls) -> Optional["TuningStore"]:
        """The store of the kernel cache ``tilelang.compile`` uses now; None when the cache is
        disabled (``TILELANG_DISABLE_CACHE``) or its directory is unusable. (The tuner asks for it
        only when :func:`tuning_cache_disabled` is false.)"""
        from ..cache.store import active_cache

        cache = active_cache()
        if cache is None:
            return None
        disk = cache.usable_disk()
        return cls(disk) if disk is not None else None

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[bool]:
        """Hold the cache's exclusive lock for this tuning key (other processes wait); yields
        whether it is held (:meth:`DiskCache.lock`: not after ``$TILELANG_CACHE_LOCK_TIMEOUT``
        seconds, with a warning that this process tunes the key too; its warnings spoke of
        "building the kernel" before)."""
        with self.disk.lock(f"autotune-{key}", doing="tuning key") as held:
            yield held

    def load(self, key: str) -> Optional[TuningRecord]:
        """The record of ``key``, or None; an unusable one is removed with a CacheWarning."""
        from pydantic_core import ValidationError

        path = self.path(key)
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._discard(path, f"unreadable ({exc})")
            return None
        try:
            record = schema.validate_json(TuningRecord, text)
        except ValidationError as exc:
            self._discard(path, f"invalid ({schema.error_summary(exc)})")
            return None
        if record.format_version != RECORD_FORMAT_VERSION or record.key != key:
            self._discard(path, f"format {record.format_version} / key {record.key[:12]}..., not this one")
            return None
        problem = inconsistency(record)
        if problem:
            self._discard(path, f"invalid ({problem})")
            return None
        return record

    def save(self, record: TuningRecord) -> bool:
        """Write ``record`` (complete in tmp/, then renamed); False, with a warning, when it could not."""
        from ..cache.store import CacheWarning

        path = self.path(record.key)
        tmp = self.disk.root / "tmp" / f"autotune-{record.key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.json"
        try:
            self.disk.prepare()
            for directory in (self.root, path.parent):
                directory.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(schema.to_json(record, indent=1))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            return True
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            warn(
                f"tuning result {record.key[:12]}... could not be saved to {self.root}: {exc}; it is kept in memory only",
                CacheWarning,
            )
            return False

    def _discard(self, path: Path, why: str) -> None:
        """Remove an unusable record, with a CacheWarning that says whether it was removed."""
        from ..cache.store import CacheWarning

        try:
            os.unlink(path)
        except FileNotFoundError:  # another process removed it first
            pass
        except OSError as exc:
            warn(f"ignored unusable tuning result {path}: {why}; it could not be removed ({exc}): remove it "
                 f"yourself (or run `tilelang cache clear`); tuning again", CacheWarning)
            return
        warn(f"removed unusable tuning result {path}: {why}; tuning again", CacheWarning)

    def records(self) -> list[Path]:
        """Every record file."""
        return sorted(self.root.glob("*/*.json")) if self.root.is_dir() else []


def _latency_problem(value: Optional[float], what: str, required: bool) -> str:
    if value is None:
        return f"{what} is missing" if required else ""
    if not math.isfinite(value) or value < 0:
        return f"{what} is {value!r}, not a number of milliseconds >= 0"
    return ""


def inconsistency(record: TuningRecord) -> str:
    """What makes a record that passed the schema unusable ("" when nothing): a latency that is
    NaN, infinite or negative, or a ``best_index`` that is not the index of an ``ok`` trial with
    the best config and the record's latency."""
    problems = [
        _latency_problem(record.latency, "latency", True),
        _latency_problem(record.ref_latency, "ref_latency", False),
    ]
    problems += [_latency_problem(t.latency, f"trial {t.index}'s latency", t.status == "ok") for t in record.trials]
    if record.trials:
        best = [t for t in record.trials if t.index == record.best_index]
        if not best:
            problems.append(f"best_index {record.best_index} names no trial (indices "
                            f"{', '.join(str(t.index) for t in record.trials)})")
        elif best[0].status != "ok" or best[0].config != record.best_config or best[0].latency != record.latency:
            problems.append(f"best_index {record.best_index} is trial {best[0].status!r} {best[0].config} at "
                            f"{best[0].latency!r} ms, not the best config {record.best_config} at {record.latency!r} ms")
    elif record.best_index < 0:
        problems.append(f"best_index is {record.best_index}")
    return "; ".join(p for p in problems if p)


def load_cached_kernel(kernel_cache_key: str, backend_name: str, backend_version: str) -> Any:
    """The kernel stored under ``kernel_cache_key`` in the kernel cache, or None.

    Looks in memory, then on disk (through the backend's load hook): no lowering, no compiling.
    None when the backend is not installed at that version, cannot save and load kernels, or
    the entry is gone.
    """
    from ..backends import get_registry
    from ..cache.store import active_cache

    cache = active_cache()
    if cache is None:
        return None
    record = get_registry().get(backend_name)
    if record is None or not record.usable or (record.version or "0") != backend_version:
        return None
    kernel = cache.memory.get(kernel_cache_key)
    if kernel is not None:
        return kernel
    if not (record.implements("tilelang_backend_save") and record.implements("tilelang_backend_load")):
        return None
    disk = cache.usable_disk()
    if disk is None:
        return None
    kernel = disk.load(kernel_cache_key, record)
    if kernel is None:
        return None
    kernel.cache_key = kernel_cache_key
    cache.memory.put(kernel_cache_key, kernel)
    return kernel


def new_record(**fields: Any) -> TuningRecord:
    """A :class:`TuningRecord` stamped with the core version and the time."""
    from .. import __version__

    return TuningRecord(core_version=__version__, created=time.time(), **fields)


__all__ = [
    "NotEncodable",
    "RECORD_FORMAT_VERSION",
    "TrialRecord",
    "TuningRecord",
    "TuningStore",
    "decode_config",
    "encode_config",
    "inconsistency",
    "load_cached_kernel",
    "new_record",
]
