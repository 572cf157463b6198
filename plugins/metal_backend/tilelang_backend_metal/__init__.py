"""The ``metal`` execution backend of TileLang-Core.

Metal kernels (the pipeline's Metal Shading Language source) compiled at run time by
``torch.mps.compile_shader`` and launched on torch's MPS stream with MPS tensors. A machine
without MPS (Linux, CI) builds, caches and exports the kernels; a Mac runs them. The entry point
(:mod:`.plugin`) imports nothing heavy; see README.md.
"""

BACKEND_NAME = "metal"
__version__ = "0.1.0"
