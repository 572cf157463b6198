"""Floating-point expressions that TVM's simplifier would rewrite by rules of real arithmetic.

TVM 0.27's rewrite simplifier applies some identities of the reals (and integers) to float
values, where they do not hold. Found by differential fuzzing; each gave a wrong result on every
target, without an error:

- ``x - x`` and ``max(x, y) - max(x, y)`` become 0 (IEEE: NaN for an infinite or NaN ``x``);
- ``(x + y) - x`` becomes ``y``, ``x - (x + y)`` becomes ``-y``, ``(x + 1) - 1`` becomes ``x``
  (IEEE: ``x + y`` is rounded first; ``1e8 - (1e8 + 1)`` is 0 in float32, not -1). This is the
  error term of TwoSum/Fast2Sum, which compensated sums and the pipeline's own correctly rounded
  16-bit ``T.ieee_fmaf`` compute;
- ``x == x`` becomes true and ``x != x`` false (IEEE: not for NaN, the usual NaN test);
- ``x * 0`` and ``0 * x`` become 0, ``0 / x`` becomes 0 (IEEE: NaN for an infinite or NaN ``x``,
  and for ``0 / 0``); a call in ``x`` was dropped with it (``T.atomic_add(..., return_prev=True)
  * 0.0`` lost the atomic update);
- ``x + 0.0``, ``0.0 + x`` and ``x - (-0.0)`` become ``x`` (IEEE: +0.0 for ``x = -0.0``).

Those rules fire only on the operands' own structure: one operand equal to the other, or to an
operand of the other when that is a sum, or a constant zero. :func:`guard_float_identities` hides
one operand of each such float operation (the right one; the sum when the right one is a
constant; the zero of a product, a quotient or a sum, the -0.0 of a difference) behind a bit-level round trip
(:func:`.barriers.barrier`), which the simplifier does not see through and code generators emit as
nothing. It runs right before the first simplification of every pass list, and
:func:`.barriers.StripBarriers`, the last pass of every finalize list, removes the round trips again
right before code generation, after the last simplification; other float expressions, and all integer ones, are untouched.

Not guarded, as they hold in IEEE: ``x + (-0.0)`` and ``x - 0.0`` becoming ``x``.
"""

from __future__ import annotations

import math
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from .atomics import checked_map
from .barriers import barrier
from .math_widening import constant, dtype_of, element, is_float, with_lanes

__all__ = ["guard_float_identities", "GuardFloatIdentities"]


def _hide(value: Any) -> Any:
    """``value`` behind a :func:`.barrier`; a bfloat16 one as its float32 value behind it, cast
    back: this guard also runs before ``BF16ComputeLegalize`` (passes.py ``_bf16_compute``, whose
    rebuilt float32 operations fold ``x * 0.0``), which makes a bfloat16 value float32 and so would
    break a round trip through ``uint16``."""
    dtype = dtype_of(value)
    if element(dtype) != "bfloat16":
        return barrier(value)
    f32 = with_lanes("float32", dtype)
    scalar = value.value if isinstance(value, tirx.Broadcast) else value
    if isinstance(scalar, (tirx.FloatImm, tirx.IntImm)):
        wide = constant(float(scalar.value), f32)
    else:
        wide = tirx.Cast(f32, value)
    return tirx.Cast(dtype, barrier(wide))


def _is_float(node: Any) -> bool:
    return is_float(dtype_of(node))


def _same(a: Any, b: Any) -> bool:
    return tvm_ffi.structural_equal(a, b)


def _terms(node: Any) -> list:
    """``node``, and its two operands when it is a sum."""
    return [node, node.a, node.b] if isinstance(node, tirx.Add) else [node]


def _is_constant(node: Any) -> bool:
    if isinstance(node, tirx.Broadcast):
        node = node.value
    return isinstance(node, (tirx.FloatImm, tirx.IntImm))


def _zero_sign(node: Any) -> int:
    """1 for a constant +0.0 (a broadcast of one too), -1 for -0.0, 0 for anything else."""
    if isinstance(node, tirx.Broadcast):
        node = node.value
    if not isinstance(node, tirx.FloatImm) or float(node.value) != 0.0:
        return 0
    return 1 if math.copysign(1.0, float(node.value)) > 0 else -1


def _on_add(node: Any) -> Any:
    """``x + 0.0`` / ``0.0 + x``: the zero is hidden (+0.0 for ``x = -0.0``; ``x + (-0.0)`` is ``x``)."""
    if not _is_float(node):
        return node
    if _zero_sign(node.b) == 1 and not _is_constant(node.a):
        return tirx.Add(node.a, _hide(node.b))
    if _zero_sign(node.a) == 1 and not _is_constant(node.b):
        return tirx.Add(_hide(node.a), node.b)
    return node


def _on_sub(node: Any) -> Any:
    if not _is_float(node):
        return node
    a, b = node.a, node.b
    if _zero_sign(b) == -1 and not _is_constant(a):  # x - (-0.0): +0.0 for x = -0.0
        return tirx.Sub(a, _hide(b))
    if not any(_same(x, y) for x in _terms(a) for y in _terms(b)):
        return node
    if _is_constant(b):  # (x + 1) - 1: the sum is hidden (code generators cannot take a constant's bits)
        return node if _is_constant(a) else tirx.Sub(_hide(a), b)
    return tirx.Sub(a, _hide(b))


def _is_zero(node: Any) -> bool:
    if isinstance(node, tirx.Broadcast):
        node = node.value
    return isinstance(node, tirx.FloatImm) and float(node.value) == 0.0


def _on_mul(node: Any) -> Any:
    """``x * 0`` / ``0 * x``: the zero is hidden (a product with a zero is NaN for an infinite or NaN ``x``)."""
    if not _is_float(node):
        return node
    if _is_zero(node.b) and not _is_constant(node.a):
        return tirx.Mul(node.a, _hide(node.b))
    if _is_zero(node.a) and not _is_constant(node.b):
        return tirx.Mul(_hide(node.a), node.b)
    return node


def _on_div(node: Any) -> Any:
    """``0 / x``: the zero is hidden (NaN for ``x`` zero or NaN)."""
    if _is_float(node) and _is_zero(node.a) and not _is_constant(node.b):
        return tirx.Div(_hide(node.a), node.b)
    return node


def _on_compare(node: Any) -> Any:
    if not _is_float(node.a) or _is_constant(node.a) or not _same(node.a, node.b):
        return node
    return type(node)(node.a, _hide(node.b))


_ENTRIES = [(tirx.Add, _on_add), (tirx.Sub, _on_sub), ((tirx.EQ, tirx.NE), _on_compare), (tirx.Mul, _on_mul), (tirx.Div, _on_div)]


def guard_float_identities(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the float operations listed in the module docstring guarded."""
    body = checked_map(func.body, _ENTRIES)
    return func if body.same_as(func.body) else func.with_body(body)


def GuardFloatIdentities() -> tvm.transform.Pass:  # noqa: N802 - a pass, named like TVM's
    """:func:`guard_float_identities` as a pass over every PrimFunc of a module."""
    return tirx.transform.prim_func_pass(
        lambda func, mod, ctx: guard_float_identities(func), opt_level=0, name="tl.GuardFloatIdentities"
    )
