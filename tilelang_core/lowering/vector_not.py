"""``~x`` of an integer vector written as ``x ^ all-ones`` for the GPU code generators.

TVM 0.27's CUDA code generator prints a bitwise not of a vector as ``~v`` of the CUDA vector type
(``~*(int4*)(A_ptr + ...)``), and CUDA's vector types (``int2``, ``int4``, ``uint4``, ``short2``,
``longlong4``, ...) have no operators: nvcc refused every ``T.vectorized`` loop of ``~`` on 16-,
32- and 64-bit integers and on 2 lanes of 8-bit ones ("no operator "~" matches these operands",
found by a differential fuzz pass; 4 lanes of 8-bit values, packed in an ``int``, printed right).
Its vector ``^`` is printed lane by lane, so ``~v`` becomes ``v ^ broadcast(all ones)``: the same
bits. Runs on GPU device functions right before code generation (``passes.py``), after
``VectorizeLoop``; scalars are left alone.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import dtype_of

__all__ = ["VectorBitwiseNot"]


def _all_ones(dtype: tvm.DataType) -> Any:
    element = dtype.with_lanes(1)
    value = -1 if str(element).startswith("int") else (1 << element.bits) - 1
    return tirx.Broadcast(tirx.IntImm(str(element), value), dtype.lanes)


def _not(node: Any) -> Any:
    dtype = tvm.DataType(dtype_of(node))
    if dtype.lanes == 1 or dtype.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT):
        return node
    return tirx.BitwiseXor(node.a, _all_ones(dtype))


def _rewrite(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, [(tirx.BitwiseNot, _not)])
    return func if body.same_as(func.body) else func.with_body(body)


def VectorBitwiseNot() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass writing a vector ``~x`` as ``x ^ all-ones`` (module docstring)."""
    return tirx.transform.prim_func_pass(_rewrite, opt_level=0, name="tl.VectorBitwiseNot")
