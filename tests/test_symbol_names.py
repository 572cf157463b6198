"""Names and dtypes of dynamic dimensions in a kernel's signature (from a helper's hunt).

Symbols travel to the backends by name (shape texts such as ``"n * 2"``), so:

* a name that is a Python keyword (``T.dynamic("for")``) or ``min``/``max`` made the tvm_ffi
  backend's build hook raise, which marked that backend broken for the rest of the process; now
  refused where the name is given, and at lowering for a variable made another way;
* two different ``T.dynamic("n")`` objects were mixed up by each backend its own way (cython and
  ctypes refused a valid call, tvm_ffi on ``c`` failed to lower, on ``llvm`` it ran right); the
  second is now ``n_1``, and every path runs the kernel as TVM means it;
* ``T.StridedTensor((m, k), (s, 1))`` with int64 symbols was refused by tvm_ffi (its literal ``1``
  is int32 beside the int64 ``k``), with advice that could not be followed.

And the index-limit error of a tensor with declared strides now says how far its elements reach
and names its strides, where it counted "elements" the tensor does not have.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import compile_on, cpu_pairs  # noqa: E402


def add_one(n):
    @T.prim_func
    def add_one_kernel(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1):
            for i in T.serial(n):
                B[i] = A[i] + 1.0

    return add_one_kernel


@pytest.mark.parametrize("make", [lambda: T.dynamic("for"), lambda: T.dynamic("m, None"), lambda: T.symbolic("lambda"),
                                  lambda: T.dynamic("min"), lambda: T.const("M max")],
                         ids=["keyword", "keyword-in-list", "symbolic", "min", "const-max"])
def test_names_that_cannot_name_a_dimension_are_refused_where_they_are_given(make):
    with pytest.raises(ValueError, match=r"T\.(dynamic\(name\)|const\(names\)): '(for|None|lambda|min|max)' "
                                         r"(is a Python keyword|names the (min|max)\(\) function of shape expressions), "
                                         r"which cannot name a dynamic dimension; choose another name, such as '\w+_'"):
        make()


def test_a_keyword_named_variable_is_refused_at_lowering_and_leaves_tvm_ffi_usable():
    """A symbol made without T.dynamic (a TVM variable) is refused when the kernel is lowered."""
    with pytest.raises(LoweringError, match=r"dynamic dimension 'for': 'for' is a Python keyword, which cannot "
                                            r"name a dimension in the kernel's signature; give the symbol another name"):
        tilelang.compile(add_one(tirx.Var("for", "int32")), out_idx=-1, target="c", execution_backend="tvm_ffi")
    kernel = tilelang.compile(add_one(T.dynamic("m")), out_idx=-1, target="c", execution_backend="tvm_ffi")
    a = torch.randn(5)
    assert torch.equal(kernel(a), a + 1)


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_two_symbols_of_one_name_are_two_dimensions_on_every_path(backend, target, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    n1, n2 = T.dynamic("n"), T.dynamic("n")

    @T.prim_func
    def wrap_add(A: T.Tensor((n1,), "float32"), B: T.Tensor((n2,), "float32"), C: T.Tensor((n1,), "float32")):
        with T.Kernel(1):
            for i in T.serial(n1):
                C[i] = A[i] + B[i % n2]

    kernel = compile_on(wrap_add, (backend, target))
    a, b, c = torch.arange(6.0), torch.arange(3.0), torch.zeros(6)
    kernel(a, b, c)
    assert c.tolist() == [0.0, 2.0, 4.0, 3.0, 5.0, 7.0]


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_literal_stride_beside_int64_symbols_runs(backend, target, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    m, k, s = T.dynamic("m k s", "int64")

    @T.prim_func
    def rows(A: T.StridedTensor((m, k), (s, 1), "float32"), B: T.Tensor((m, k), "float32")):
        with T.Kernel(1):
            for i, j in T.grid(m, k):
                B[i, j] = A[i, j] * 2.0

    kernel = compile_on(rows, (backend, target))
    x = torch.randn(4, 10)[:, :3]
    out = torch.zeros(4, 3)
    kernel(x, out)
    assert torch.equal(out, x * 2)


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_the_index_limit_error_of_a_strided_tensor_names_its_reach_and_strides(backend, target):
    m, k, s = T.dynamic("m k s")

    @T.prim_func
    def last(A: T.StridedTensor((m, k), (s, 1), "uint8"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1):
            B[0] = T.Cast("int32", A[m - 1, k - 1])

    kernel = compile_on(last, (backend, target))
    base = torch.empty(2**31, dtype=torch.uint8)  # never touched: the call is refused before the kernel runs
    wide = base.as_strided((2, 4), (2**31 - 10, 1))  # 8 elements, 2**31 - 6 apart from first to last
    with pytest.raises(ValueError) as info:
        kernel(wide, torch.zeros(1, dtype=torch.int32))
    assert str(info.value) == (
        "last() argument 'A' (#0): 2147483642 elements from its first to its last in memory ('m' = 2, 'k' = 4, "
        "strides (2147483638, 1)) exceed this kernel's 32-bit index limit of 2146435072; compile it with "
        "pass_configs={'tl.config_index_bitwidth': 64}"), str(info.value)


@pytest.mark.parametrize("backend", ["cython", "tvm_ffi"])
def test_an_unsigned_symbol_is_refused_on_c_and_runs_on_llvm(backend, monkeypatch):
    """On c, TVM stopped in its C entry's arithmetic ("Minuend's value is 0U ... will cause a negative uint")."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = add_one(T.dynamic("n", "uint32"))
    with pytest.raises(LoweringError, match=r"kernel 'add_one_kernel': dynamic dimension 'n' is uint32, which the c target "
                                            r"cannot take .*; declare it T\.dynamic\('n', 'int64'\), or lower the kernel "
                                            r"for llvm"):
        tilelang.compile(kernel, out_idx=-1, target="c", execution_backend=backend)
    if backend == "tvm_ffi":
        a = torch.randn(5)
        assert torch.equal(tilelang.compile(kernel, out_idx=-1, target="llvm", execution_backend=backend)(a), a + 1)
