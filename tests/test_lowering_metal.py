"""Metal sources from the pipeline: one translation unit for all device kernels, the union members
TVM 0.27 reads but does not declare (the fix the pipeline applies), and each kernel's scalar struct
described as data (``DeviceKernel.scalar_struct``), checked against the generated source."""

from __future__ import annotations

import re

import pytest

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower
from tilelang_core.lowering.msl import UNION_MEMBERS, finish_source, split_items

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32"]


def scaled(dtype):
    N = T.dynamic("n")

    @T.prim_func
    def scaled(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), s: getattr(T, dtype)):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < N:
                    Y[bx * 64 + i] = X[bx * 64 + i] + T.Cast("float32", s)

    return scaled


def two_kernels():
    N = T.dynamic("n")

    @T.prim_func
    def two(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32"), h: T.float16,
            b: T.bool):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < N:
                    B[bx * 64 + i] = A[bx * 64 + i] * T.Cast("float32", h)
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:  # another grid: identical ones are hoisted (see report)
            for i in T.Parallel(32):
                if bx * 32 + i < N:
                    C[bx * 32 + i] = T.if_then_else(b, B[bx * 32 + i], 0.0)

    return two


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_layout_of_every_dtype(dtype):
    art = lower(scaled(dtype), target="metal")
    (kernel,) = art.device_kernels
    struct = kernel.scalar_struct
    assert struct.type_name == "scaled_kernel_args_t" and struct.binding == 2 and struct.size == 16
    assert [(s.field, s.offset, s.dtype, s.size) for s in struct.slots] == [("n", 0, "int32", 8), ("s", 8, dtype, 8)]
    assert [kernel.args[s.arg].name for s in struct.slots] == ["n", "s"]
    src = art.device_source
    assert "constant scaled_kernel_args_t& arg [[ buffer(2) ]]" in src
    if dtype in UNION_MEMBERS:  # read through the union: the member is declared now
        member, mtype = UNION_MEMBERS[dtype]
        assert f"arg.s.{member}" in src
        union = re.search(r"union __TVMArgUnion \{(.*?)\};", src, re.S).group(1)
        assert f" {mtype} {member};" in union and " int v_int[2];" in union


def test_float64_scalars_are_refused_by_the_metal_codegen():
    with pytest.raises(LoweringError, match="float64"):
        lower(scaled("float64"), target="metal")


def test_several_device_kernels_make_one_translation_unit():
    art = lower(two_kernels(), target="metal")
    src = art.device_source
    assert src.count("#include <metal_stdlib>") == 1 and src.count("using namespace metal;") == 1
    assert src.count("union __TVMArgUnion") == 1
    union = re.search(r"union __TVMArgUnion \{(.*?)\};", src, re.S).group(1)
    assert " half v_half;" in union and " bool v_bool;" in union
    first, second = art.device_kernels
    assert [s.field for s in first.scalar_struct.slots] == ["h", "n"]  # TVM orders scalars by name
    assert [s.field for s in second.scalar_struct.slots] == ["b", "n"]
    assert first.scalar_struct.type_name != second.scalar_struct.type_name
    assert src.index("union __TVMArgUnion") < src.index("struct " + first.scalar_struct.type_name)


def test_kernel_without_scalars_has_no_struct():
    @T.prim_func
    def copy(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i]

    art = lower(copy, target="metal")
    assert art.device_kernels[0].scalar_struct is None and "struct " not in art.device_source


def test_the_layout_survives_json():
    from tilelang_core.artifact import KernelArtifact

    art = lower(two_kernels(), target="metal")
    assert KernelArtifact.from_json(art.to_json()) == art


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("  __TVMArgUnion h;\n  int n[2];", "  int n[2];\n  __TVMArgUnion h;", r"has members \['n', 'h'\].*takes scalars \['h', 'n'\]"),
        ("  __TVMArgUnion h;\n  int n[2];", "  __TVMArgUnion h;\n  long n;", "declares scalar 'n' \\(int32\\) as 'long n'"),
        ("arg.h.v_half", "arg.h.v_quarter", "unknown scalar union member 'v_quarter'"),
        ("arg.h.v_half", "arg.h.v_bool", "reads float16 scalar 'h' as union member 'v_bool'"),
        ("& arg [[ buffer(2) ]]", "& arg [[ buffer(4) ]]", r"binds its scalar struct to buffer\(4\), expected buffer\(2\)"),
    ],
)
def test_a_source_of_another_shape_is_a_lowering_error(old, new, message):
    """What TVM 0.27 writes is checked, so a different layout fails here instead of on a device."""
    art = lower(two_kernels(), target="metal")
    raw = art.device_source  # already merged; finishing it again is a no-op apart from the edit
    assert old in raw, old
    kernels = [k.__class__(**{**k.__dict__, "scalar_struct": None}) for k in art.device_kernels]
    assert finish_source(raw, kernels, "here")[1] == art.device_kernels
    with pytest.raises(LoweringError, match=message):
        finish_source(raw.replace(old, new, 1), kernels, "here")


def test_split_items_keeps_top_level_blocks_whole():
    items = split_items("#include <a>\n\nunion U {\n int x;\n};\n// note\nkernel void k(int a,\n int b) {\n  if (a) {\n  }\n}\n")
    assert items == ["#include <a>", "union U {\n int x;\n};", "// note", "kernel void k(int a,\n int b) {\n  if (a) {\n  }\n}"]


def _float8_round_trip(dtype):
    @T.prim_func
    def round_trip(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i] = T.Cast("float32", T.Cast(dtype, X[i]))

    return round_trip


@pytest.mark.parametrize("target", ["metal", "opencl"])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_is_refused_where_tvm_only_emulates_it_wrongly(target, dtype):
    """TVM emulated float8 for Metal (and OpenCL) with bit tricks that read the e4m3fn byte 0x00 as
    0.0078125 and a NaN as 480: a silently wrong kernel. Lowering now refuses it, naming the conversion."""
    from tilelang_core.errors import TargetFeatureError

    with pytest.raises(TargetFeatureError, match=rf"uses {dtype} \(the conversion .*\), which the {target} target "
                                                 r"cannot compute correctly.*float16, bfloat16 or float32"):
        lower(_float8_round_trip(dtype), target=target)
    assert "__nv_fp8" in lower(_float8_round_trip(dtype), target="cuda").device_source  # CUDA has its own types
