"""``tilelang.rocm``: TileLang's rocm package; here only its language dialect, ``tilelang.rocm.language``.

See tilelang_core/language/dialects.py and docs/compatibility.md.
"""
