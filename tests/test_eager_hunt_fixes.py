"""Fixes in the eager style of ``@tilelang.jit`` and its argument errors (docs/jit.md):

* statements before the kernel body read an annotated tensor parameter's declaration
  (``B = T.empty((N,), A.dtype)``, ``M, K = A.shape``);
* an eager function whose source Python does not keep is refused with the error that says where
  to define it;
* a NumPy array given for a tensor is refused with a message that names ``torch.from_numpy``;
* a shape that disagrees with a ``T.const`` is a ``ValueError`` (and still a ``TypeError``).
"""

from __future__ import annotations

import numpy
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError

ON_CPU = dict(target="c", execution_backend="cython")


def test_output_takes_the_dtype_of_an_annotated_tensor_with_a_dynamic_size():
    @tilelang.jit(**ON_CPU)
    def plus_half(V):
        n = T.dynamic("n")
        V: T.Tensor[[n], T.float32]
        W = T.empty((n,), dtype=V.dtype)
        with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
            for k in T.Parallel(16):
                if bx * 16 + k < n:
                    W[bx * 16 + k] = V[bx * 16 + k] + 0.5
        return W

    for size in (40, 7):
        v = torch.randn(size)
        w = plus_half(v)
        assert w.dtype == torch.float32
        torch.testing.assert_close(w, v + 0.5)


def test_output_takes_the_shape_and_dtype_of_an_annotated_tensor_with_constants():
    @tilelang.jit(**ON_CPU)
    def doubled(P, dt: T.dtype = T.float32):
        R, C = T.const("R C")
        P: T.Tensor[(R, C), dt]
        Q = T.empty(P.shape, P.dtype)
        with T.Kernel(R, threads=1) as r:
            for c in T.serial(C):
                Q[r, c] = P[r, c] * 2
        return Q

    p = torch.randn(3, 5)
    torch.testing.assert_close(doubled(p), p * 2)
    ph = torch.randn(4, 2).half()
    qh = doubled(ph, T.float16)
    assert qh.dtype == torch.float16 and qh.shape == (4, 2)
    torch.testing.assert_close(qh, ph * 2)


def test_plain_statements_before_the_body_read_a_tensor_declaration():
    @tilelang.jit(**ON_CPU)
    def negate_rows(G):
        G: T.Tensor[[T.dynamic("h"), 6], T.float32]
        rows, cols = G.shape
        kind = G.dtype
        H = T.empty((rows, cols), kind)
        with T.Kernel(rows, threads=1) as r:
            for c in T.serial(cols):
                H[r, c] = -G[r, c]
        return H

    g = torch.randn(5, 6)
    torch.testing.assert_close(negate_rows(g), -g)


_NO_SOURCE = '''
import tilelang, tilelang.language as T

@tilelang.jit(target="c", execution_backend="cython")
def bump(U):
    L = T.const("L")
    U: T.Tensor[[L], T.float32]
    O = T.empty((L,), T.float32)
    with T.Kernel(1):
        for k in T.serial(L):
            O[k] = U[k] + 1
    return O
'''


def test_eager_function_without_source_text_says_where_to_define_it():
    scope: dict = {}
    exec(compile(_NO_SOURCE, "<string>", "exec"), scope)  # noqa: S102 - a function Python keeps no source of
    with pytest.raises(KernelDefinitionError, match=r"eager-style @tilelang\.jit function 'bump' is defined in a "
                                                    r"string compiled with exec\(\)/compile\(\), for which Python keeps "
                                                    r"no source text.*define them in a \.py file"):
        scope["bump"](torch.randn(8))


@tilelang.jit(out_idx=-1, **ON_CPU)
def _lazy_sum(A, B):
    (n,) = A.shape

    @T.prim_func
    def k(a: T.Tensor(A.shape, A.dtype), b: T.Tensor(B.shape, B.dtype), c: T.Tensor(A.shape, A.dtype)):
        with T.Kernel(1):
            for i in T.serial(n):
                c[i] = a[i] + b[i]

    return k


@pytest.mark.parametrize("which", ["both", "first", "second"])
def test_numpy_arrays_are_refused_with_torch_from_numpy(which):
    t = torch.randn(6)
    arr = t.numpy()
    args = {"both": (arr, arr), "first": (arr, t), "second": (t, arr)}[which]
    position = 1 if which == "second" else 0
    with pytest.raises(TypeError, match=rf"_lazy_sum\(\): argument #{position} is a numpy\.ndarray, which cannot be "
                                        r"hashed: NumPy arrays are not tensors here.*torch\.from_numpy\(x\)"):
        _lazy_sum(*args)
    torch.testing.assert_close(_lazy_sum(torch.from_numpy(arr), t), t + t)


def test_numpy_array_for_an_eager_tensor_parameter_names_torch_from_numpy():
    @tilelang.jit(**ON_CPU)
    def incr(U):
        L = T.const("L")
        U: T.Tensor[[L], T.float32]
        O = T.empty((L,), T.float32)
        with T.Kernel(1):
            for k in T.serial(L):
                O[k] = U[k] + 1
        return O

    with pytest.raises(TypeError, match=r"incr\(\): argument 'U' is a numpy\.ndarray.*torch\.from_numpy\(x\)"):
        incr(numpy.zeros(4, dtype=numpy.float32))


