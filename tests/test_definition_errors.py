"""Wrong operands of allocations, loops and scalar operators, found by fuzzing kernel definitions:
each is a LoweringError at the kernel's line that names the operator, the operand, what was
expected and what was given (before: a raw TVM error, an FFI signature, an internal "rank", or a
crashed process for ``T.if_then_else(None, ...)`` and ``T.serial(None)``)."""

from __future__ import annotations

import pathlib
import sys

import pytest
import tilelang.language as T

from tilelang_core.errors import LoweringError

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from source_lines import marked_line, message_at  # noqa: E402


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


def _message(build, marker: str, error: type = LoweringError) -> str:
    """The message of the LoweringError (an ``error``) raised while defining a kernel, without its
    ``file:line: `` prefix (checked to be the marked line)."""
    return message_at(_THIS, marker, build, error, raised=LoweringError)


_SCALAR = "must be a scalar expression (a number, an element A[i], a T.alloc_var)"
_DTYPE = "expected a dtype string such as 'float32', 'float16', 'int32' or a constant such as T.float32"
_LOOP = "must be an int or an integer expression (a T.dynamic size, a loop variable)"


def test_if_then_else_condition_none_string_and_number():
    def none():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.if_then_else(None, A[1], A[2])  # <ite-none>

    assert _message(none, "ite-none", TypeError) == f"T.if_then_else: the condition {_SCALAR}, got NoneType None"

    def text():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.if_then_else(A[0] > 0, A[1], "x")  # <ite-str>

    assert _message(text, "ite-str", TypeError) == f"T.if_then_else: the false value {_SCALAR}, got str 'x'"

    def number():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.if_then_else(A[3], A[1], A[2])  # <ite-float>

    assert _message(number, "ite-float", TypeError) == (
        "T.if_then_else: the condition must be a boolean expression (a comparison such as A[i] > 0), "
        "got the float32 expression A[3]; compare it (x != 0) to test a number")


def test_max_min_clamp_refuse_non_scalars():
    def max_none():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.max(None, A[1])  # <max-none>

    assert _message(max_none, "max-none", TypeError) == f"T.max: the first operand {_SCALAR}, got NoneType None"

    def min_str():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.min(A[0], "x")  # <min-str>

    assert _message(min_str, "min-str", TypeError) == f"T.min: the second operand {_SCALAR}, got str 'x'"

    def clamp_buffer():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float32")
                A[0] = T.clamp(A[0], S, 1.0)  # <clamp-buffer>

    assert _message(clamp_buffer, "clamp-buffer", TypeError) == (
        f"T.clamp: min_val {_SCALAR}, got the buffer S (4, 4) float32 (index it, S[...], for one element)")

    def clamp_region():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.clamp(A[0:2], 0.0, 1.0)  # <clamp-region>

    assert _message(clamp_region, "clamp-region", TypeError) == (
        f"T.clamp: the value {_SCALAR}, got the region A[0:2] (a region is a tile; index the buffer for one element)")


def test_cast_dtype_and_value():
    def dtype():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                B[0] = T.cast(A[0], None)  # <cast-dtype>

    assert _message(dtype, "cast-dtype", TypeError) == f"T.cast: dtype must be a dtype: {_DTYPE}, got NoneType None"

    def value():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                B[0] = T.cast((1, 2), "int32")  # <cast-value>

    assert _message(value, "cast-value", TypeError) == f"T.cast: the value {_SCALAR}, got tuple (1, 2)"


def test_allocation_extents_and_dtypes():
    def zero():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                L = T.alloc_local((0,), "float32")  # <alloc-zero>
                L[0] = A[0]
                A[1] = L[0]

    assert _message(zero, "alloc-zero") == (
        "T.alloc_local: shape (0,): every extent must be at least 1, got 0 (a tile needs at least one element)")

    def negative():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                F = T.alloc_fragment((4, -1), "float32")  # <alloc-negative>
                T.fill(F, 0.0)

    assert _message(negative, "alloc-negative") == (
        "T.alloc_fragment: shape (4, -1): every extent must be at least 1, got -1 (a tile needs at least one element)")

    def float_extent():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((A[0], 4), "float32")  # <alloc-float>
                T.fill(S, 0.0)

    assert _message(float_extent, "alloc-float", TypeError) == (
        "T.alloc_shared: shape (A[0], 4): every extent must be an int or an integer expression (a T.dynamic size), "
        "got the float32 expression A[0]")

    def var_dtype():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                v = T.alloc_var(1.5)  # <var-dtype>
                v = A[0]
                A[1] = v

    assert _message(var_dtype, "var-dtype", TypeError) == f"T.alloc_var: dtype must be a dtype: {_DTYPE}, got float 1.5"

    def unknown_dtype():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                L = T.alloc_local((4,), "fp32")  # <alloc-dtype>
                T.fill(L, 0.0)

    assert _message(unknown_dtype, "alloc-dtype", TypeError) == f"T.alloc_local: unknown dtype 'fp32': {_DTYPE}"


