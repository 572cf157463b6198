"""uint32 arithmetic that wraps around on the LLVM path, as C's unsigned arithmetic does.

TVM 0.27's LLVM code generator emits 32- and 64-bit unsigned ``+``, ``-`` and ``*`` with LLVM's
``nuw`` flag ("no unsigned wrap"): a result that wraps around is *poison*, and LLVM's optimizer
uses the promise. Kernels that rely on wraparound (hashes, random number generators, overflow
checks such as ``x + c < x``) computed wrong values without an error on target ``llvm``:
``(x + 0xFFFFFFF0) // 16`` and ``x + 0xFFFFFFF0 < x`` of a uint32 ``x`` gave other values than
on target ``c``, whose C compiler wraps around. :func:`wrapping_uint32_arithmetic` computes each
uint32 ``+``, ``-``, ``*`` in uint64, where it cannot wrap (``a - b`` as ``a + (2**32 - b)``), and
truncates the result to its 32 bits. It runs on the LLVM host module right before code generation,
after every simplification, so nothing folds the widening away.

uint64 arithmetic has no wider type and keeps TVM's flags (docs/compatibility.md); 8- and 16-bit
arithmetic is emitted without them already.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import dtype_of, element, with_lanes

__all__ = ["wrapping_uint32_arithmetic"]


def _is_uint32(expr: Any) -> bool:
    return element(dtype_of(expr)) == "uint32"


def _wide(op: str):
    def rewrite(node: Any) -> Any:
        if not _is_uint32(node):
            return node
        dtype = dtype_of(node)
        wide = with_lanes("uint64", dtype)
        a, b = tirx.Cast(wide, node.a), tirx.Cast(wide, node.b)
        if op == "add":
            value = tirx.Add(a, b)
        elif op == "mul":
            value = tirx.Mul(a, b)
        else:  # a - b == a + (2**32 - b) modulo 2**32, with no step that wraps in 64 bits
            value = tirx.Add(a, tirx.Sub(tirx.const(1 << 32, wide), b))
        return tirx.Cast(dtype, value)

    return rewrite


def wrapping_uint32_arithmetic(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every uint32 ``+``, ``-``, ``*`` of its PrimFuncs computed in uint64 and truncated."""
    entries = [(tirx.Add, _wide("add")), (tirx.Sub, _wide("sub")), (tirx.Mul, _wide("mul"))]
    updated = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            body = checked_map(func.body, entries)
            if not body.same_as(func.body):
                updated[gvar] = func.with_body(body)
    if not updated:
        return mod
    mod = mod.clone()
    for gvar, func in updated.items():
        mod.update_func(gvar, func)
    return mod
