"""Builds the native dispatcher (Cython + C) once, at install time. Metadata is in pyproject.toml."""

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

setup(ext_modules=cythonize([extension], language_level=3, compiler_directives={"embedsignature": True}))
