"""TVM's ``NarrowDataType(32)``, except for functions with a loop of 2**31 iterations or more.

``NarrowDataType`` makes a 64-bit loop variable 32-bit where its range fits: the variable of
``for i in range(2**31)`` (and ``T.serial``, ``T.Parallel``) runs to ``2**31 - 1``, which fits,
but the loop's extent, 2**31, does not, and the pass stopped with "Literal value 2147483648
exceeds range of int32" (a loop of 2**31 + 1 iterations or more was kept 64-bit and worked). A
function with a constant loop extent of 2**31 or more keeps its 64-bit types here.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from .atomics import collect

__all__ = ["NarrowDataType32"]

#: The first loop extent that 32-bit loop variables cannot write.
_INT32_END = 2**31


def _has_a_huge_loop(func: Any) -> bool:
    return any(isinstance(loop.extent, tirx.IntImm) and int(loop.extent) >= _INT32_END
               for loop in collect(func.body, tirx.For))


def NarrowDataType32() -> Any:  # noqa: N802 - a pass, named as TVM's
    """``tirx.transform.NarrowDataType(32)`` for the functions without a loop of 2**31 iterations or more."""
    narrow = tirx.transform.NarrowDataType(32)

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        if _has_a_huge_loop(func):
            return func
        import tvm

        return narrow(tvm.IRModule({"main": func}))["main"]

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.NarrowDataType32")
