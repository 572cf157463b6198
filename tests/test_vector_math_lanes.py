"""Math functions of explicit vector values on ``llvm`` (lowering/cpu_math.py ``_per_lane``).

A ``T.Ramp`` load gives a ``float64x2`` (``float32x4``, ``float16x2``) value. TVM's LLVM code
generator called a C library function with it as if it were one scalar: ``T.fmod``, ``T.tanh``,
``T.sinh``, ``T.cosh``, ``T.atanh`` and ``T.fma`` of a vector wrote 0 or garbage to every lane but
the first. ``T.atan2``, ``T.erf``, ``T.log1p``, the inverse trigonometric functions,
``T.copysign``, ``T.hypot``, ``T.nextafter`` and ``T.ldexp`` stopped with "unknown intrinsic",
``T.exp10`` with "FloatImm can only take scalar". Each lane is now its own scalar call. (Target
``c`` refuses vector values with a message: its code generator prints OpenCL syntax.)
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T

#: name: (kernel expression of the vector v, torch reference of the tensor a)
FUNCTIONS = {
    "fmod": (lambda v: T.fmod(v, 0.1), lambda a: torch.fmod(a, 0.1)),
    "tanh": (T.tanh, torch.tanh),
    "sinh": (T.sinh, torch.sinh),
    "cosh": (T.cosh, torch.cosh),
    "atanh": (T.atanh, torch.atanh),
    "fma": (lambda v: T.fma(v, v, 1.0), lambda a: a * a + 1),
    "atan2": (lambda v: T.atan2(v, v + v), lambda a: torch.atan2(a, a + a)),
    "erf": (T.erf, torch.erf),
    "log1p": (T.log1p, torch.log1p),
    "asin": (T.asin, torch.asin),
    "atan": (T.atan, torch.atan),
    "copysign": (lambda v: T.copysign(v, -1.0), lambda a: -a.abs()),
    "hypot": (lambda v: T.hypot(v, v), lambda a: torch.hypot(a, a)),
    "ldexp": (lambda v: T.ldexp(v, 3), lambda a: a * 8),
    "exp10": (T.exp10, lambda a: torch.pow(10.0, a.double()).to(a.dtype)),
    "nextafter": (lambda v: T.nextafter(v, 10.0), lambda a: torch.nextafter(a, torch.full_like(a, 10.0))),
    "exp": (T.exp, torch.exp),  # LLVM's own vector intrinsic: still right
}
LANES = {"float64": 2, "float32": 4, "float16": 2, "bfloat16": 2}


def _kernel(function, dtype, lanes):
    @T.prim_func
    def vector_math(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(8 // lanes):
                B[T.Ramp(i * lanes, 1, lanes)] = function(A[T.Ramp(i * lanes, 1, lanes)])

    return vector_math


@pytest.mark.parametrize("dtype", list(LANES))
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_every_lane_of_vector_math_is_computed_on_llvm(name, dtype):
    function, reference = FUNCTIONS[name]
    kernel = tilelang.compile(_kernel(function, dtype, LANES[dtype]), target="llvm", execution_backend="tvm_ffi")
    a = (torch.arange(8, dtype=torch.float64) * 0.11 + 0.05).to(getattr(torch, dtype))
    b = torch.zeros_like(a)
    kernel(a, b)
    if dtype in ("float16", "bfloat16") and name != "nextafter":
        want = reference(a.float()).to(a.dtype)  # computed in float32 and rounded once
    else:
        want = reference(a)
    torch.testing.assert_close(b, want, rtol=1e-6 if dtype == "float64" else None, atol=1e-9 if dtype == "float64" else None)


def _classifier_kernel(classify, dtype, lanes, ramp):
    @T.prim_func
    def classified(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=1) as _:
            if ramp:
                for i in T.serial(8 // lanes):
                    B[T.Ramp(i * lanes, 1, lanes)] = T.Cast(f"{dtype}x{lanes}", classify(A[T.Ramp(i * lanes, 1, lanes)]))
            else:
                for i in T.vectorized(8):
                    B[i] = T.Cast(dtype, classify(A[i]))

    return classified


_SPECIAL = [0.0, float("inf"), -float("inf"), float("nan"), -2.5, 1.0e4, -0.0, 1e-3]


@pytest.mark.parametrize("dtype", list(LANES))
@pytest.mark.parametrize("name", ["isinf", "isfinite", "isnan"])
@pytest.mark.parametrize("target,ramp", [("llvm", True), ("llvm", False), ("c", False)],
                         ids=["llvm-ramp", "llvm-vectorized", "c-vectorized"])
def test_classifiers_of_vector_values_per_lane(monkeypatch, name, dtype, target, ramp):
    """T.isinf / T.isfinite of a vector (a T.Ramp load) stopped with TVM's "Check failed:
    dtype.lanes() == 1" at the kernel line; each lane is now classified, as T.isnan's are."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(_classifier_kernel(getattr(T, name), dtype, LANES[dtype], ramp), target=target,
                              execution_backend="tvm_ffi")
    a = torch.tensor(_SPECIAL, dtype=getattr(torch, dtype))
    b = torch.full_like(a, 7)
    kernel(a, b)
    assert b.tolist() == getattr(torch, name)(a).to(a.dtype).tolist(), (name, dtype, a.tolist(), b.tolist())


def test_vector_classifiers_on_c_are_refused_as_vector_values():
    """On ``c`` a T.Ramp load is refused as a vector value (its generator prints OpenCL syntax), not
    with TVM's "Check failed: dtype.lanes() == 1"."""
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError) as info:
        tilelang.compile(_classifier_kernel(T.isinf, "float32", 4, True), target="c", execution_backend="tvm_ffi")
    assert "vector values" in str(info.value) and "Check failed" not in str(info.value), str(info.value)
