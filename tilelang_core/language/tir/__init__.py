"""``tilelang.language.tir``: where TileLang code finds TIR-level helpers by module.

Only :mod:`.ir` is provided (``cast`` with TileLang's rounding arguments, and the TVM expression
types TileLang re-exports); upstream's dialect tables and op wrappers are not
(docs/compatibility.md).
"""

from . import ir  # noqa: F401
