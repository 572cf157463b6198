"""``tilelang.webgpu``: TileLang's webgpu package; here only its language dialect, ``tilelang.webgpu.language``.

See tilelang_core/language/dialects.py and docs/compatibility.md.
"""