def test_shape_disagreeing_with_a_constant_is_a_value_error_as_with_a_dynamic_size():
    @tilelang.jit(**ON_CPU)
    def mix(X, W):
        M, N = T.const("M N")
        X: T.Tensor[(M, N), T.float32]
        W: T.Tensor[(M, N), T.float32]
        Y = T.empty((M, N), T.float32)
        with T.Kernel(1):
            for i, j in T.grid(M, N):
                Y[i, j] = X[i, j] - W[i, j]
        return Y

    with pytest.raises(ValueError, match="T.const N is 5 from X's dimension 1 but W's dimension 1 is 6") as info:
        mix(torch.randn(3, 5), torch.randn(3, 6))
    assert isinstance(info.value, TypeError)  # as first raised here
    with pytest.raises(ValueError, match=r"mix\(\) argument 'W' \(#1\): expected 2 dimensions, got 1"):
        mix(torch.randn(3, 5), torch.randn(15))


def test_a_tensor_annotated_in_the_signature_is_read_the_same_way():
    @tilelang.jit(**ON_CPU)
    def tripled(Z: T.Tensor((12,), T.float32)):
        width = Z.shape[0]
        Out = T.empty((width,), Z.dtype)
        with T.Kernel(1):
            for k in T.serial(width):
                Out[k] = Z[k] * 3
        return Out

    z = torch.randn(12)
    torch.testing.assert_close(tripled(z), z * 3)


def _double(backend="cython"):
    """``double(X) -> 2 * X`` of a float32 vector of size ``N``, with the default ``target="auto"``."""

    @tilelang.jit(execution_backend=backend)
    def double(X):
        N = T.const("N")
        X: T.Tensor[(N,), T.float32]
        Y = T.empty((N,), T.float32)
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(N):
                Y[i] = X[i] * 2
        return Y

    return double


def test_compile_of_specs_and_a_call_on_cpu_tensors_keep_one_kernel(monkeypatch, tmp_path):
    """``f.compile(T.Tensor(...))`` kept its kernel under target ``auto`` and the call with CPU
    tensors, whose device names the target ``c``, under ``c``: two entries of ``f.kernels`` for
    one kernel. Both now resolve ``auto`` to ``c`` (here ``TILELANG_DEFAULT_TARGET=c`` makes it
    ``c`` also on a machine with a GPU, where ``auto`` alone means ``cuda``)."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "c")
    double = _double()
    kernel = double.compile(T.Tensor((16,), T.float32))
    x = torch.randn(16)
    torch.testing.assert_close(double(x), x * 2)
    assert list(double.kernels.values()) == [kernel], list(double.kernels)
    assert next(iter(double.kernels))[1] == "c"


def test_compile_of_specs_under_two_target_contexts_builds_one_kernel_each(monkeypatch, tmp_path):
    """``f.compile(T.Tensor(...))`` under ``with tvm.target.Target("c")`` and then under ``with
    tvm.target.Target("llvm")`` got the ``c`` kernel the second time: both were keyed ``auto``,
    whatever the enclosing target. The key now holds what ``auto`` is left to decide."""
    import tvm

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILELANG_DEFAULT_TARGET", raising=False)
    double = _double("tvm_ffi")  # the backend of both targets
    with tvm.target.Target("c"):
        on_c = double.compile(T.Tensor((16,), T.float32))
    with tvm.target.Target("llvm"):
        on_llvm = double.compile(T.Tensor((16,), T.float32))
        again = double.compile(T.Tensor((16,), T.float32))
    assert on_c is not on_llvm and again is on_llvm
    assert on_c.artifact.target.split()[0] == "c" and on_llvm.artifact.target.split()[0] == "llvm"
    x = torch.randn(16)
    torch.testing.assert_close(on_llvm(x), x * 2)


def test_a_tensor_spec_given_to_a_call_says_to_pass_a_tensor_or_use_compile(monkeypatch, tmp_path):
    """A ``T.Tensor`` spec given to a call (not to ``f.compile``) failed with the calling
    convention's "expected a torch.Tensor, got Var", naming neither the spec nor ``f.compile``."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    double = _double()
    x = torch.randn(16)
    torch.testing.assert_close(double(x), x * 2)  # a good call first: the fast path knows this kernel
    message = (r"double\(\) argument 'X' \(#0\): got a T.Tensor spec, T.Tensor\(\(16,\), float32\), but calling "
               r"double\(\) runs the kernel, which takes a torch.Tensor; pass a torch tensor of that shape and dtype, "
               r"or use double.compile\(...\) with the spec to compile the kernel without running it")
    for call in (lambda s: double(s), lambda s: double(X=s)):
        with pytest.raises(TypeError, match=message):
            call(T.Tensor((16,), T.float32))
    with pytest.raises(TypeError, match=r"got a T.Tensor spec, T.Tensor\(\(n, 4\), float16\)"):
        double(T.Tensor((T.dynamic("n"), 4), T.float16))
    torch.testing.assert_close(double(x), x * 2)
