"""What finds a compiled kernel again: argument keys of ``@tilelang.jit``, the cache key's TIR text,
and ``tilelang.compile``'s in-memory fast path. Each case here returned another kernel than the one
asked for, silently, or failed with an error that did not say what to do (from a helper's hunt).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.cache.key import canonical_tir


@dataclasses.dataclass
class Scale:
    """A plain dataclass: it cannot be hashed."""

    factor: float


def test_eager_kernels_are_found_by_the_content_of_a_dataclass_argument():
    """Such a value was keyed by the id of a temporary tuple, which later calls reused: about a third
    of 60 calls got another call's kernel."""

    @tilelang.jit
    def scale(X, cfg):
        X: T.Tensor[(4,), T.float32]
        factor = cfg.factor
        Y = T.empty((4,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                Y[i] = X[i] * factor
        return Y

    x = torch.ones(4)
    got = [scale(x, Scale(float(v)))[0].item() for v in range(1, 61)]
    assert got == [float(v) for v in range(1, 61)]
    assert scale(x, Scale(7.0))[0].item() == 7.0 and len(scale.kernels) == 60  # found again by content


def test_an_unhashable_compile_time_argument_is_named():
    @tilelang.jit
    def scale(X, factors):
        X: T.Tensor[(4,), T.float32]
        first = float(factors[0])
        Y = T.empty((4,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                Y[i] = X[i] * first
        return Y

    with pytest.raises(TypeError, match=r"scale\(\): compile-time argument 'factors' is a numpy.ndarray, which cannot "
                                        r"be hashed.*pass a hashable value"):
        scale(torch.ones(4), np.ones(2))
    assert scale(torch.ones(4), (3.0,))[0].item() == 3.0  # a tuple is fine


@tilelang.jit(out_idx=-1)
def _add(A, B):
    (n,) = A.shape

    @T.prim_func
    def add(a: T.Tensor(A.shape, A.dtype), b: T.Tensor(B.shape, B.dtype), c: T.Tensor(A.shape, A.dtype)):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                c[i] = a[i] + b[i]

    return add


def test_direct_form_names_an_unhashable_argument_and_a_missing_one():
    x = torch.ones(4)
    with pytest.raises(TypeError, match=r"_add\(\): argument #1 is a numpy.ndarray, which cannot be hashed"):
        _add(x, np.ones(4, dtype=np.float32))
    with pytest.raises(TypeError, match=r"^_add\(\): missing a required argument: 'B'$"):
        _add(x)
    torch.testing.assert_close(_add(x, x), 2 * x)


def _extern(name: str):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                B[i] = T.call_extern("float32", name, A[i])

    return main


def test_names_and_texts_in_string_literals_are_not_renumbered():
    """``scale_2`` and ``scale_3`` (external functions) printed as ``scale_#0`` in both keys: the second
    kernel got the first one's compiled code, which calls the other function."""
    assert canonical_tir(_extern("scale_2")) != canonical_tir(_extern("scale_3"))
    assert '"scale_2"' in canonical_tir(_extern("scale_2"))


def _asserting(message: str):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                T.device_assert(A[i] > 0, message)
                B[i] = A[i]

    return main


def test_a_kernel_prints_its_own_assert_message():
    first = tilelang.compile(_asserting("step_1"), out_idx=-1, target="c")
    second = tilelang.compile(_asserting("step_2"), out_idx=-1, target="c")
    assert first.cache_key != second.cache_key
    with pytest.raises(Exception, match="step_2"):
        second(-torch.ones(4))


def _dynamic(name: str):
    n = T.dynamic(name)

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), C: T.Tensor((n * 2,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                C[i] = A[i]

    return main


@pytest.mark.parametrize("name", ["rows_1", "rows_2"])
def test_a_shape_variable_keeps_its_name_in_call_errors(name):
    first = tilelang.compile(_dynamic("rows_1"), target="c")
    kernel = tilelang.compile(_dynamic(name), target="c")
    assert (kernel.cache_key == first.cache_key) == (name == "rows_1")
    with pytest.raises(ValueError, match=rf"expected shape\[0\] == {name} \* 2 = 8, got 7"):
        kernel(torch.ones(4), torch.ones(7))


def test_the_fast_path_sees_a_changed_default_target(monkeypatch):
    """The same prim_func object compiled after TILELANG_DEFAULT_TARGET changed got the old target's kernel."""

    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = A[i] + 1

    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "c")
    assert str(tilelang.compile(main, out_idx=-1).target).split()[0] == "c"
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "llvm")
    kernel = tilelang.compile(main, out_idx=-1)
    assert str(kernel.target).split()[0] == "llvm"
    assert tilelang.compile(main, out_idx=-1) is kernel  # and it is found again


def _twice(**jit_options):
    """An eager ``@tilelang.jit`` function doubling a (4,) tensor."""

    @tilelang.jit(**jit_options)
    def twice(X):
        X: T.Tensor[(4,), T.float32]
        Y = T.empty((4,), T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                Y[i] = X[i] * 2
        return Y

    return twice


def test_eager_kernels_are_keyed_by_the_device_that_picks_their_target():
    """The target comes from the tensors' device; a CUDA call after a CPU one with the same shapes got
    the C kernel. (No GPU here: the key is checked.)"""

    double = _twice()
    double(torch.ones(4))
    (key,) = double.kernels
    assert key[-1] == "c"


def _plus_one(debug_root_path):
    """A lazy ``@tilelang.jit`` function writing what it builds into ``debug_root_path``."""

    @tilelang.jit(out_idx=-1, debug_root_path=debug_root_path)
    def plus_one(n):
        @T.prim_func
        def plus_one_kernel(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    B[i] = A[i] + 1

        return plus_one_kernel

    return plus_one


def test_debug_root_path_writes_each_kernels_source_and_tir(tmp_path):
    """TileLang's ``@tilelang.jit(debug_root_path=...)`` was refused as an unexpected keyword."""
    lazy_dir, eager_dir = tmp_path / "lazy", tmp_path / "eager"

    plus_one = _plus_one(lazy_dir)

    twice = _twice(debug_root_path=str(eager_dir), target="llvm")

    kernel = plus_one(8)
    assert (lazy_dir / "tilelang_jit_kernel_plus_one.c").read_text().strip() == kernel.get_kernel_source().strip()
    assert "def plus_one_kernel(A: T.Buffer((8,), \"float32\")" in (lazy_dir / "tilelang_jit_program_plus_one.py").read_text()
    assert twice(torch.ones(4)).tolist() == [2.0] * 4
    assert sorted(p.name for p in eager_dir.iterdir()) == ["tilelang_jit_kernel_twice.ll", "tilelang_jit_program_twice.py"]


def test_debug_root_path_errors_name_the_argument(tmp_path):
    with pytest.raises(TypeError, match=r"debug_root_path=...\): expected a directory path \(str or os.PathLike\), got int 3"):
        tilelang.jit(debug_root_path=3)
    blocker = tmp_path / "a_file"
    blocker.write_text("mine")

    plus_one = _plus_one(blocker / "sub")

    with pytest.raises(OSError, match=r"cannot write the kernel's files there"):
        plus_one(4)
    assert blocker.read_text() == "mine"


@tilelang.jit(out_idx=-1, target="c")
def _times(n):
    @T.prim_func
    def times(a: T.Tensor((4,), "int32"), c: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                c[i] = a[i] * n  # int32 (wraps) for an int n, float32 for a float n
    return times


@pytest.mark.parametrize("first,second", [(2.0, 2), (2, 2.0)])
def test_equal_values_of_different_types_are_different_kernels(first, second):
    """``f(2.0)`` then ``f(2)`` returned the float kernel for the int, and the other way round:
    the result of ``f(2)`` depended on which call came first."""
    a = torch.tensor([1, 3, 5, 2**30 + 1], dtype=torch.int32)
    wrapped = torch.tensor([2.0, 6.0, 10.0, float(-(2**31) + 2)])
    exact = torch.tensor([2.0, 6.0, 10.0, float(2**31 + 2)])
    results = {type(v): _times(v)(a) for v in (first, second)}
    assert torch.equal(results[int], wrapped)
    assert torch.equal(results[float], exact)
    assert _times(first) is _times(first) and _times(first) is not _times(second)
    # TileLang's key is still the value alone; the kernel is kept for the key and the types
    assert _times.func.parse_args(first)[0] == _times.func.parse_args(second)[0]


def test_a_kernel_put_under_a_key_from_outside_is_found_for_it():
    """TileLang's tests put a kernel in ``_kernel_cache`` under ``parse_args``' key and expect the
    call to return it."""

    @tilelang.jit(out_idx=-1, target="c")
    def plus(n):
        raise AssertionError("not built: the kernel under the key is used")

    sentinel = object()
    plus._kernel_cache[plus.func.parse_args(3)[0]] = sentinel
    assert plus(3) is sentinel


def test_decorating_a_compiled_kernel_says_what_to_do():
    kernel = _times(2)
    with pytest.raises(TypeError, match=r"got the compiled kernel 'times' \(a JITKernel\): call it directly"):
        tilelang.jit(kernel)
    with pytest.raises(TypeError, match="call it directly"):
        tilelang.jit(out_idx=-1)(kernel)


def test_a_fresh_symbol_of_the_same_name_finds_the_same_kernel():
    """Each T.dynamic("n") was a new key (symbols hash by identity): building the kernel where it
    is used, once per forward call, kept one more kernel per call (3,001 after 3,000 calls, 9 ms
    each). Symbols are keyed by name and dtype now; another name or dtype is another kernel."""

    @tilelang.jit(out_idx=-1, target="c", execution_backend="cython")
    def add_one(n, dtype="float32"):
        @T.prim_func
        def add_one_kernel(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
            with T.Kernel(1):
                for i in T.serial(n):
                    B[i] = A[i] + T.cast(1, dtype)

        return add_one_kernel

    a = torch.randn(7)
    kernels = {id(add_one(T.dynamic("n"))) for _ in range(20)}
    assert len(kernels) == 1 and len(add_one.kernels) == 1
    assert torch.equal(add_one(T.dynamic("n"))(a), a + 1)
    assert add_one(T.dynamic("m")) is not add_one(T.dynamic("n"))
    assert add_one(T.dynamic("n", "int64")) is not add_one(T.dynamic("n"))
    assert add_one((T.dynamic("n")), dtype="float32") is add_one(T.dynamic("n"))
    assert len(add_one.kernels) == 3


def test_parse_cache_key_is_the_key_of_equivalent_calls():
    """TileLang's notebooks time ``f.parse_cache_key(A, B)`` against a call (it was missing)."""

    @tilelang.jit(out_idx=-1, target="c", execution_backend="cython")
    def scaled(n, factor=2):
        @T.prim_func
        def scaled_kernel(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1):
                for i in T.serial(n):
                    B[i] = A[i] * factor

        return scaled_kernel

    key = scaled.parse_cache_key(8)
    assert key == scaled.parse_args(8)[0] == scaled.parse_cache_key(8, factor=2) == scaled.parse_cache_key(n=8)
    assert key != scaled.parse_cache_key(8, 3)
