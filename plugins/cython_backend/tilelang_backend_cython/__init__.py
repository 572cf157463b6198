"""tilelang-backend-cython: the ``cython`` execution backend of TileLang-Core.

CPU (``c``) and CUDA kernels are compiled from the artifact's device source with the system
compilers; calls go through a native dispatcher (built when this package is installed) that
reads torch tensors via the DLPack C exchange API. The entry point is
:mod:`tilelang_backend_cython.plugin`; importing this package imports nothing heavy.
"""

__version__ = "0.1.0"
