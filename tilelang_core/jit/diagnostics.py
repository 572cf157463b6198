"""Log the phases of a compile (lower, build), for finding where a slow or hanging compile is.

``TILELANG_JIT_DIAGNOSTICS=1`` makes ``tilelang.compile`` log, on the logger
``tilelang.jit.diagnostics`` at level INFO, when each phase starts, ends (with its duration) or
fails (with the exception, which propagates unchanged), with the kernel, target and backend.
Off by default: then :func:`jit_phase` costs one environment lookup. Show the messages with
``logging.basicConfig(level=logging.INFO)`` or any handler on the ``tilelang`` logger.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Iterator, Optional

__all__ = ["ENABLE_ENV", "LOGGER_NAME", "diagnostics_enabled", "jit_phase"]

#: Environment variable that switches phase logging on (``1``, ``true``, ``on``, ``yes``).
ENABLE_ENV = "TILELANG_JIT_DIAGNOSTICS"
#: Name of the logger the phases are logged on.
LOGGER_NAME = "tilelang.jit.diagnostics"

logger = logging.getLogger(LOGGER_NAME)


def diagnostics_enabled() -> bool:
    """Whether ``TILELANG_JIT_DIAGNOSTICS`` asks for phase logging."""
    from ..env_switches import switch_from_env

    return switch_from_env(ENABLE_ENV, "log each tilelang.compile's lower and build phases", "log nothing")


def _context(context: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in context.items() if v is not None)


@contextlib.contextmanager
def jit_phase(name: str, enabled: Optional[bool] = None, **context: Any) -> Iterator[None]:
    """``with jit_phase("lower", kernel=..., target=...):`` logs the start, the end or the failure of a phase.

    :param name: the phase (``"lower"``, ``"build"``, ...).
    :param enabled: log or not; ``None`` (default): as ``TILELANG_JIT_DIAGNOSTICS`` says.
    :param context: what the phase works on (kernel, target, backend, ...), shown as ``key='value'``.
    """
    if not (diagnostics_enabled() if enabled is None else enabled):
        yield
        return
    where = _context(context)
    suffix = f" ({where})" if where else ""
    logger.info("TileLang JIT phase start: %s%s", name, suffix)
    started = time.perf_counter()
    try:
        yield
    except BaseException as exc:
        logger.info(
            "TileLang JIT phase failed: %s after %.3f s: %s: %s%s", name, time.perf_counter() - started, type(exc).__name__, exc, suffix
        )
        raise
    logger.info("TileLang JIT phase done: %s in %.3f s%s", name, time.perf_counter() - started, suffix)
