"""Tile operators (issue 7) given wrong operands: a LoweringError that names the operator, the
operands and the kernel line (the operators check their operands when the kernel is defined)."""

from __future__ import annotations

import pathlib
import sys

import pytest
import tilelang.language as T

from tilelang_core.errors import LoweringError

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from source_lines import marked_line  # noqa: E402


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


def _definition_error(build) -> LoweringError:
    """The LoweringError raised while defining a kernel.

    ``T.prim_func`` re-raises the operator's LoweringError itself (not TVMScript's DiagnosticError
    that wraps exceptions raised inside a kernel body).
    """
    with pytest.raises(LoweringError) as info:
        build()
    # the operator's own error (LoweringError or one of its TileLang-compatible subclasses)
    assert type(info.value).__module__.startswith("tilelang_core."), f"expected a LoweringError, got {info.value!r}"
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

    def nested_store_order():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(8):
                    T.atomic_store(B[i], T.atomic_load(A[i]) * 2.0, memory_order="acquire")  # <atomic-nested>

    # the operands as the kernel wrote them, not the marker call the nested atomic_load became
    text = _check(nested_store_order, "atomic-nested", "T.atomic_store(B[i], T.atomic_load(A[i]) * 2.0)",
                  "atomic_store does not support memory_order='acquire'", "release")
    assert "call_extern" not in text and "tl.atomic" not in text, text

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


def test_fill_value_outside_the_dtype_range():
    """A literal that the tile's dtype cannot hold (a negative value for an unsigned tile, 300 for
    uint8, 1e10 for float16) names T.fill, the dtype and the value, not TVM's literal check."""

    def build(dtype, value):
        @T.prim_func
        def k(A: T.Tensor((16,), dtype)):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((16,), dtype)
                T.fill(S, value)  # <fill-range>
                T.copy(S, A)

    text = _check(lambda: build("uint8", -5), "fill-range", "T.fill(S, -5)", "-5 is negative for the unsigned type uint8", "0..255", "251")
    assert "Check failed" not in text, text
    _check(lambda: build("uint16", -1), "fill-range", "T.fill(S, -1)", "negative for the unsigned type uint16")
    _check(lambda: build("uint8", 300), "fill-range", "300 is out of range for uint8")
    _check(lambda: build("int8", 200), "fill-range", "200 is out of range for int8", "-128..127")
    _check(lambda: build("float16", 1e10), "fill-range", "T.fill(S, 10000000000.0)", "does not fit float16", "exceeds maximum of float16")
    # the extremes of the range are accepted
    build("uint8", 255)
    build("int8", -128)

    def alloc_var():
        @T.prim_func
        def k(A: T.Tensor((16,), "uint8")):
            with T.Kernel(1, threads=1) as _:
                x = T.alloc_var(T.uint8, init=-1)  # <var-range>
                A[0] = x

    _check(alloc_var, "var-range", "T.alloc_var", "initializer -1 is negative for the unsigned type uint8")


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

    # a single element, T.clear(A[3]), is a one-element region (as in TileLang); an expression is not
    def clear_elem():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.clear(A[3] + 1.0)  # <clear-elem>

    _check(clear_elem, "clear-elem", "T.clear(A[3] + 1.0)", "must be a buffer, a region")

    def stages():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.Pipelined(4, num_stages=-1):  # <pipelined>
                    A[i] = 0.0

    _check(stages, "pipelined", "T.Pipelined", "num_stages")


def test_reduction_and_scan_wrong_operands():
    def bitwise_float():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_local((4, 8), "float32")
                D = T.alloc_local((4,), "float32")
                T.reduce_bitor(S, D, dim=1)  # <reduce-bitor>

    _check(bitwise_float, "reduce-bitor", "T.reduce_bitor(S, D)", "dtype mismatch", "integer tiles")

    def nan_int():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "int32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_local((4, 8), "int32")
                D = T.alloc_local((4,), "int32")
                T.reduce_max(S, D, dim=1, nan_propagate=True)  # <reduce-nan>

    _check(nan_int, "reduce-nan", "T.reduce_max(S, D)", "nan_propagate=True needs float tiles")

    def scan_dim():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 8), "float32")
                T.cumsum(S, dim=2)  # <cumsum-dim>

    _check(scan_dim, "cumsum-dim", "T.cumsum(S)", "dim 2 is out of range", "(4, 8)")

    def scan_shape():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 8), "float32")
                D = T.alloc_shared((8, 4), "float32")
                T.cummax(S, D, dim=0)  # <cummax-shape>

    _check(scan_shape, "cummax-shape", "T.cummax(S, D)", "shape mismatch", "(8, 4)")


