"""``from tilelang.engine.lower import lower``: the same function as ``tilelang.lower``."""

from tilelang_core.lowering import lower  # noqa: F401

__all__ = ["lower"]
