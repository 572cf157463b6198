"""Tile operators (issue 7) given wrong operands: a LoweringError that names the operator, the
operands and the kernel line (the operators check their operands when the kernel is defined)."""

from __future__ import annotations

import pathlib

import pytest
import tilelang.language as T

from tilelang_core.errors import LoweringError

_THIS = pathlib.Path(__file__).resolve()
_LINES = _THIS.read_text().splitlines()


def _line_of(marker: str) -> int:
    hits = [i + 1 for i, text in enumerate(_LINES) if text.rstrip().endswith(f"# <{marker}>")]
    assert len(hits) == 1, marker
    return hits[0]


def _definition_error(build) -> LoweringError:
    """The LoweringError raised while defining a kernel.

    ``T.prim_func`` re-raises the operator's LoweringError itself (not TVMScript's DiagnosticError
    that wraps exceptions raised inside a kernel body).
    """
    with pytest.raises(LoweringError) as info:
        build()
    assert type(info.value) is LoweringError, f"expected a LoweringError, got {info.value!r}"
    return info.value


def _check(build, marker, *needles):
    err = _definition_error(build)
    text = str(err)
    assert f"{_THIS}:{_line_of(marker)}" in text, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"
    return text


def test_copy_shape_and_rank_mismatch():
    def shape():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((16, 16), "float32")
                T.copy(A[0:32, 0:16], S)  # <copy-shape>

    _check(shape, "copy-shape", "T.copy(A[0:32, 0:16], S)", "shape mismatch", "(32, 16)", "(16, 16)")

    def rank():
        @T.prim_func
        def k(A: T.Tensor((4, 64, 64), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((16, 16), "float32")
                T.copy(A[0:2, 0:16, 0:16], S)  # <copy-rank>

    _check(rank, "copy-rank", "T.copy(", "rank mismatch")


def test_copy_dtype_mismatch():
    def build():
        @T.prim_func
        def k(A: T.Tensor((16,), "bool"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.copy(A, B)  # <copy-dtype>

    _check(build, "copy-dtype", "T.copy(A, B)", "dtype mismatch", "bool", "float32")


def test_gemm_wrong_operands():
    def scope():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float16")):
            with T.Kernel(1, threads=1) as _:
                B = T.alloc_shared((16, 16), "float16")
                C = T.alloc_fragment((16, 16), "float32")
                T.gemm(A, B, C)  # <gemm-scope>

    _check(scope, "gemm-scope", "T.gemm(A, B, C)", "wrong scope", "'A'", "global")

    def shape():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A = T.alloc_shared((16, 8), "float16")
                B = T.alloc_shared((16, 16), "float16")
                C = T.alloc_fragment((16, 16), "float32")
                T.gemm(A, B, C)  # <gemm-shape>

    _check(shape, "gemm-shape", "T.gemm(A, B, C)", "shape mismatch", "K = 8", "K = 16")

    def dtype():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A = T.alloc_shared((16, 16), "float16")
                B = T.alloc_shared((16, 16), "float32")
                C = T.alloc_fragment((16, 16), "float32")
                T.gemm(A, B, C)  # <gemm-dtype>

    _check(dtype, "gemm-dtype", "dtype mismatch", "float16", "float32")

    def rank():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A = T.alloc_shared((2, 16, 16), "float32")
                B = T.alloc_shared((16, 16), "float32")
                C = T.alloc_fragment((16, 16), "float32")
                T.gemm(A, B, C)  # <gemm-rank>

    _check(rank, "gemm-rank", "T.gemm(A, B, C)", "rank mismatch", "'A'")

    def transposed():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A = T.alloc_shared((16, 8), "float32")
                B = T.alloc_shared((8, 16), "float32")
                C = T.alloc_fragment((16, 16), "float32")
                T.gemm(A, B, C, transpose_A=True)  # <gemm-trans>

    _check(transposed, "gemm-trans", "shape mismatch", "(transposed)")


def test_reduce_wrong_operands():
    def shape():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_fragment((8, 16), "float32")
                D = T.alloc_fragment((16,), "float32")
                T.reduce_sum(S, D, dim=1)  # <reduce-shape>

    _check(shape, "reduce-shape", "T.reduce_sum(S, D)", "shape mismatch", "(8,)", "(16,)")

    def dim():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_fragment((8, 16), "float32")
                D = T.alloc_fragment((8,), "float32")
                T.reduce_max(S, D, dim=2)  # <reduce-dim>

    _check(dim, "reduce-dim", "T.reduce_max(S, D)", "dim 2 is out of range")

    def scope():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                D = T.alloc_fragment((8,), "float32")
                T.reduce_min(A, D, dim=1)  # <reduce-scope>

    _check(scope, "reduce-scope", "T.reduce_min(A, D)", "wrong scope", "global")

    def dtype():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_fragment((8, 16), "float32")
                D = T.alloc_fragment((8,), "int32")
                T.reduce_abssum(S, D, dim=1)  # <reduce-dtype>

    _check(dtype, "reduce-dtype", "T.reduce_abssum(S, D)", "dtype mismatch", "int32")

    def rank():
        @T.prim_func
        def k(X: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_fragment((8, 16), "float32")
                D = T.alloc_fragment((2, 8, 1), "float32")
                T.reduce_absmax(S, D, dim=1)  # <reduce-rank>

    _check(rank, "reduce-rank", "T.reduce_absmax(S, D)", "rank mismatch")


def test_atomic_wrong_operands():
    def order():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_max(A[0], 1.0, memory_order="sometimes")  # <atomic-order>

    _check(order, "atomic-order", "T.atomic_max(A[0], 1.0)", "atomic_max does not support memory_order='sometimes'", "seq_cst")

    def prev_tile():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_min(C, A, return_prev=True)  # <atomic-prev>

    _check(prev_tile, "atomic-prev", "T.atomic_min(C, A)", "return_prev=True needs a single-element destination")

    def bitwise():
        @T.prim_func
        def k(C: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_or(C[0], 1)  # <atomic-or>

    _check(bitwise, "atomic-or", "T.atomic_or(C[0], 1)", "dtype mismatch", "float32", "int32")

    def load_order():
        @T.prim_func
        def k(C: T.Tensor((8,), "int32"), D: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=1) as _:
                D[0] = T.atomic_load(C[0], memory_order="release")  # <atomic-load>

    _check(load_order, "atomic-load", "T.atomic_load(C[0])", "atomic_load does not support memory_order='release'", "acquire")

    def lanes():
        @T.prim_func
        def k(C: T.Tensor((8,), "float16"), V: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_addx2(C[0:3], V[0:3])  # <atomic-x2>

    _check(lanes, "atomic-x2", "T.atomic_addx2(C[0:3], V[0:3])", "must be 2 consecutive elements")

    def shape():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32"), C: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_add(C, A)  # <atomic-shape>

    _check(shape, "atomic-shape", "T.atomic_add(C, A)", "shape mismatch")

    def dtype():
        @T.prim_func
        def k(C: T.Tensor((8,), "int8")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_add(C[0], 1)  # <atomic-dtype>

    _check(dtype, "atomic-dtype", "T.atomic_add(C[0], 1)", "dtype mismatch", "int8")


def test_fill_clear_and_pipelined_wrong_operands():
    def fill_buf():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.fill(A, B)  # <fill-value>

    _check(fill_buf, "fill-value", "T.fill(A, B)", "value must be a scalar")

    def fill_dtype():
        @T.prim_func
        def k(A: T.Tensor((16,), "int32")):
            with T.Kernel(1, threads=1) as _:
                T.fill(A, 0.5)  # <fill-dtype>

    _check(fill_dtype, "fill-dtype", "T.fill(A, 0.5)", "dtype mismatch", "int32")

    def clear_elem():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.clear(A[3])  # <clear-elem>

    _check(clear_elem, "clear-elem", "T.clear(A[3])", "must be a buffer or a region")

    def stages():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.Pipelined(4, num_stages=-1):  # <pipelined>
                    A[i] = 0.0

    _check(stages, "pipelined", "T.Pipelined", "num_stages")