def test_layout_and_variable_wrong_operands():
    def transpose_shape():
        @T.prim_func
        def k(A: T.Tensor((2, 3, 4), "float32"), B: T.Tensor((2, 3, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.transpose(A, B)  # <transpose>

    _check(transpose_shape, "transpose", "T.transpose(A, B)", "shape mismatch", "(2, 4, 3)")

    def reshape_count():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                V = T.reshape(A, [3, 5])  # <reshape>
                A[0] = V[0, 0]

    text = _check(reshape_count, "reshape", "T.reshape(A, (3, 5))", "shape mismatch")
    assert "(16,)" in text

    def view_bits():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                V = T.view(A, [16], dtype="float16")  # <view>
                A[0] = V[0]

    with pytest.raises(AssertionError):  # a LoweringError that is also TileLang's AssertionError
        view_bits()
    _check(view_bits, "view", "T.view(A, (16,))", "does not cover the same bits", "float16")

    def var_scope():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                x = T.alloc_var("float32", 0.0, "texture")  # <alloc-var>
                A[0] = x

    _check(var_scope, "alloc-var", "T.alloc_var(float32)", "scope must be one of", "'texture'")

    with pytest.raises(LoweringError, match=r"T\.alloc_global\(\(8,\), float32\): called outside a kernel function"):
        T.alloc_global((8,), "float32")  # plain Python, no kernel being defined


def test_intrinsic_wrong_operands():
    def fast_int():
        @T.prim_func
        def k(A: T.Tensor((16,), "int32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.__exp(A[1])  # <fast-exp>

    with pytest.raises(TypeError):  # a LoweringError that is also a TypeError, as in TileLang
        fast_int()
    _check(fast_int, "fast-exp", "T.__exp(A[1])", "only supports floating-point inputs, but got int32")

    def mode():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.ieee_add(A[1], A[2], "up")  # <ieee-mode>

    # the modes in a fixed order (a Python set printed them in a different order in each process)
    _check(mode, "ieee-mode", "T.ieee_add(up)", "Invalid rounding mode 'up'. Must be one of: rn, rz, ru, rd")

    def half_mode():
        @T.prim_func
        def k(A: T.Tensor((16,), "float16")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.ieee_mul(A[1], A[2], "rz")  # <ieee-half-mode>

    _check(half_mode, "ieee-half-mode", "T.ieee_mul(A[1], A[2])", "float16 operands round to nearest only", "give rounding_mode='rn' (got 'rz')")

    def fma_mixed():
        @T.prim_func
        def k(A: T.Tensor((16,), "float64"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.ieee_fmaf(A[1], B[2], A[3])  # <ieee-fma-mixed>

    _check(fma_mixed, "ieee-fma-mixed", "T.ieee_fmaf(A[1], B[2], A[3])", "dtype mismatch: operands are float64, float32, float64")

    def dp4a_dtype():
        @T.prim_func
        def k(A: T.Tensor((4,), "uint8"), C: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=1) as _:
                T.dp4a(A, A, C)  # <dp4a>

    _check(dp4a_dtype, "dp4a", "T.dp4a(A, A, C)", "dp4a requires int8 inputs, got A.dtype='uint8'")

    def vote_float():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as _:
                for i in T.Parallel(32):
                    B[i] = T.any_sync(A[i])  # <any-sync>

    _check(vote_float, "any-sync", "T.any_sync(A[i])", "requires an integer or boolean predicate, but got float32")

    def packed():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.add2(A[0], A[1])  # <add2>

    _check(packed, "add2", "T.add2(A[0], A[1])", "Expected dtype in", "got 'float32'")


def test_lowering_refusals_name_the_statement():
    """Errors that can only be known for a target point at the operator's line when lowering."""
    from tilelang_core.lowering import lower

    @T.prim_func
    def prev_x2(D: T.Tensor((2,), "float16"), V: T.Tensor((2,), "float16"), P: T.Tensor((2,), "float16")):
        with T.Kernel(1, threads=1) as _:
            T.evaluate(T.atomic_addx2(D[0:2], V[0:2], return_prev=True))  # <addx2-prev>

    with pytest.raises(LoweringError) as info:  # CPU targets: refused, as in TileLang
        lower(prev_x2, target="c")
    assert f"{_THIS}:{_line_of('addx2-prev')}" in str(info.value)
    assert "return_prev=True) is not supported on CPU targets (c)" in str(info.value)
    with pytest.raises(LoweringError) as info:  # cuda: the 2 previous values must be stored somewhere
        lower(prev_x2, target="cuda")
    assert f"{_THIS}:{_line_of('addx2-prev')}" in str(info.value)
    assert "returns 2 values: store them into 2 consecutive elements" in str(info.value)

    @T.prim_func
    def tma(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1) as _:
            T.atomic_add(B, A, use_tma=True)  # <use-tma>

    with pytest.raises(LoweringError) as info:
        lower(tma, target="llvm", consumes=["runtime_module"])
    assert f"{_THIS}:{_line_of('use-tma')}" in str(info.value) and "use_tma=True" in str(info.value)

    @T.prim_func
    def ldg(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.Parallel(8):
                B[i] = T.__ldg(A[i])  # <ldg>

    with pytest.raises(LoweringError) as info:
        lower(ldg, target="c")
    assert f"{_THIS}:{_line_of('ldg')}" in str(info.value) and "T.__ldg is a GPU intrinsic" in str(info.value)


def test_reducer_wrong_use():
    def bitwise_float():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((1,), "float32", op="bitand")  # <reducer-bitand>
                T.reducer_init(acc)

    with pytest.raises(AssertionError):  # TileLang asserts here; also a LoweringError
        bitwise_float()
    _check(bitwise_float, "reducer-bitand", "T.alloc_reducer((1,), float32)", "requires an integer dtype")

    def double_init():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((1,), "float32")
                T.reducer_init(acc)
                T.reducer_init(acc)  # <reducer-double>

    _check(double_init, "reducer-double", "T.reducer_init(acc)", "double T.reducer_init")

    def early_update():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((1,), "float32")
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])  # <reducer-early>

    _check(early_update, "reducer-early", "T.reducer_update(acc", "before T.reducer_init of 'acc'")

    def bad_batch():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((1,), "float32", replication="all")
                T.finalize_reducer(acc, batch=0)  # <reducer-batch>

    _check(bad_batch, "reducer-batch", "T.finalize_reducer(acc)", "batch must be >= 1")

    def batch_too_big():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer(64, "float32", replication="all")
                T.finalize_reducer(acc, batch=128)  # <reducer-batch-big>

    _check(batch_too_big, "reducer-batch-big", "T.finalize_reducer(acc)", "batch 128 exceeds total output elements (64)")

    def batch_not_dividing():
        @T.prim_func
        def k(A: T.Tensor((64, 8), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as _:
                src = T.alloc_fragment((64, 8), "float32")
                dst = T.alloc_fragment((64,), "float32")
                T.copy(A, src)
                T.reduce_sum(src, dst, dim=1, batch=3)  # <reduce-batch-3>

    _check(batch_not_dividing, "reduce-batch-3", "T.reduce_sum(src, dst)", "batch 3 must evenly divide total output elements (64)")


def test_reducer_update_outside_parallel_is_refused_when_lowering():
    from tilelang_core.lowering import lower

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as _:
            acc = T.alloc_reducer((1,), "float32")
            T.reducer_init(acc)
            T.reducer_update(acc[0], A[0])  # <reducer-outside>
            T.finalize_reducer(acc, B)

    for target in ("c", "cuda"):
        with pytest.raises(LoweringError) as info:
            lower(k, target=target)
        assert f"{_THIS}:{_line_of('reducer-outside')}" in str(info.value) and "outside any T.Parallel" in str(info.value)


def test_gpu_kernel_whose_only_statement_writes_nothing():
    """A T.Kernel whose only statement fills or clears a region entirely outside its tensor writes
    nothing (a no-op on CPU targets); on CUDA the simplifier removes the whole kernel, which was
    refused as "launches nothing ... wrap its body in T.Kernel" although the body is in one."""
    import torch

    import tilelang
    from tilelang_core.lowering import lower

    def build(op):
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as _:
                if op == "clear":
                    T.clear(A[16:20])
                else:
                    T.fill(A[16:20], 1.0)

        return k

    for op in ("clear", "fill"):
        with pytest.raises(LoweringError) as info:
            lower(build(op), target="cuda")
        text = str(info.value)
        assert "does nothing on cuda" in text and "entirely outside its tensor" in text, text
        assert "wrap its body" not in text, text
        a = torch.arange(16, dtype=torch.float32)
        tilelang.compile(build(op), target="c", execution_backend="cython")(a)
        assert torch.equal(a, torch.arange(16, dtype=torch.float32))

    @T.prim_func
    def no_kernel(A: T.Tensor((16,), "float32")):
        for i in T.serial(16):
            A[i] = 0.0

    with pytest.raises(LoweringError, match="launches nothing on cuda: wrap its body"):
        lower(no_kernel, target="cuda")
