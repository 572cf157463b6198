"""float16 arithmetic rounded to float16 after every operation, on the CPU targets.

TVM 0.27's C code generator prints float16 arithmetic on ``half`` (``_Float16``) values as it
is: ``T.trunc(X[i] * T.float16(1.1))`` became ``(half)truncf((float)(X_ptr[i] * (half)1.1f))``.
C compilers on x86-64 without AVX512-FP16 evaluate ``_Float16`` expressions in float (GCC's
excess precision, ``FLT_EVAL_METHOD`` 'promote to float', under ``-fexcess-precision=fast`` and
``=standard`` alike) and round to float16 only where the source converts to ``half``; a
conversion to ``float``, or use as the operand of another operation, keeps the excess precision.
So with ``X = 10`` the kernel gave ``truncf(10.996) = 10`` where the float16 product is 11.0
(llvm, CUDA and torch: every float16 operation rounds to float16), and ``(a * b + c) / d`` was
rounded once instead of after each operation (one random case in five differed): silent wrong
results on cython/c and tvm_ffi/c. On ``llvm``, TVM's ``LowerIntrin`` turns a float16 ``a * b + c``
into ``llvm.fmuladd.f16``, which LLVM may fuse into one operation with one rounding: it splits it
into a float16 multiply and add on x86 without AVX512-FP16 (right, by chance), and fuses it where
the CPU has a float16 fma (AVX512-FP16, AArch64).

:class:`Float16RoundedPerOp` runs right before ``LowerIntrin`` (``passes.cpu_source_finalize_passes``,
``passes.host_finalize_passes``), after every simplification, so nothing folds it back. It
rewrites each float16 ``+``, ``-``, ``*`` and ``/`` into the operation on float32 operands
converted back: ``(half)((float)a * (float)b)`` in C, ``fptrunc(fmul(fpext a, fpext b))`` in LLVM.

- **Exact:** the float32 operation of two float16 operands, rounded to float16, is the float16
  operation correctly rounded (float32 has 24 >= 2 * 11 + 2 significant bits, so the double
  rounding is innocuous for ``+ - * /``).
- **Honoured:** a cast is what the C standard requires to remove excess precision (C11 6.3.1.8,
  footnote 63; an assignment too, but an expression has none to offer). GCC 12 rounds at such a
  cast under ``-fexcess-precision=fast`` and ``=standard``, from ``-O0`` to ``-O3 -march=native``,
  with ``-ffast-math``, in ``#pragma omp simd`` loops and scalar code: on 200,000 random
  ``(a * b + c) / d`` the cast form matched the per-operation reference every time (the plain form
  missed 21%). TVM prints no cast of a ``half`` expression to ``half`` (it drops a cast to the same
  type). On ``llvm``, ``LowerIntrin`` no longer sees a float16 ``a * b + c`` to turn into
  ``fmuladd`` (a float32 product under a cast), and LLVM folds ``fptrunc(fmul(fpext a, fpext b))``
  back into a plain float16 ``fmul`` (exact, for the reason above). (TVM's LLVM targets still
  allow the backend to contract a multiply and an add of any float type where the CPU has an fma
  for it, ``AllowFPOpFusion::Fast``: float16 on AVX512-FP16 and AArch64 CPUs, not this x86-64.)
- **Cheap:** the compilers compute float16 arithmetic in float32 anyway (without AVX512-FP16);
  what is added is one float-to-half conversion per operation (one ``vcvtps2ph`` for eight lanes
  with F16C).

float16 constants are rounded to float16 here too: TVM's C code generator prints
``T.float16(v)`` as ``(half)<v with seven digits>f``, which rounds a value within ``5e-7`` of a
float16 midpoint the wrong way (``1 + 2**-11 + 2**-30`` gave 1.0, not 1.0009765625); a float16
value prints exactly.

Math functions of float16 values are computed in float32 and cast back already
(:mod:`.cpu_math`); comparisons, ``min``/``max`` and selects are exact. See docs/pipeline.md.
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import tirx

from ..language.dtypes import representable_constant
from .atomics import checked_map
from .math_widening import dtype_of, element, with_lanes

__all__ = ["Float16RoundedPerOp"]


def _per_op(make: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    def rewrite(node: Any) -> Any:
        dtype = dtype_of(node)
        if element(dtype) != "float16":
            return node
        wide = with_lanes("float32", dtype)
        return tirx.Cast(dtype, make(tirx.Cast(wide, node.a), tirx.Cast(wide, node.b)))

    return rewrite


def _constant(imm: Any) -> Any:
    return representable_constant(imm) if element(dtype_of(imm)) == "float16" else imm


_ENTRIES = [
    (tirx.Add, _per_op(tirx.Add)),
    (tirx.Sub, _per_op(tirx.Sub)),
    (tirx.Mul, _per_op(tirx.Mul)),
    (tirx.Div, _per_op(tirx.Div)),
    (tirx.FloatImm, _constant),
]


def _rewrite(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, _ENTRIES)
    return func if body.same_as(func.body) else func.with_body(body)


def Float16RoundedPerOp() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass computing every float16 ``+ - * /`` of a PrimFunc in float32 and casting it back
    to float16, and making every float16 constant a float16 value (see the module docstring)."""
    return tirx.transform.prim_func_pass(_rewrite, opt_level=0, name="tl.Float16RoundedPerOp")
