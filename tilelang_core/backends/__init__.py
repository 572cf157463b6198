"""Execution-backend discovery, registry and selection.

Backends are distributions with an entry point in the group ``tilelang.backends``. Names are
listed from package metadata without importing anything; a plugin is imported the first time it
is needed (listing its details, selecting it, loading a kernel built with it), bounded in time
(``TILELANG_PLUGIN_TIMEOUT``, see :mod:`.isolation`).
"""

from .registry import BackendRecord, BackendRegistry, get_registry
from .selection import BackendWarning, Candidate, auto_candidates, explain_selection, select_backend

__all__ = [
    "BackendRecord",
    "BackendRegistry",
    "BackendWarning",
    "Candidate",
    "auto_candidates",
    "explain_selection",
    "get_registry",
    "select_backend",
]
