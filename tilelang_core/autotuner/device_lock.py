"""One timing at a time per device on a machine, across processes.

The workers of an executor on one machine (a Dask ``LocalCluster``, a ``ProcessPoolExecutor``,
two GPU-less workers on a CPU node) build candidates in parallel, which is what they are for, but
two of them timing at the same moment on the same device share its cores, memory bandwidth or SMs,
and the tuner then compares latencies measured under different loads. :func:`exclusive_timing`
holds an exclusive ``flock`` on a per-user lock file named after the device while a candidate
is timed, so timings on one device follow each other while everything else stays parallel.

The device is the whole CPU for ``cpu`` kernels (timings compete for the same cores even with
disjoint thread affinity), and the physical GPU (its UUID) for GPU families. The lock is
released when its holder exits, even when it is killed. A holder that hangs does not stall the
others for ever: after ``wait_s`` seconds a waiter times anyway and logs a warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, Optional

from ..cache.trust import Place, check_owned_dir
from ..errors import CacheError
from ..flock_wait import flock_within

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process timing lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("tilelang.autotuner")

#: How long a candidate waits for another process's timing on the same device (seconds).
DEFAULT_WAIT_S = 300.0

_POLL_S = 0.01


def device_slot(family: str) -> str:
    """A file-name-safe name of the physical device a ``family`` kernel is timed on here."""
    from ..devices import torch_device_type

    kind = torch_device_type(family)
    if kind == "cuda":
        import torch

        try:
            index = torch.cuda.current_device()
            uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        except Exception:  # noqa: BLE001 - no usable GPU: the timing itself reports that, not the lock
            index, uuid = 0, None
        ident = str(uuid) if uuid else f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')}-{index}"
        name = f"{family}-{ident}"
    else:
        name = family
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def lock_dir() -> Path:
    """This user's directory of timing lock files (in the system's temporary directory)."""
    path = _lock_dir_path()
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _lock_dir_path() -> Path:
    """Where :func:`lock_dir` is (made or not)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"tilelang-timing-{uid}"


#: How the kernel cache's ownership check (cache/trust.py) names the lock directory.
_LOCK_PLACE = Place(
    what="timing lock directory",
    fix_mode="Remove it (tilelang recreates it with mode 0700).",
    fix_other="Remove it (tilelang recreates it).",
    fix_path="",
    consequence="they could hold or remove its locks",
)


def _not_private(path: Path) -> Optional[str]:
    """Why ``path`` is not a directory of this user that nobody else can write to (None if it is)."""
    try:
        check_owned_dir(path, os.lstat(path), _LOCK_PLACE)
    except (OSError, CacheError) as exc:
        return str(exc)
    return None


@contextlib.contextmanager
def exclusive_timing(family: str, wait_s: float = DEFAULT_WAIT_S) -> Iterator[float]:
    """Hold the timing lock of this machine's ``family`` device; yields the seconds spent waiting.

    Re-entrant on one thread: a timing started while this thread already holds the device (a
    ``ref_prog`` timed under the lock that tunes another kernel on its first call) runs at once
    under the holder's lock (a second ``flock`` on a new descriptor of the same file waited for
    the first, 300 s). Other threads of the process wait as other processes do. When the lock
    cannot be had within ``wait_s`` seconds, or the lock directory is not private to this user
    (others could hold or remove its locks), the body runs without it and a warning says so; on
    Windows (no ``fcntl``) it always runs without.
    """
    if fcntl is None:  # pragma: no cover
        yield 0.0
        return
    slot = device_slot(family)
    held_here = _held_slots()
    if slot in held_here:  # this thread holds it already: a nested timing inside the holder's
        yield 0.0
        return
    held_here.add(slot)
    try:
        with _flock_slot(slot, wait_s) as waited:
            yield waited
    finally:
        held_here.discard(slot)


_held = threading.local()


def _held_slots() -> set[str]:
    """The device slots this thread holds."""
    slots = getattr(_held, "slots", None)
    if slots is None:
        slots = _held.slots = set()
    return slots


@contextlib.contextmanager
def _flock_slot(slot: str, wait_s: float) -> Iterator[float]:
    """The cross-process part of :func:`exclusive_timing`: the ``flock`` of ``slot``'s file.

    A lock directory or file that cannot be made (a file in the directory's place, a full or
    read-only temporary directory) times without the lock and logs a warning, as a directory
    that is not private does. Before, its ``OSError`` (``FileExistsError`` for a file named
    ``tilelang-timing-<uid>``) failed every candidate.
    """
    try:
        directory = lock_dir()
    except OSError as exc:
        logger.warning("timing without the device lock: its directory %s cannot be made (%s: %s); remove what is in "
                       "its place", _lock_dir_path(), type(exc).__name__, exc)
        yield 0.0
        return
    problem = _not_private(directory)
    if problem is not None:
        logger.warning("timing without the device lock: %s is not a private directory of this user: %s",
                       directory, problem)
        yield 0.0
        return
    try:
        fd = os.open(directory / f"{slot}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        logger.warning("timing without the device lock: its file %s cannot be opened (%s: %s); remove what is in "
                       "its place", directory / f"{slot}.lock", type(exc).__name__, exc)
        yield 0.0
        return
    start = time.monotonic()
    held = False
    try:
        held = flock_within(fd, wait_s, _POLL_S) is not None
        if not held:
            logger.warning(
                "another process has been timing on device %s for over %.0f s; timing this candidate "
                "alongside it (its latency may be inflated)", slot, wait_s)
        yield time.monotonic() - start
    finally:
        try:
            if held:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


__all__ = ["DEFAULT_WAIT_S", "device_slot", "exclusive_timing", "lock_dir"]
