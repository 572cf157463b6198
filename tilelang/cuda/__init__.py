"""``tilelang.cuda``: TileLang's cuda package; here only its language dialect, ``tilelang.cuda.language``.

See tilelang_core/language/dialects.py and docs/compatibility.md.
"""
