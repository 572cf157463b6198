"""The ``nvrtc`` execution backend of TileLang-Core.

CUDA kernels compiled by NVRTC (from the ``nvidia-cuda-nvrtc`` wheel or ``CUDA_HOME``) into a
cubin for one GPU architecture, in a reused worker process under the compile time limit,
launched through the CUDA driver API of ``cuda-bindings``.
No CUDA toolkit and no nvcc are needed, and a machine without a GPU can build and export kernels.
The entry point (:mod:`.plugin`) imports nothing heavy; see README.md.
"""

BACKEND_NAME = "nvrtc"
__version__ = "0.1.0"
