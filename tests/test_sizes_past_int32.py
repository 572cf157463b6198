"""Sizes and indices past the 32-bit (and 64-bit) range: what a kernel over a tensor of more than
2**31 elements, a stride past 2**31, a grid of more blocks than an int64 counts or a dimension past
int64 builds into, checked on the lowering (no test here allocates a large tensor) and, where a
kernel takes run-time values, by running it with small tensors on every CPU path.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang_core.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

BIG = 2**31 + 64  # elements of a tensor that int32 cannot index


def _copy_tiles(n, blk=256):
    @T.prim_func
    def copy_tiles(A: T.Tensor((n,), "int8"), B: T.Tensor((n,), "int8")):
        with T.Kernel(T.ceildiv(n, blk), threads=128) as bx:
            S = T.alloc_shared((blk,), "int8")
            T.copy(A[bx * blk], S)
            T.copy(S, B[bx * blk])

    return copy_tiles


def test_copy_guards_of_a_tensor_past_int32_elements_are_computed_in_int64():
    """The guard ``0 <= bx * 256 + v < 2**31 + 64`` of a tile copy was computed in int32: llvm
    stopped with "Literal value 2147483904 exceeds range of int32", and the c code wrapped
    (undefined behaviour) for the last blocks."""
    func = _copy_tiles(BIG)
    lower(func, target="llvm", consumes=["runtime_module"])
    source = lower(func, target="c").device_source
    body = source[source.index("copy_tiles_kernel_blocks0(int8_t* A_ptr, int8_t* B_ptr, int32_t"):]
    assert not re.search(r"int32_t \w+ = \(bx \* 256\)", body), body
    assert "(int64_t)0 <= " in body, body


def test_element_copy_guard_with_a_safe_value_past_int32_elements_is_computed_in_int64():
    """``T.copy(A[i], B[j])`` of one element with ``T.annotate_safe_value``: the read's guard, as above."""

    @T.prim_func
    def one_element(A: T.Tensor((BIG,), "int8"), B: T.Tensor((BIG,), "int8")):
        with T.Kernel(T.ceildiv(BIG, 256), threads=1) as bx:
            T.annotate_safe_value({A: 3})
            T.copy(A[bx * 256 + 255], B[bx * 256])

    lower(one_element, target="llvm", consumes=["runtime_module"])


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_copy_tiles_of_an_int64_run_time_size_still_guard_the_tail(path):
    """With an int64 dynamic size the guards are int64 too; a partial last tile is still cut."""
    n = T.dynamic("n", "int64")
    kernel = compile_on(_copy_tiles(n, blk=16), path)
    a = torch.arange(40, dtype=torch.int8)
    b = torch.full((40,), -1, dtype=torch.int8)
    kernel(a, b)
    assert torch.equal(a, b)


def _rows(rows, stride):
    @T.prim_func
    def rows_of_a_big_tensor(X: T.StridedTensor((rows, 64), (stride, 1), "int8"), Y: T.Tensor((rows, 64), "int8")):
        with T.Kernel(rows, threads=64) as bx:
            for j in T.Parallel(64):
                Y[bx, j] = X[bx, j] * T.int8(2)

    return rows_of_a_big_tensor


def test_a_static_stride_past_int32_builds_the_runtime_module():
    """``T.StridedTensor((2, 64), (2**31 + 100, 1))``: the stride was rebuilt in the int32 of the size
    2 for TVM's packed host code, a raw "Literal value 2147483748 exceeds range of int32"."""
    module = lower(_rows(2, 2**31 + 100), target="llvm", consumes=["runtime_module"]).tvm_modules
    assert module is not None


def test_a_static_stride_past_an_int32_size_symbol_names_the_symbol_to_widen():
    with pytest.raises(LoweringError) as info:
        lower(_rows(T.dynamic("m"), 2**31 + 100), target="llvm", consumes=["runtime_module"])
    text = str(info.value)
    assert "parameter 'X' has stride[0]" in text and "the constant 2147483748 does not fit int32" in text
    assert "T.dynamic('m', 'int64')" in text and "Literal value" not in text


