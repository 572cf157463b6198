"""``kernel.get_kernel_source()`` / ``artifact.kernel_source`` on every installed backend.

TileLang users print the generated source of a kernel with ``kernel.get_kernel_source()``. A
backend that consumes TVM's runtime module (tvm_ffi) gets no ``device_source`` from the
pipeline, so the source of the module it runs is kept in ``artifact.runtime_source``: the CUDA C
of a GPU kernel, the C or LLVM IR of a CPU one. These tests build real kernels with the installed
plugins, read the source back, after a disk-cache hit too, and check that it is the code the
kernel runs (it names the kernel, and a constant of the kernel's body appears in it).
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.backends import get_registry
from tilelang_core.jit import compile as compile_module

SCALE = 7.25  # a constant of the kernel body, looked for in the source


def scale_kernel(n: int = 256, block: int = 128):
    @T.prim_func
    def scale_by_const(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * SCALE

    return scale_by_const


def _can_build(backend: str, target: str) -> bool:
    record = get_registry().get(backend)
    if record is None or not record.usable:
        return False
    availability = get_registry().probe(record, target)
    return availability.can_build


PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm"), ("cython", "cuda"), ("tvm_ffi", "cuda"), ("nvrtc", "cuda")]


def _marker_in(source: str, target: str) -> bool:
    if target == "llvm":  # LLVM IR writes float constants as hex doubles: 7.25 = 0x401D000000000000
        return "0x401D000000000000" in source or "7.25" in source
    return "7.25" in source


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    yield
    compile_module.clear_memory()
    tilelang.cache.get_cache().memory.clear()


@pytest.mark.parametrize("backend,target", PAIRS, ids=[f"{b}-{t}" for b, t in PAIRS])
def test_kernel_source_is_the_code_the_backend_built(backend, target, fresh_cache):
    if not _can_build(backend, target):
        pytest.skip(f"{backend} cannot build for {target} here")
    kernel = tilelang.compile(scale_kernel(), out_idx=-1, target=target, execution_backend=backend)
    source = kernel.get_kernel_source()
    assert isinstance(source, str) and source, f"{backend}/{target}: get_kernel_source() gave {source!r}"
    assert "scale_by_const" in source
    assert _marker_in(source, target), source[:2000]
    assert kernel.artifact.kernel_source == source
    if target == "cuda":
        assert "__global__" in source
    elif target == "llvm":
        assert "define " in source  # LLVM IR, not C
    if kernel.cannot_run is None:
        a = torch.randn(256)
        torch.testing.assert_close(kernel(a), a * SCALE)

    # a disk-cache hit (a new process would start with empty memory) keeps the source
    compile_module.clear_memory()
    tilelang.cache.get_cache().memory.clear()
    again = tilelang.compile(scale_kernel(), out_idx=-1, target=target, execution_backend=backend)
    assert again is not kernel and again.cache_key == kernel.cache_key
    assert again.get_kernel_source() == source


def test_runtime_source_is_kept_only_for_runtime_modules():
    from tilelang_core.lowering import lower

    c_entry = lower(scale_kernel(), target="c")  # default: device_source
    assert c_entry.runtime_source is None and c_entry.kernel_source == c_entry.device_source
    module = lower(scale_kernel(), target="llvm", consumes=["runtime_module"])
    assert module.device_source is None
    assert module.runtime_source and module.kernel_source == module.runtime_source