def test_loop_bounds():
    def serial_none():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(None):  # <serial-none>
                    A[i] = 0.0

    assert _message(serial_none, "serial-none", TypeError) == f"T.serial: extent {_LOOP}, got NoneType None"

    def parallel_str():
        @T.prim_func
        def k(A: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i, j in T.Parallel(4, "x"):  # <parallel-str>
                    A[i, j] = 0.0

    assert _message(parallel_str, "parallel-str", TypeError) == f"T.Parallel: extent 2 {_LOOP}, got str 'x'"

    def pipelined_buffer():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4,), "float32")
                for i in T.Pipelined(S, num_stages=2):  # <pipelined-buffer>
                    A[i] = 0.0

    assert _message(pipelined_buffer, "pipelined-buffer", TypeError) == (
        f"T.Pipelined: extent {_LOOP}, got the buffer S (4,) float32")

    def vectorized_float():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.vectorized(A[0]):  # <vectorized-float>
                    A[i] = 0.0

    assert _message(vectorized_float, "vectorized-float", TypeError) == (
        f"T.vectorized: extent {_LOOP}, got the float32 expression A[0]")

    def serial_float_stop():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(0, 64 / 16):  # <serial-float-stop>
                    A[i] = 0.0

    assert _message(serial_float_stop, "serial-float-stop", TypeError) == f"T.serial: stop {_LOOP}, got float 4.0"


def test_atomic_element_destination_with_higher_rank_value():
    def build():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((2, 4, 4), "float32")
                T.fill(S, 1.0)
                T.atomic_add(B[0, 0], S)  # <atomic-rank>

    assert _message(build, "atomic-rank") == (
        "T.atomic_add(B[0, 0], S): rank mismatch: the value tile (2, 4, 4) has more dimensions than the "
        "destination 'B' (4, 4); give a destination region of the value's rank")


def test_reshape_and_view_shapes():
    def reshape_none():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                V = T.reshape(A, None)  # <reshape-none>
                V[0] = 1.0

    assert _message(reshape_none, "reshape-none", TypeError) == (
        "T.reshape: shape (None,): every extent must be an int or an integer expression (a T.dynamic size), "
        "got NoneType None")

    def view_dtype():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                V = T.view(A, (16,), dtype="fp32")  # <view-dtype>
                V[0] = 1.0

    assert _message(view_dtype, "view-dtype", TypeError) == f"T.view: unknown dtype 'fp32': {_DTYPE}"


def test_cast_rounding_names_the_operator_and_line():
    def build():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                B[0] = T.cast(A[0], "int32", 1)  # <cast-round>

    assert _message(build, "cast-round", ValueError) == (
        "T.cast: Invalid round 1. Must be one of: ['', 'rm', 'rn', 'rp', 'rs', 'rz']")