def test_parallel_over_a_static_extent_past_int32_has_an_int64_loop_variable():
    """``T.Parallel(2**31 + 64)`` stopped while parsing ("Literal value 2147483712 exceeds range of
    int32": TVM's grid makes int extents int32); ``T.serial`` and ``range`` of it worked."""

    @T.prim_func
    def add_one(A: T.Tensor((BIG,), "int8"), B: T.Tensor((BIG,), "int8")):
        with T.Kernel(1, threads=1) as bx:
            for i, j in T.Parallel(BIG, 4):
                if j == 0:
                    B[i] = A[i] + T.int8(1)

    source = lower(add_one, target="c").device_source
    assert "for (int64_t i = (int64_t)0; i < (int64_t)2147483712; ++i)" in source, source
    assert "for (int32_t j = 0; j < 4; ++j)" in source, source
    lower(add_one, target="llvm", consumes=["runtime_module"])


@pytest.mark.parametrize("loop", ["parallel", "serial", "range"])
def test_a_loop_of_exactly_2_to_the_31_iterations_builds(loop):
    """TVM's NarrowDataType made the loop variable int32 (it runs to 2**31 - 1) and stopped at the
    extent, "Literal value 2147483648 exceeds range of int32"; 2**31 + 1 iterations worked."""
    n = 2**31

    @T.prim_func
    def ends(A: T.Tensor((n,), "int8")):
        with T.Kernel(1, threads=1) as bx:
            if loop == "parallel":
                for i in T.Parallel(n):
                    if i == n - 1:
                        A[i] = T.int8(1)
            elif loop == "serial":
                for i in T.serial(n):
                    if i == n - 1:
                        A[i] = T.int8(1)
            else:
                for i in range(n):
                    if i == n - 1:
                        A[i] = T.int8(1)

    source = lower(ends, target="c").device_source
    assert "i < (int64_t)2147483648" in source, source
    lower(ends, target="llvm", consumes=["runtime_module"])


@pytest.mark.parametrize("loop", ["parallel", "serial"])
def test_a_loop_extent_past_int64_is_refused_naming_the_loop(loop):
    with pytest.raises(LoweringError, match=r"T\.(Parallel|serial): extent.* is 9223372036854775808, which no loop "
                                            r"variable holds: a loop bound must lie in int64") as info:

        @T.prim_func
        def too_long(A: T.Tensor((4,), "int8")):
            with T.Kernel(1, threads=1) as bx:
                if loop == "parallel":
                    for i in T.Parallel(2**63):
                        A[0] = T.int8(1)
                else:
                    for i in T.serial(2**63):
                        A[0] = T.int8(1)

    assert "Literal value" not in str(info.value)


@pytest.mark.parametrize("dim", [2**63, 2**64 + 5])
def test_a_tensor_dimension_past_int64_names_the_shape_and_the_limit(dim):
    """TVM stopped with "Expected `ir.Expr` but got `ffi.BigInt`" (a TypeError naming neither)."""
    with pytest.raises(LoweringError, match=rf"T\.Tensor: shape \({dim},\): every extent must be at most 2\*\*63 - 1 "
                                            rf"= 9223372036854775807.*got {dim}"):

        @T.prim_func
        def huge(A: T.Tensor((dim,), "int8")):
            with T.Kernel(1, threads=1) as bx:
                A[0] = T.int8(1)


def test_a_stride_past_int64_names_the_strides_and_the_limit():
    with pytest.raises(LoweringError, match=r"strides \(9223372036854775808, 1\): every value must lie in int64"):

        @T.prim_func
        def huge_stride(A: T.StridedTensor((2, 4), (2**63, 1), "int8")):
            with T.Kernel(1, threads=1) as bx:
                A[0, 0] = T.int8(1)


def test_a_static_grid_of_more_blocks_than_int64_counts_is_refused():
    """2**21 x 2**21 x 2**22 (each extent accepted) is 2**64 blocks: the CPU block count wrapped to
    0 and the kernel ran no block, without an error, on c and llvm."""
    with pytest.raises(ValueError, match=r"T\.Kernel grid \(2097152, 2097152, 4194304\) has 18446744073709551616 "
                                         r"blocks: at most 9223372036854775807 \(2\*\*63 - 1\) blocks in all"):
        T.Kernel(2**21, 2**21, 2**22)
    assert T.Kernel(2**21, 2**21, 2**21 - 1).grid == (2**21, 2**21, 2**21 - 1)  # 2**63 - 2**42 blocks fit
    assert T.Kernel(2**31 - 1, 2**31 - 1, 0).grid == (2**31 - 1, 2**31 - 1, 0)  # an empty grid has no block

