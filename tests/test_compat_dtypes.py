"""Dtypes as values: ``T.float16`` & co. wherever a dtype string works, ``T.dtype``, ``as_torch``."""

from __future__ import annotations

import pickle

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from tilelang.language import dtypes as D


def test_dtype_names_are_strings_and_tvm_datatypes():
    assert T.float16 == "float16" and isinstance(T.float16, str)
    assert isinstance(T.float16, tvm.DataType)
    assert T.float16.bits == 16 and T.float16.bytes == 2 and T.float16.lanes == 1
    assert T.float16x4.lanes == 4 and T.float16x4.element_of == T.float16
    # TileLang's C-style aliases
    assert (T.half, T.float, T.double, T.int, T.long, T.short) == ("float16", "float32", "float64", "int32", "int64", "int16")
    assert T.dtypes is D and D.bfloat16 is T.bfloat16


def test_dtype_constructor_accepts_names_torch_and_python_types():
    assert T.dtype("half") == "float16"
    assert T.dtype(torch.bfloat16) == "bfloat16"
    assert T.dtype(torch.float8_e4m3fn) == "float8_e4m3fn"
    assert T.dtype(float) == "float32" and T.dtype(int) == "int32" and T.dtype(bool) == "bool"
    assert T.dtype(T.int8) is T.int8
    with pytest.raises(ValueError, match="unknown dtype 'notadtype'"):
        T.dtype("notadtype")
    with pytest.raises(TypeError, match="not a dtype"):
        T.dtype(3.5)


def test_as_torch_round_trips_and_refuses_what_torch_lacks():
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"):
        d = T.dtype(name)
        assert d.as_torch() is getattr(torch, name)
        assert T.dtype(d.as_torch()) == d
    assert T.float8_e5m2.as_torch() is torch.float8_e5m2
    assert T.float4_e2m1fn.as_torch() is torch.float4_e2m1fn_x2  # torch's packed storage type
    with pytest.raises(TypeError, match="no torch equivalent"):
        T.float8_e4m3.as_torch()
    assert D.resolve_torch_storage_dtype(T.int4) == T.int8
    assert D.resolve_torch_storage_dtype(T.float16) == T.float16


def test_dtype_predicates_and_pickling():
    assert D.is_float4(T.float4_e2m1fn) and D.is_float4_e2m1fn("float4_e2m1fnx2")
    assert not D.is_float4(T.float8_e4m3fn) and D.is_f8f6f4_family(T.float8_e4m3fn)
    assert not D.is_f8f6f4_family(T.float16)
    back = pickle.loads(pickle.dumps(T.bfloat16))
    assert back == T.bfloat16 and isinstance(back, D.dtype)


def test_dtype_values_build_expressions():
    zero = T.float32(0)
    assert isinstance(zero, tvm.tirx.FloatImm) and zero.ty.dtype == "float32"
    three = T.int8(3)
    assert isinstance(three, tvm.tirx.IntImm) and three.ty.dtype == "int8" and three.value == 3
    assert tvm.ir.PrimType(T.float16).dtype == "float16"
    assert tvm.tirx.Var("x", T.int64).ty.dtype == "int64"
    packed = T.float32x2(1.0, 2.0)
    assert packed.ty.dtype == "float32x2"
    with pytest.raises(ValueError, match="one value per lane"):
        T.float32x4(1.0, 2.0)


def _kernel_with_dtype_values():
    @T.prim_func
    def scaled_copy(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float32), alpha: T.float32):
        with T.Kernel(2, threads=32) as bx:
            shared = T.alloc_shared((32,), T.float16)
            local = T.alloc_local((32,), T.float32)
            frag = T.alloc_fragment((32,), T.float32)
            for i in T.serial(32):
                shared[i] = A[bx * 32 + i]
            for i in T.serial(32):
                local[i] = T.cast(shared[i], T.float32) * alpha
            for i in T.Parallel(32):
                frag[i] = local[i] + T.float32(1)
            for i in T.serial(32):
                B[bx * 32 + i] = frag[i]

    return scaled_copy


def test_dtype_values_in_allocations_annotations_and_casts():
    kernel = tilelang.compile(_kernel_with_dtype_values(), target="c", execution_backend="cython")
    a = torch.randn(64).half()
    b = torch.empty(64)
    kernel(a, b, 3.0)
    torch.testing.assert_close(b, a.float() * 3.0 + 1.0)
    assert [p.dtype for p in kernel.params] == ["float16", "float32", "float32"]


def test_fp8_module_picks_the_ocp_formats_off_rocm_and_refuses_unknown_formats():
    from tilelang.language import fp8

    assert torch.version.hip is None  # this suite's torch: CPU (CUDA elsewhere), never ROCm
    assert fp8.determine_fp8_type() == "float8_e4m3fn" and fp8.determine_fp8_type("e5m2") == "float8_e5m2"
    assert isinstance(fp8.determine_fp8_type(), D.dtype)
    assert fp8.determine_torch_fp8_type("e4m3") is torch.float8_e4m3fn
    assert fp8.determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    with pytest.raises(ValueError, match=r"fp8_format must be one of 'e4m3', 'e5m2'.*got 'e3m4'"):
        fp8.determine_fp8_type("e3m4")


def test_fp8_module_picks_fnuz_under_a_stand_in_rocm_torch_without_gfx950(monkeypatch):
    """A stand-in for a ROCm build of torch (none can exist on this machine)."""
    from tilelang.language import fp8

    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert fp8.determine_fp8_type("e4m3") == "float8_e4m3fnuz"
    assert fp8.determine_torch_fp8_type("e5m2") is torch.float8_e5m2fnuz