def test_scan_reverse_must_be_a_bool():
    def reverse():
        @T.prim_func
        def k(A: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float32")
                T.copy(A, S)
                T.cumsum(S, dim=0, reverse=S)  # <cumsum-reverse>
                T.copy(S, A)

    assert _message(reverse, "cumsum-reverse", TypeError) == "T.cumsum(S): reverse must be True or False, got S"


def test_device_assert_condition_is_a_scalar():
    def condition():
        @T.prim_func
        def k(A: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float32")
                T.device_assert(S, "S must hold")  # <assert-buffer>
                A[0, 0] = 1.0

    assert _message(condition, "assert-buffer", TypeError) == (
        f"T.device_assert: the condition {_SCALAR}, got the buffer S (4, 4) float32 (index it, S[...], for one element)")


def test_kernel_grid_extent_is_an_integer_expression():
    def element():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(A[0], threads=32) as bx:  # <grid-element>
                A[bx] = 0.0

    assert _message(element, "grid-element", TypeError) == (
        "T.Kernel: grid extent #0 must be an int or an integer expression of the kernel's sizes "
        "(a T.dynamic size, T.ceildiv(n, 64)), got the float32 expression A[0]")

    def region():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(4, A[0:8], threads=32) as (bx, by):  # <grid-region>
                A[bx] = 0.0

    assert _message(region, "grid-region", TypeError) == (
        "T.Kernel: grid extent #1 must be an int or an integer expression of the kernel's sizes "
        "(a T.dynamic size, T.ceildiv(n, 64)), got the region A[0:8]")


def test_ceildiv_and_truncdiv_take_integers():
    """TVM's raw "Check failed: (a.ty().MatchesCode(kDLInt, kDLUInt)) is false: T.float32(64.0)"
    (or an FFI signature for a string) before."""

    def float_block():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(T.ceildiv(16, 4.0), threads=1) as bx:  # <ceildiv-float>
                A[bx] = 0.0

    assert _message(float_block, "ceildiv-float", TypeError) == (
        "T.ceildiv: rhs must be an int or an integer expression, got float 4.0; for floats write T.ceil(x / y)")

    def float_elements():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(16):
                    A[i] = T.truncdiv(A[i], 2)  # <truncdiv-float>

    assert _message(float_elements, "truncdiv-float", TypeError) == (
        "T.truncdiv: the dividend must be an int or an integer expression, got the float32 expression A[i]; "
        "for floats write T.trunc(x / y)")


_STORE = "the stored value must be a scalar expression (a number, an element A[i], a T.alloc_var)"
_TILE_ADVICE = ("index it for one element, or copy a tile with T.copy(source, destination) "
                "(both regions or buffers of the same extents)")


def test_loop_names_match_the_loop_variables():
    def more_extents():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as _:
                for i, j in T.Parallel(16, 16, 1):  # <parallel-more>
                    B[i, j] = A[i, j]

    assert _message(more_extents, "parallel-more") == (
        "T.Parallel: 3 extents give 3 loop variables, but the for statement names 2 (i, j); "
        "name one variable per extent or give one extent per name")

    def fewer_extents():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as _:
                for i, j, l in T.Parallel(16, 16):  # <parallel-fewer>
                    B[i, j] = A[i, l]

    assert _message(fewer_extents, "parallel-fewer") == (
        "T.Parallel: 2 extents give 2 loop variables, but the for statement names 3 (i, j, l); "
        "name one variable per extent or give one extent per name")

    def serial_two():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as _:
                for i, j in T.serial(16):  # <serial-two>
                    B[i, j] = A[i, j]

    assert _message(serial_two, "serial-two") == (
        "T.serial: it gives 1 loop variable, but the for statement names 2 (i, j); "
        "name one variable (T.grid and T.Parallel give one per extent)")

    def one_in_a_tuple():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as _:
                for (i,) in T.Parallel(16):  # <parallel-tuple>
                    B[i] = A[i]

    assert _message(one_in_a_tuple, "parallel-tuple") == (
        "T.Parallel: 1 extent gives 1 loop variable, not a tuple, but the for statement unpacks it into (i,); "
        "write for i in T.Parallel(...)")


def test_loop_names_matching_still_define_the_kernel():
    @T.prim_func
    def k(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=4) as _:
            for i, j in T.Parallel(4, 4):
                for k0, k1 in T.grid(1, 2):
                    B[i, j] = A[i, j] + k0 + k1

    assert "for" in k.script()


def test_element_store_of_a_region_buffer_string_or_none():
    def region():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                B[0, 0] = A[0, 0:4]  # <store-region>

    assert _message(region, "store-region") == f"B[0, 0] = ...: {_STORE}, got the region A[0, 0:4]; {_TILE_ADVICE}"

    def row():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((16, 16), "float32")
                T.copy(A, S)
                B[0, 0] = S[3]  # <store-row>

    assert _message(row, "store-row") == f"B[0, 0] = ...: {_STORE}, got the region S[3, 0:16]; {_TILE_ADVICE}"

    def buffer():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4,), "float32")
                B[0:4, 0] = S  # <store-buffer>

    assert _message(buffer, "store-buffer") == f"B[0:4, 0] = ...: {_STORE}, got the buffer S (4,) float32; {_TILE_ADVICE}"

    def none():  # TVM's BufferStore crashed the process (a segmentation fault)
        @T.prim_func
        def k(B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                B[0, 0] = None  # <store-none>

    assert _message(none, "store-none") == (
        f"B[0, 0] = ...: {_STORE}, got NoneType None; store a number or an expression of the kernel's values")

    def var_region():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                v = T.alloc_var("float32")
                v = A[0, 0:4]  # <store-var>
                B[0, 0] = v

    assert _message(var_region, "store-var") == f"v[0] = ...: {_STORE}, got the region A[0, 0:4]; {_TILE_ADVICE}"


def test_alloc_var_init_is_a_scalar():
    def buffer():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((16, 16), "float32")
                v = T.alloc_var("float32", S)  # <var-init-buffer>
                B[0, 0] = v

    assert _message(buffer, "var-init-buffer", TypeError) == (
        f"T.alloc_var: init {_SCALAR}, got the buffer S (16, 16) float32 (index it, S[...], for one element)")

    def region():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=1) as _:
                v = T.alloc_var("float32", init=A[0:4, 0])  # <var-init-region>
                B[0, 0] = v

    assert _message(region, "var-init-region", TypeError) == (
        f"T.alloc_var: init {_SCALAR}, got the region A[0:4, 0] (a region is a tile; index the buffer for one element)")


