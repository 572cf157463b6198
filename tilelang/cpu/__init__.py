"""``tilelang.cpu``: TileLang's cpu package; here only its language dialect, ``tilelang.cpu.language``.

See tilelang_core/language/dialects.py and docs/compatibility.md.
"""
