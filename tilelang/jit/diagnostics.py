"""``tilelang.jit.diagnostics``: phase logging of compiles (:mod:`tilelang_core.jit.diagnostics`).

``jit_phase(name, enabled=None, **context)``; ``TILELANG_JIT_DIAGNOSTICS=1`` logs every
``tilelang.compile``'s lower and build phases on the ``tilelang.jit.diagnostics`` logger.
"""

from tilelang_core.jit.diagnostics import ENABLE_ENV, LOGGER_NAME, diagnostics_enabled, jit_phase  # noqa: F401

__all__ = ["ENABLE_ENV", "LOGGER_NAME", "diagnostics_enabled", "jit_phase"]