def test_fill_and_clear_annotations_must_be_a_dict():
    def clear_number():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                F = T.alloc_fragment((4, 4), "float32")
                T.clear(F, 1)  # <clear-annotations>
                T.copy(F, B)

    assert _message(clear_number, "clear-annotations", TypeError) == (
        "T.clear(F): annotations must be a dict or None, got int 1")

    def fill_buffer():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float32")
                F = T.alloc_fragment((4, 4), "float32")
                T.fill(F, 1.0, S)  # <fill-annotations>
                T.copy(F, B)

    assert _message(fill_buffer, "fill-annotations", TypeError) == (
        "T.fill(F, 1.0): annotations must be a dict or None, got the buffer S (4, 4) float32")


def test_gemm_flags_are_bools():
    def transpose_float():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float16")
                F = T.alloc_fragment((4, 4), "float32")
                T.gemm(S, S, F, transpose_B=1.5, clear_accum=True)  # <gemm-transpose>
                T.copy(F, B)

    assert _message(transpose_float, "gemm-transpose", TypeError) == (
        "T.gemm(S, S, F): transpose_B must be True or False, got 1.5")

    def clear_five():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float16")
                F = T.alloc_fragment((4, 4), "float32")
                T.gemm(S, S, F, clear_accum=5)  # <gemm-clear>
                T.copy(F, B)

    assert _message(clear_five, "gemm-clear", TypeError) == (
        "T.gemm(S, S, F): clear_accum must be a bool or a boolean expression (ko == 0), got 5")


def test_device_assert_no_stack_info_is_a_bool():
    def buffer():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4,), "float32")
                T.device_assert(A[0] > 0, "bad", S)  # <assert-stack-info>
                A[1] = 1.0

    assert _message(buffer, "assert-stack-info", TypeError) == (
        "T.device_assert(A[0] > 0, bad): no_stack_info must be True or False, got S")


def test_transpose_in_place_is_refused():
    def in_place():
        @T.prim_func
        def k(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=4) as _:
                S = T.alloc_shared((4, 4), "float32")
                T.copy(A, S)
                T.transpose(S, S)  # <transpose-in-place>
                T.copy(S, B)

    assert _message(in_place, "transpose-in-place") == (
        "T.transpose(S, S): the destination overlaps the source tile 'S' (or shares its storage, as a T.view or "
        "T.reshape of it): an in-place transpose would overwrite elements before they are read; transpose into "
        "another tile (T.transpose(S, S2)) and T.copy it back")

    def through_a_reshape():
        @T.prim_func
        def k(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=4) as _:
                S = T.alloc_shared((4, 4), "float32")
                T.copy(A, S)
                T.transpose(S, T.reshape(S, (4, 4)))  # <transpose-reshape>
                T.copy(S, B)

    assert "shares its storage, as a T.view or T.reshape of it" in _message(through_a_reshape, "transpose-reshape")


def _run_8x8(kernel_func, backend: str, target: str):
    """``kernel_func(A, B)`` (two 8x8 float32 tensors) compiled on ``(backend, target)`` and run on a
    random ``A``: ``(A, B)``."""
    import tilelang
    import torch

    a, b = torch.randn(8, 8), torch.zeros(8, 8)
    tilelang.compile(kernel_func, target=target, execution_backend=backend)(a, b)
    return a, b


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_transpose_between_disjoint_regions_of_one_tile_runs(backend, target):
    import torch

    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=4) as _:
            S = T.alloc_shared((8, 8), "float32")
            T.copy(A, S)
            T.transpose(S[0:4, 0:4], S[4:8, 4:8])
            T.copy(S, B)

    a, b = _run_8x8(k, backend, target)
    want = a.clone()
    want[4:8, 4:8] = a[0:4, 0:4].T
    torch.testing.assert_close(b, want, rtol=0, atol=0)


