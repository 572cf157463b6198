"""A process's own builds pause while one of its threads times a candidate.

An executor of threads (a ``ThreadPoolExecutor``, a Dask cluster of threads) builds some
candidates while it times others. Lowering holds the GIL for long stretches (up to 150 ms at a
time in TVM's passes on the 2-core development machine), and a timed call whose thread waits that
long for the GIL counts the wait as the kernel's time: a 1 ms candidate was measured slower than a
5 ms one and lost to it. The device lock (:mod:`.device_lock`) keeps the timings of processes
apart; this gate keeps a process's builds away from its own timings:

* :func:`build_slot` is held while a candidate builds; it waits while a timing runs or waits.
* :func:`quiet_for_timing` is held while a candidate is timed; it waits for the builds under way
  to end (new ones wait for it, so a stream of builds never starves a timing).

Neither waits for ever: after ``wait_s`` seconds each goes on and logs a warning. A thread that
times inside its own timing (a ``ref_prog`` that tunes another kernel on its first call), or from
a build, does not wait for itself. Only the builds of an executor's workers
(:func:`~.candidate.run_candidate`) take slots: without an executor, every candidate is built
before the first is timed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Callable, Iterator, Optional

logger = logging.getLogger("tilelang.autotuner")

#: How long a build waits for a timing, and a timing for the builds under way (seconds).
DEFAULT_WAIT_S = 300.0


class _Gate:
    """The counts of this process's builds and timings (waiting or under way), and their condition."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.builds = 0
        self.timings = 0

    def wait_until(self, ready: Callable[[], bool], wait_s: Optional[float]) -> tuple[float, bool]:
        """Wait (the condition held) until ``ready()``, at most ``wait_s`` seconds
        (:data:`DEFAULT_WAIT_S` when None); returns (seconds waited, whether ready)."""
        if wait_s is None:
            wait_s = DEFAULT_WAIT_S
        start = time.monotonic()
        deadline = start + wait_s
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                return time.monotonic() - start, False
            self.cond.wait(left)
        return time.monotonic() - start, True


_gate = _Gate()
_local = threading.local()


def _fresh_gate_in_child() -> None:
    """A child made by ``os.fork()`` has none of its parent's other threads, so none of their
    builds or timings: it starts with a fresh gate (a block of the forking thread that was in one
    leaves the old gate it entered)."""
    global _gate
    _gate = _Gate()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_fresh_gate_in_child)


@contextlib.contextmanager
def build_slot(wait_s: Optional[float] = None) -> Iterator[float]:
    """Hold a build slot of this process; yields the seconds spent waiting for timings to end.

    A caller that gives up on a build (its timeout passed) leaves the block while the build's
    thread still runs, so a stuck build never holds the timings back.
    """
    if getattr(_local, "timing", 0):  # a build started from this thread's own timing
        yield 0.0
        return
    gate = _gate
    with gate.cond:
        waited, ready = gate.wait_until(lambda: gate.timings == 0, wait_s)
        if not ready:
            logger.warning("a candidate has been timed in this process for over %.0f s; building alongside it "
                           "(its latency may be inflated)", waited)
        gate.builds += 1
    try:
        yield waited
    finally:
        with gate.cond:
            gate.builds -= 1
            gate.cond.notify_all()


@contextlib.contextmanager
def quiet_for_timing(wait_s: Optional[float] = None) -> Iterator[float]:
    """Time with no build of this process under way; yields the seconds spent waiting for them.

    Re-entrant on one thread, and a no-op on a thread that builds (:func:`marked_building`).
    """
    depth = getattr(_local, "timing", 0)
    if depth or getattr(_local, "building", False):
        _local.timing = depth + 1
        try:
            yield 0.0
        finally:
            _local.timing = depth
        return
    gate = _gate
    with gate.cond:
        gate.timings += 1
        waited, ready = gate.wait_until(lambda: gate.builds == 0, wait_s)
    if not ready:
        logger.warning("candidates have been building in this process for over %.0f s; timing alongside them "
                       "(this latency may be inflated)", waited)
    _local.timing = 1
    try:
        yield waited
    finally:
        _local.timing = 0
        with gate.cond:
            gate.timings -= 1
            gate.cond.notify_all()


@contextlib.contextmanager
def marked_building() -> Iterator[None]:
    """Mark this thread as one that builds a candidate (a timing it starts does not wait for it)."""
    before = getattr(_local, "building", False)
    _local.building = True
    try:
        yield
    finally:
        _local.building = before


__all__ = ["DEFAULT_WAIT_S", "build_slot", "marked_building", "quiet_for_timing"]
