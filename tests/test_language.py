"""The kernel language (tilelang_core.language, used as ``import tilelang.language as T``)."""

from __future__ import annotations

import inspect
import os
import sys

import pytest

import tilelang_core.language as T

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
from source_lines import line_containing  # noqa: E402


def _line_of(marker: str) -> int:
    return line_containing(HERE, marker)


def vector_add(N, block=128, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):  # lang-def-line
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:  # lang-kernel-line
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def grid2d(M, N):
    @T.prim_func
    def copy2d(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, 8), T.ceildiv(M, 8), threads=(8, 8)) as (bx, by):
            frag = T.alloc_fragment((8, 8), T.float16)
            for i, j in T.Parallel(8, 8):
                frag[i, j] = A[by * 8 + i, bx * 8 + j]
            for i, j in T.Parallel(8, 8):
                B[by * 8 + i, bx * 8 + j] = frag[i, j]

    return copy2d


def test_prim_func_finds_annotation_only_variables_without_inspect_stack(monkeypatch):
    """``inspect.stack()`` scans ``sys.modules`` for every frame (about 0.15 s per kernel once torch
    is imported), so ``T.prim_func`` walks the frames itself. ``dtype`` below is used only in the
    annotations, which are strings in this module, so TVMScript must find it in the caller's frame."""

    def refuse(*args, **kwargs):
        raise AssertionError("T.prim_func called inspect.stack()")

    monkeypatch.setattr(inspect, "stack", refuse)
    func = vector_add(64, dtype="float16")
    assert [str(p.dtype) for p in func.params] == ["float16"] * 3
    assert func.attrs["tl.source_location"] == f"{HERE}:{_line_of('lang-def-line')}"


def test_tvmscript_surface_is_reexported():
    for name in ("prim_func", "Buffer", "serial", "parallel", "unroll", "vectorized", "grid", "launch_thread",
                 "thread_binding", "alloc_shared", "alloc_local", "macro", "exp", "max", "if_then_else",
                 "float16", "float32", "bfloat16", "int32", "int8"):
        assert hasattr(T, name), name
    for name in ("Tensor", "dynamic", "symbolic", "ceildiv", "Kernel", "Parallel", "alloc_fragment"):
        assert hasattr(T, name), name


def test_tilelang_facade_is_the_same_module():
    import tilelang.language as facade

    assert facade.Kernel is T.Kernel and facade.Tensor is T.Tensor


def test_dynamic_symbol_and_ceildiv():
    n = T.dynamic("n")
    assert str(n) == "n" and str(n.ty.dtype) == "int32"
    assert T.symbolic is T.dynamic
    assert str(T.dynamic("m", "int64").ty.dtype) == "int64"
    assert T.ceildiv(1000, 128) == 8 and T.ceildiv(1024, 128) == 8
    assert "n" in str(T.ceildiv(n, 128))
    batch, seq = T.dynamic("batch, seq_len")  # several names: one symbol each, as TileLang
    assert (str(batch), str(seq)) == ("batch", "seq_len")
    for bad in ("1st", "a-b", "", " , "):
        with pytest.raises(ValueError, match="identifier"):
            T.dynamic(bad)


def test_dtype_constants_and_strings_are_accepted():
    assert T.dtype_name(T.float16) == "float16"
    assert T.dtype_name("bfloat16") == "bfloat16"
    func = grid2d(16, 32)
    assert [str(p.dtype) for p in func.params] == ["float16", "float16"]


def test_kernel_records_grid_threads_and_source_line():
    func = vector_add(T.dynamic("n"))
    text = func.script()
    assert "tl.kernel_axis" in text and "tl.kernel_threads" in text
    assert f"{HERE}:{_line_of('# lang-kernel-line')}" in text
    assert str(func.attrs["tl.source_location"]) == f"{HERE}:{_line_of('# lang-def-line')}"


def test_parallel_and_fragment_markers():
    text = grid2d(16, 32).script()
    assert text.count('"tl.parallel"') == 2
    assert "T.alloc_local((8, 8)" in text or "alloc_buffer" in text
    assert '"tl.kernel_ndim": 2' in text and "[8, 8, 1]" in text


def test_kernel_argument_errors():
    with pytest.raises(ValueError, match="1 to 3 grid extents"):
        T.Kernel(1, 2, 3, 4)
    with pytest.raises(TypeError, match="threads"):
        T.Kernel(4, threads="many")
    # a static grid of 0 (or less) is empty and launches nothing (tests/test_empty_grid.py)
    assert T.Kernel(0).grid == (0,) and T.Kernel(4, -2).grid == (4, 0)
    # past the 32-bit block index: llvm stopped with TVM's "Literal value 2147483648 exceeds range of int32"
    with pytest.raises(ValueError, match=r"grid extent #1 is 2147483648: at most 2147483647 \(2\*\*31 - 1\) blocks"):
        T.Kernel(4, 2**31)
    assert T.Kernel(2**31 - 1).grid == (2**31 - 1,)


def test_prim_func_keeps_tvmscript_semantics():
    @T.prim_func
    def plain(A: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            A[i] = T.float32(1)

    assert plain.attrs["global_symbol"] == "plain"
    assert str(plain.attrs["tl.source_location"]).endswith(f":{inspect.currentframe().f_lineno - 5}")


def test_tile_operator_error_in_kernel_body_is_a_lowering_error_not_a_diagnostic():
    """T.prim_func re-raises our error (not TVMScript's DiagnosticError), keeping file:line."""
    from tvm.error import DiagnosticError

    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError) as info:

        @T.prim_func
        def bad(A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.copy(A, B)  # body-error-line

    assert not isinstance(info.value, DiagnosticError)
    assert str(info.value).startswith(f"{HERE}:{_line_of('# body-error-line')}: T.copy(A, B)")


def test_other_errors_in_kernel_body_keep_tvmscript_diagnostic():
    from tvm.error import DiagnosticError

    with pytest.raises(DiagnosticError):

        @T.prim_func
        def bad(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, 2, 3, 4) as _:
                A[0] = 1.0


def test_single_alloc_fragment_with_fragment_scope():
    from tilelang_core.language import core, tileops

    assert T.alloc_fragment is core.alloc_fragment is tileops.alloc_fragment
    text = grid2d(16, 32).script()
    assert "local.fragment" in text


def test_kernel_accepts_is_cpu():
    k = T.Kernel(4, 2, is_cpu=True)
    assert k.is_cpu and k.grid == (4, 2)
    assert not T.Kernel(4).is_cpu
    with pytest.raises(TypeError, match="is_cpu"):
        T.Kernel(4, is_cpu="yes")
