"""Habits of third-party TileLang code (puzzle sets, KernelBench solutions, model repositories).

- ``@tilelang.jit(out_idx=-1)`` directly above ``@T.prim_func`` (170 KernelBench solutions): the
  call gave TVM's "Mismatched type on argument #2 when calling: ir.Call" (upstream: "is not a
  callable object"); it now compiles the kernel on its first call and runs it.
- ``from tilelang.jit import JITImpl`` and ``from tilelang.engine.param import KernelParam`` (type
  hints of puzzle harnesses and model utilities) failed to import, so nothing in those packages ran.
- eager ``C = T.empty_like(A)`` (no such name) was reported as "C is not one (outputs: none)" at
  the ``def``; an unannotated parameter given a tensor stopped inside TVMScript ("object of type
  'Var' has no len()").
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError

PATHS = [("cython", "c"), ("tvm_ffi", "llvm")]


def _doubling(backend, target, **options):
    @tilelang.jit(target=target, execution_backend=backend, **options)
    @T.prim_func
    def double(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(16):
                Y[i] = X[i] * 2.0

    return double


@pytest.mark.parametrize("backend,target", PATHS)
def test_jit_above_a_prim_func_compiles_it_on_the_first_call(backend, target):
    double = _doubling(backend, target, out_idx=-1)
    x = torch.randn(16)
    torch.testing.assert_close(double(x), x * 2)
    torch.testing.assert_close(double(x + 1), (x + 1) * 2)
    kernel = double()
    assert isinstance(kernel, tilelang.JITKernel)
    assert all(k is kernel for k in double.kernels.values()), "one kernel, compiled once"
    with pytest.raises(ValueError, match=r"double\(\) argument 'X' \(#0\): expected shape\[0\] == 16, got 17"):
        double(torch.randn(17))


def test_jit_above_a_prim_func_without_outputs_writes_the_given_tensor():
    double = _doubling("cython", "c")
    x, y = torch.randn(16), torch.zeros(16)
    assert double(x, y) is None
    torch.testing.assert_close(y, x * 2)


def test_decorating_a_function_imports_no_tvm():
    """Telling a ``T.prim_func`` from a function must not import TVM (seconds at a module's import)."""
    code = ("import sys, tilelang\n"
            "def factory(n):\n    return n\n"
            "tilelang.jit(out_idx=-1)(factory)\n"
            "tilelang.jit(factory)\n"
            "print('tvm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def test_upstream_type_names_import_and_describe_our_objects():
    from tilelang.engine.param import KernelParam
    from tilelang.jit import JITImpl

    double = _doubling("cython", "c", out_idx=-1)

    @tilelang.jit(target="c")
    def factory(n):
        @T.prim_func
        def fill(A: T.Tensor((n,), "float32"), s: T.float32):
            with T.Kernel(1):
                for i in T.serial(n):
                    A[i] = s

        return fill

    assert isinstance(double, JITImpl) and isinstance(factory, JITImpl)
    params = factory(4).params
    assert [isinstance(p, KernelParam) for p in params] == [True, True]
    assert not isinstance("A", KernelParam)


def test_eager_output_from_a_missing_language_name_is_reported_at_its_line():
    @tilelang.jit(target="c")
    def add(A, B):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B: T.Tensor((N,), T.float32)
        C = T.empty_like(A)
        with T.Kernel(1):
            for i in T.serial(N):
                C[i] = A[i] + B[i]
        return C

    lines, first = inspect.getsourcelines(test_eager_output_from_a_missing_language_name_is_reported_at_its_line)
    line = next(first + n for n, text in enumerate(lines) if "C = T.empty_like(A)" in text)
    with pytest.raises(KernelDefinitionError) as info:
        add(torch.randn(8), torch.randn(8))
    text = str(info.value)
    assert f":{line}: @tilelang.jit add: C = T.empty_like(...): module 'tilelang.language' has no attribute 'empty_like'" in text
    assert "T.empty(shape, dtype)" in text


def test_eager_tensor_for_an_unannotated_parameter_says_to_annotate_it():
    @tilelang.jit(target="c")
    def add(A, B):
        N = T.const("N")
        B: T.Tensor((N,), T.float32)
        C = T.empty((N,), T.float32)
        with T.Kernel(1):
            for i in T.serial(N):
                C[i] = A[i] + B[i]
        return C

    with pytest.raises(TypeError, match=r"add\(\) argument 'A': got a torch.Tensor, but 'A' has no tensor annotation"):
        add(torch.randn(8), torch.randn(8))
