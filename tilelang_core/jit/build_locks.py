"""One lock per specialisation being built, so threads asking for the same new kernel build it once.

A jit function's first call from several threads at once (a thread pool warming up) found no
kernel for its arguments in each thread, and each thread lowered and compiled it (with the
kernel cache off, or before the cache's own lock: each thread also ran the function's body).
:class:`BuildLocks` hands out a re-entrant lock per key, held while the key's kernel is built and
dropped when no thread holds it any longer.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from ..fork_locks import renew_after_fork

__all__ = ["BuildLocks"]


class BuildLocks:
    """Re-entrant locks by key (a function that asks for its own kernel while building it builds it
    again, as before, instead of waiting for itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._building: dict[Any, list] = {}
        renew_after_fork(self, "_lock", "_building")

    @contextlib.contextmanager
    def held(self, key: Any) -> Iterator[None]:
        """Hold the lock of ``key`` for the block."""
        with self._lock:
            entry = self._building.get(key)
            if entry is None:
                entry = self._building[key] = [threading.RLock(), 0]
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if not entry[1] and self._building.get(key) is entry:
                    del self._building[key]
