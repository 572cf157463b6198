"""Language dialects (``tilelang.language.common``, ``tilelang.<vendor>.language``) and the vendor tables."""

from __future__ import annotations

import importlib

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.language.common as common
from tilelang.language.tir import exports
from tilelang.language.tir import op as tir_op


def test_whole_language_lists_its_names_and_is_the_cuda_dialect():
    from tilelang.cuda import language as cuda

    assert T.__tilelang_dialect__ == "cuda" and cuda.__tilelang_dialect__ == "cuda"
    assert set(cuda.__all__) == set(T.__all__)
    for name in ("Kernel", "copy", "gemm", "float16", "prim_func", "__exp", "reduce_max", "cuda", "ptx_legacy"):
        assert name in T.__all__
        assert getattr(cuda, name) is getattr(T, name)


def test_vendor_tables_follow_tvm():
    assert {"cuda", "ptx", "ptx_legacy"} <= exports.CUDA_ONLY_TIR_EXPORTS
    assert "metal" in exports.METAL_ONLY_TIR_EXPORTS
    assert exports.CUDA_ONLY_TIR_EXPORTS.isdisjoint(exports.METAL_ONLY_TIR_EXPORTS)
    assert exports.BACKEND_ONLY_TIR_EXPORTS >= exports.CUDA_ONLY_TIR_EXPORTS | exports.METAL_ONLY_TIR_EXPORTS
    assert exports.CLASSIFIED_VENDOR_TIR_EXPORTS >= exports.BACKEND_ONLY_TIR_EXPORTS
    assert exports.vendor_of(T.ptx_legacy) == "cuda" and exports.vendor_of(T.copy) is None
    assert exports.SHARED_LEGACY_TIR_EXPORTS.isdisjoint(exports.BACKEND_ONLY_TIR_EXPORTS)
    assert "tvm_warp_shuffle" in exports.SHARED_LEGACY_TIR_EXPORTS
    assert tir_op.exp is tilelang.tvm.tirx.op.exp
    assert not any(hasattr(tir_op, n) for n in exports.BACKEND_ONLY_TIR_EXPORTS)


def test_common_dialect_drops_only_vendor_and_cuda_family_names():
    from tilelang_core.language.dialects import CUDA_FAMILY_NAMES

    assert common.__tilelang_dialect__ == "common"
    assert exports.BACKEND_ONLY_TIR_EXPORTS.isdisjoint(common.__all__)
    assert CUDA_FAMILY_NAMES == {"pdl_trigger", "pdl_sync"} and CUDA_FAMILY_NAMES <= set(T.__all__)
    assert set(common.__all__) == set(T.__all__) - exports.BACKEND_ONLY_TIR_EXPORTS - CUDA_FAMILY_NAMES
    assert common.copy is T.copy and "__log" in common.__all__
    assert not hasattr(common, "ptx_legacy")


@pytest.mark.parametrize("dialect", ["cpu", "webgpu", "metal", "rocm"])
def test_vendor_dialects(dialect):
    module = importlib.import_module(f"tilelang.{dialect}.language")
    assert module.__tilelang_dialect__ == dialect
    assert exports.CUDA_ONLY_TIR_EXPORTS.isdisjoint(module.__all__)
    assert "pdl_trigger" not in module.__all__ and "pdl_sync" not in module.__all__
    if dialect == "metal":
        assert set(module.__all__) == set(common.__all__) | exports.METAL_ONLY_TIR_EXPORTS
        assert module.metal is T.metal
    else:
        assert set(module.__all__) == set(common.__all__)


def test_kernel_written_against_the_cpu_dialect_runs():
    from tilelang.cpu import language as C

    @C.prim_func
    def twice(X: C.Tensor((32,), C.float32), Y: C.Tensor((32,), C.float32)):
        with C.Kernel(1, threads=32):
            for i in C.Parallel(32):
                Y[i] = X[i] * 2.0

    kernel = tilelang.compile(twice, target="c")
    x = torch.randn(32)
    y = torch.empty(32)
    kernel(x, y)
    torch.testing.assert_close(y, x * 2)
    with pytest.raises(AttributeError):
        C.ptx_legacy  # noqa: B018 - a CUDA-only intrinsic is not in the CPU dialect


def test_unknown_dialect_is_refused():
    from tilelang_core.language.dialects import dialect_names

    with pytest.raises(ValueError, match="unknown language dialect 'vulkan'"):
        dialect_names("vulkan")


def test_mma_swizzle_layout_is_a_layout_hint():
    from tilelang.cuda.intrinsics import make_mma_swizzle_layout

    @T.prim_func
    def copy_through_shared(X: T.Tensor((16, 16), T.float32), Y: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=16):
            tile = T.alloc_shared((16, 16), T.float32)
            T.annotate_layout({tile: make_mma_swizzle_layout(tile)})
            T.copy(X, tile)
            T.copy(tile, Y)

    kernel = tilelang.compile(copy_through_shared, target="c")
    x = torch.randn(16, 16)
    y = torch.empty(16, 16)
    kernel(x, y)
    torch.testing.assert_close(y, x)


def _shared_roundtrip(layout_fn):
    from tilelang.layout import Layout

    @T.prim_func
    def roundtrip(X: T.Tensor((32,), T.int32), Y: T.Tensor((32,), T.int32)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_shared((32,), T.int32)
            T.annotate_layout({tile: Layout((32,), layout_fn)})
            for i in T.Parallel(32):
                tile[i] = X[i]
            for i in T.Parallel(32):
                Y[i] = tile[i]

    return roundtrip


@pytest.mark.parametrize("layout_fn", [lambda i: i % 16, lambda i: 0, lambda i: [i // 2, 0]])
def test_many_to_one_shared_layout_is_refused(layout_fn):
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError, match=r"shared buffer `tile` must be injective.*both map to physical coordinates"):
        _shared_roundtrip(layout_fn)


@pytest.mark.parametrize("layout_fn", [lambda i: i ^ 1, lambda i: i * 3 + 1, lambda i: [i % 4, i // 4]])
def test_injective_shared_layout_is_accepted_and_changes_nothing(layout_fn):
    kernel = tilelang.compile(_shared_roundtrip(layout_fn), target="c")
    x = torch.arange(32, dtype=torch.int32)
    y = torch.zeros(32, dtype=torch.int32)
    kernel(x, y)
    torch.testing.assert_close(y, x)
