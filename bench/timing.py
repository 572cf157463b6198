"""The one timing loop of the bench scripts that time a call against a reference in the same process."""

from __future__ import annotations

import time
from typing import Callable


def best_time(fn: Callable[[], object], reps: int) -> float:
    """The shortest of ``reps`` timed calls of ``fn`` (seconds), after one untimed warm-up call."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
