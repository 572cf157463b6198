"""Taking an exclusive ``fcntl.flock`` with a bound on the wait (POSIX only)."""

from __future__ import annotations

import time
from typing import Optional

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def flock_within(fd: int, wait_s: float, poll_s: float = 0.01) -> Optional[float]:
    """Lock ``fd`` exclusively, waiting at most ``wait_s`` seconds for the process that holds it.

    Polls (``LOCK_NB``) every ``poll_s`` seconds, growing to ten times that while the wait goes
    on. Returns the seconds waited, or None when the lock was still held by another process
    after ``wait_s`` seconds (the caller then goes on without it, and says so).
    """
    start = time.monotonic()
    delay = poll_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return time.monotonic() - start
        except BlockingIOError:
            if time.monotonic() - start >= wait_s:
                return None
            time.sleep(delay)
            delay = min(delay * 1.5, poll_s * 10)


__all__ = ["flock_within"]
