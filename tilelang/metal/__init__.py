"""``tilelang.metal``: TileLang's metal package; here only its language dialect, ``tilelang.metal.language``.

See tilelang_core/language/dialects.py and docs/compatibility.md.
"""
