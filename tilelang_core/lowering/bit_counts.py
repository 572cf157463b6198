"""Bit counts (``T.popcount``, ``T.clz``) of every integer width, on every target.

TVM 0.27's rules for these take 32- and 64-bit integers only, and on CUDA ``popcount`` only the
unsigned ones (``__popc``/``__popcll``). Everything else failed to lower: ``T.popcount`` of int8,
int16, int32, int64, uint8 and uint16 on CUDA ("Unresolved call tirx.popcount"), ``T.clz`` of 8-
and 16-bit integers on CUDA and Metal (a TVM check failure, no kernel line).

:func:`widened_unsigned` is the value every rule takes: the integer reinterpreted as unsigned of
its own width, then zero-extended to 32 or 64 bits, so the count is the count of its own bits.
:func:`lower_gpu_bit_counts` rewrites a GPU kernel body with it (:func:`GpuBitCountsPass`, in
the GPU pipeline right after the fragment layout; the CPU targets' rules are in :mod:`.cpu_math`). ``clz`` of an 8- or 16-bit value is the 32-bit count minus the extra bits, so
``clz(0)`` is the value's width, as on the CPU targets and as CUDA's ``__clz(0)`` is 32.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map

__all__ = ["widened_unsigned", "lower_gpu_bit_counts", "GpuBitCountsPass"]

_WIDE_UNSIGNED = ("uint32", "uint64")


def widened_unsigned(x: Any) -> tuple[Any, int, int]:
    """``x`` as an unsigned int of its own width widened to 32 or 64 bits; its width; the wide width."""
    dtype = str(x.ty.dtype)
    bits = tvm.DataType(dtype).bits
    wide = 64 if bits > 32 else 32
    value = tirx.Cast(f"uint{bits}", x) if dtype.startswith("int") else x
    return (tirx.Cast(f"uint{wide}", value) if bits != wide else value), bits, wide


def _popcount(call: Any) -> Any:
    if str(call.args[0].ty.dtype) in _WIDE_UNSIGNED:
        return call
    value, _, _ = widened_unsigned(call.args[0])
    return tirx.Cast(str(call.ty.dtype), tvm.ir.Call(call.op, [value], ret_ty=str(value.ty.dtype)))


def _clz(call: Any) -> Any:
    value, bits, wide = widened_unsigned(call.args[0])
    if bits == wide:
        return call
    count = tirx.Cast("int32", tvm.ir.Call(call.op, [value], ret_ty=str(value.ty.dtype)))
    return tirx.Cast(str(call.ty.dtype), count - tirx.IntImm("int32", wide - bits))


_RULES = {"tirx.popcount": _popcount, "prim.clz": _clz}


def lower_gpu_bit_counts(body: Any) -> Any:
    """``body`` (a GPU kernel's) with every ``popcount``/``clz`` in a form TVM's GPU rules take."""

    def on_call(call: Any) -> Any:
        rule = _RULES.get(getattr(call.op, "name", None))
        if rule is None or "x" in str(call.ty.dtype):  # vector lanes: left to TVM
            return call
        return rule(call)

    return checked_map(body, [(tvm.ir.Call, on_call)])


def GpuBitCountsPass() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """:func:`lower_gpu_bit_counts` on every PrimFunc of a GPU module."""

    def transform(func, mod, ctx):  # noqa: ARG001
        body = lower_gpu_bit_counts(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.GpuBitCounts")
