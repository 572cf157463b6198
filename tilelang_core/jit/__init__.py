"""The JIT front end: ``tilelang.compile`` and the :class:`JITKernel` it returns."""
