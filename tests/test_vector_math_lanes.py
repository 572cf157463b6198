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
