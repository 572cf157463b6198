"""``tilelang.contrib``: of upstream's tool wrappers, only :mod:`tilelang.contrib.nvcc` (running
the CUDA toolkit's ``nvcc`` on a source string). See docs/compatibility.md."""
