"""Builds the native dispatcher (Cython + C) once, at install time. Metadata is in pyproject.toml.

With torch importable in the build environment (``pip install --no-build-isolation``, or a
``python setup.py build_ext`` in the environment that runs the kernels), the optional C++ module
``_torch_reader`` is built too: it reads tensors through torch's C++ extension API, several times
faster per tensor than DLPack. Without torch, or when that module fails to compile, the
dispatcher reads every tensor through DLPack (same checks, same messages).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

extension = Extension(
    "tilelang_backend_cython._dispatch",
    sources=["tilelang_backend_cython/_dispatch.pyx"],
    include_dirs=["tilelang_backend_cython"],
    depends=["tilelang_backend_cython/_dispatch_core.h", "tilelang_backend_cython/_pool.h",
             "tilelang_backend_cython/_tl_dlpack.h"],
    extra_compile_args=["-O3", "-pthread"],
    extra_link_args=["-pthread"],
    libraries=["dl"],
)


def torch_reader_extension():
    """The optional ``_torch_reader`` extension, or None when torch is not importable here."""
    try:
        import torch
        from torch.utils.cpp_extension import include_paths, library_paths
    except ImportError:
        print("tilelang-backend-cython: torch is not importable at build time; "
              "the dispatcher will read tensors through DLPack only")
        return None
    libs = library_paths()
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    return Extension(
        "tilelang_backend_cython._torch_reader",
        sources=["tilelang_backend_cython/_torch_reader.cpp"],
        include_dirs=["tilelang_backend_cython", *include_paths()],
        depends=["tilelang_backend_cython/_tl_dlpack.h"],
        define_macros=[("TL_TORCH_VERSION", f'"{torch.__version__}"'), ("_GLIBCXX_USE_CXX11_ABI", str(abi))],
        library_dirs=libs,
        runtime_library_dirs=libs,
        libraries=["c10", "torch", "torch_cpu", "torch_python"],
        extra_compile_args=["-O3", "-g0", "-std=c++20"],
        language="c++",
        optional=True,  # a failed compile leaves the DLPack path
    )


modules = cythonize([extension], language_level=3, compiler_directives={"embedsignature": True})
reader = torch_reader_extension()
setup(ext_modules=modules + ([reader] if reader is not None else []))
