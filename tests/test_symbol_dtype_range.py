"""A size or stride too large for the dtype of the symbol it binds is refused, never narrowed.

``T.dynamic("n")`` is int32. A call giving it 2**31 or more (a dimension or a stride) used to be
narrowed silently: wrong data on tvm_ffi/llvm, a segfault for a stride, a misleading "error code
-1" / "a dynamic size is negative" on the C paths, and a value in [2**32, 2**32 + 2**31) wrapped
to a positive one and ran everywhere. Every backend now refuses it with the remedy (an int64
symbol), with 32-bit indices and with ``tl.config_index_bitwidth`` 64 alike. The tensors are
stride-0 views or views over 4 elements: no call touches gigabytes.

A declared stride whose dtype differs from its dimension's size (an int64 stride symbol of an
int32 dimension) stopped TVM's packed host code with a raw check; runtime-module backends now
refuse it at lowering with the remedy, device-source backends run it.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.artifact import KernelArtifact, SymbolBinding, TensorParam
from tilelang_core.calling import symbol_range_message
from tilelang_core.errors import LoweringError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs, installed  # noqa: E402

WIDE = {"tl.config_index_bitwidth": 64}
BITS = [pytest.param({}, id="idx32"), pytest.param(WIDE, id="idx64")]


def last4(dtype: str = "int32"):
    """``B = A[n - 4:n]`` of a strided 1-D ``A`` whose size symbol is ``n`` of ``dtype``."""
    n, s = T.dynamic("n", dtype), T.dynamic("s", dtype)

    @T.prim_func
    def last4(A: T.StridedTensor((n,), (s,), "int8"), B: T.Tensor((4,), "int8")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(4):
                B[i] = A[n - 4 + i]

    return last4


def rowstride(stride_dtype="int32", dtype="int8"):
    """``B = A`` of a ``(m, 4)`` ``A`` whose row stride is the symbol ``s`` of ``stride_dtype``
    (its size ``m`` is int32)."""
    m, s = T.dynamic("m"), T.dynamic("s", stride_dtype)

    @T.prim_func
    def rowstride(A: T.StridedTensor((m, 4), (s, 1), dtype), B: T.Tensor((m, 4), dtype)):
        with T.Kernel(m, threads=1) as bx:
            for i in T.serial(4):
                B[bx, i] = A[bx, i]

    return rowstride


def message(fn: str, what: str, value: int, symbol: str) -> str:
    """The core's text (calling.symbol_range_message): every backend's, the cython dispatcher's C
    copy of it included, must be the same."""
    return symbol_range_message(f"{fn}() argument 'A' (#0): {what}", symbol, value, "int32")


def test_the_symbol_range_message_reads_as_documented():
    assert message("f", "shape[0]", 2**31, "n") == (
        "f() argument 'A' (#0): shape[0] = 2147483648 binds symbol 'n', which is int32 (at most 2147483647); "
        "declare it T.dynamic('n', 'int64')")


@pytest.mark.parametrize("configs", BITS)
@pytest.mark.parametrize("size", [2**31 + 5, 2**32 + 5], ids=["over", "wraps-positive"])
@pytest.mark.parametrize("backend, target", cpu_pairs())
def test_a_size_over_an_int32_symbol_is_refused(backend, target, size, configs):
    k = tilelang.compile(last4(), target=target, execution_backend=backend, pass_configs=configs)
    a, b = torch.zeros(1, dtype=torch.int8).expand(size), torch.zeros(4, dtype=torch.int8)
    with pytest.raises(ValueError) as info:
        k(a, b)
    assert str(info.value) == message("last4", "shape[0]", size, "n")


@pytest.mark.parametrize("configs", BITS)
@pytest.mark.parametrize("backend, target", cpu_pairs())
def test_a_stride_over_an_int32_symbol_is_refused(backend, target, configs):
    k = tilelang.compile(rowstride(), target=target, execution_backend=backend, pass_configs=configs)
    a = torch.arange(4, dtype=torch.int8).as_strided((1, 4), (2**31 + 8, 1))
    with pytest.raises(ValueError) as info:
        k(a, torch.zeros(1, 4, dtype=torch.int8))
    assert str(info.value) == message("rowstride", "stride[0]", 2**31 + 8, "s")


@pytest.mark.parametrize("backend, target", cpu_pairs())
def test_an_int64_symbol_takes_the_same_size_and_reads_the_right_elements(backend, target):
    k = tilelang.compile(last4("int64"), target=target, execution_backend=backend, pass_configs=WIDE)
    a, b = torch.full((1,), 7, dtype=torch.int8).expand(2**31 + 5), torch.zeros(4, dtype=torch.int8)
    k(a, b)
    assert b.tolist() == [7, 7, 7, 7]


@pytest.mark.parametrize("backend, target", cpu_pairs())
def test_sizes_that_fit_still_run_on_the_fast_path(backend, target):
    k = tilelang.compile(rowstride(), target=target, execution_backend=backend, pass_configs=WIDE)
    a = torch.arange(24, dtype=torch.int8).reshape(3, 8)[:, :4]
    b = torch.zeros(3, 4, dtype=torch.int8)
    k(a, b)
    assert torch.equal(a, b)
    empty = tilelang.compile(last4(), target=target, execution_backend=backend)
    with pytest.raises(ValueError, match="shape\\[0\\] = 2147483648 binds symbol 'n'"):
        empty(torch.zeros(1, dtype=torch.int8).expand(2**31), torch.zeros(4, dtype=torch.int8))


def test_the_artifact_records_each_symbols_dtype():
    n, s = T.dynamic("n"), T.dynamic("s", "int64")

    @T.prim_func
    def k(A: T.StridedTensor((n,), (s,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(4):
                B[i] = A[i]

    art = tilelang.compile(k, target="c", execution_backend="cython").artifact
    assert {b.name: b.dtype for b in art.symbols} == {"n": "int32", "s": "int64"}


def test_an_artifact_without_symbol_dtypes_reads_as_int64():
    a = KernelArtifact(name="k", target="c", target_kind="c",
                       params=[TensorParam(name="A", dtype="float32", shape=["n"], device="cpu")],
                       symbols=[SymbolBinding(name="n", param_index=0, dim=0, dtype="int32")])
    data = json.loads(a.to_json())
    assert data["symbols"][0]["dtype"] == "int32"
    assert KernelArtifact.from_json(json.dumps(data)) == a
    del data["symbols"][0]["dtype"]  # written before the field existed
    assert KernelArtifact.from_json(json.dumps(data)).symbols[0].dtype == "int64"


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_stride_of_another_dtype_than_its_size_is_refused_for_runtime_modules(target):
    if not installed("tvm_ffi"):
        pytest.skip("tvm_ffi is not installed")
    with pytest.raises(LoweringError) as info:
        tilelang.compile(rowstride("int64", "float32"), target=target, execution_backend="tvm_ffi")
    text = str(info.value)
    assert "kernel 'rowstride': parameter 'A' has stride[0] = s of dtype int64, but its shape[0] = m is int32" in text
    assert "declare both symbols with one dtype" in text and "Check failed" not in text


def test_a_stride_of_another_dtype_than_its_size_runs_from_device_source():
    k = tilelang.compile(rowstride("int64", "float32"), target="c", execution_backend="cython")
    a = torch.randn(3, 10)[:, :4]
    b = torch.zeros(3, 4)
    k(a, b)
    assert torch.equal(a, b)