def test_parallel_refuses_a_tuple_extent():
    def pair():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as _:
                for i, j in T.Parallel((1, 2), 16):  # <parallel-pair>
                    B[i, j] = A[i, j]

    assert _message(pair, "parallel-pair", TypeError) == (
        "T.Parallel: extent 1 is the tuple (1, 2); T.Parallel takes one extent per loop variable (an int or an "
        "integer expression): to start at s, write T.Parallel(count) and index with i + s")


def test_gemm_accumulator_must_not_overlap_an_input():
    def in_place():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float16")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((4, 4), "float16")
                T.copy(B, S)
                T.gemm(S, S, S, transpose_B=True)  # <gemm-overlap>
                T.copy(S, B)

    assert _message(in_place, "gemm-overlap") == (
        "T.gemm(S, S, S): C 'S' overlaps A: the product would overwrite A's elements before they are read; "
        "accumulate into another tile")

    def through_a_view():
        @T.prim_func
        def k(B: T.Tensor((4, 4), "float32")):
            with T.Kernel(1, threads=1) as _:
                C = T.alloc_local((4, 4), "float32")
                S = T.alloc_shared((4, 4), "float32")
                T.copy(B, C)
                T.copy(B, S)
                T.gemm(T.view(C, (4, 4), "float32"), S, C)  # <gemm-view>
                T.copy(C, B)

    assert "C 'C' and A 'buffer' share storage (one is a T.view or T.reshape of the other): the product would " \
           "overwrite A's elements before they are read" in _message(through_a_view, "gemm-view")


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_gemm_between_disjoint_regions_of_one_tile_runs(backend, target):
    import torch

    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=1) as _:
            S = T.alloc_shared((8, 8), "float32")
            T.copy(A, S)
            T.gemm(S[0:4, 0:4], S[0:4, 4:8], S[4:8, 0:4], clear_accum=True)
            T.copy(S, B)

    a, b = _run_8x8(k, backend, target)
    want = a.clone()
    want[4:8, 0:4] = a[0:4, 0:4] @ a[0:4, 4:8]
    torch.testing.assert_close(b, want, rtol=1e-5, atol=1e-5)


def test_float_math_of_an_integer_or_bool_names_the_operand():
    def exp_int():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.exp(A[1])  # <exp-int>

    assert _message(exp_int, "exp-int", TypeError) == (
        'T.exp: computes on floating-point values only, but its operand is the int32 expression A[1]; convert it '
        'first, for example T.exp(T.cast(x, "float32"))')

    def atan2_ints():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), N: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.atan2(N[1], N[2])  # <atan2-ints>

    assert _message(atan2_ints, "atan2-ints", TypeError) == (
        'T.atan2: computes on floating-point values only, but its first operand is the int32 expression N[1]; '
        'convert it first, for example T.atan2(T.cast(x, "float32"), y)')


def test_float_math_takes_python_ints_as_floats_and_ldexp_an_integer_exponent():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), N: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as _:
            A[0] = T.exp(0) + T.sqrt(4) + T.ldexp(A[1], N[0]) + T.pow(A[2], 2)

    assert "exp(T.float32(0.0))" in k.script() or "T.exp(T.float32(0" in k.script(), k.script()


def test_comparison_with_none_is_refused():
    """``A[i] == None`` stopped with TVMScript's "'NoneType' object has no attribute 'expr_ty'"."""
    def equal():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(4):
                    B[i] = T.if_then_else(A[i] == None, 1.0, 2.0)  # <none-eq>

    text = _message(equal, "none-eq", TypeError)
    assert text.startswith("A[i] == None: a kernel value is never None"), text
    assert "float32 expression A[i]" in text and "x == 0" in text and "is not None" in text, text

    def not_equal():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(4):
                    if None != A[i] + 1:  # <none-ne>
                        B[i] = 1

    assert _message(not_equal, "none-ne", TypeError).startswith("None != A[i] + 1: a kernel value is never None")


def test_dtype_constructor_of_none_is_refused():
    """``T.int32(None)`` made a new TIR variable the kernel never defines: "Program is not
    well-formed ... Invalid use of undefined variable" at the kernel's ``def`` line."""
    def none():
        @T.prim_func
        def k(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.int32(None)  # <dtype-none>

    text = _message(none, "dtype-none", TypeError)
    assert text.startswith("T.int32(None): None is not a value to convert to int32"), text
    assert "T.int32(0)" in text and "well-formed" not in text, text
