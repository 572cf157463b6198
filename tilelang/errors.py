"""``tilelang.errors``: the core's error classes (:mod:`tilelang_core.errors`) and ``enrich_error``.

``enrich_error(exc)`` adds the source line an error's ``--> file:line:col`` marker points at to
its message (:mod:`tilelang_core.error_snippets`); ``_MARKER_RE`` is the marker's pattern.
"""

from tilelang_core.error_snippets import MARKER_RE as _MARKER_RE  # noqa: F401 - TileLang's name
from tilelang_core.error_snippets import enrich_error, source_snippet  # noqa: F401 - public API
from tilelang_core.errors import *  # noqa: F401,F403 - the error hierarchy
