"""``T.print``: print a value, a tile or a message from inside a kernel (for debugging).

``T.print(obj=None, msg="", warp_group_id=0, warp_id=0)`` checks its operands here and leaves
one marker statement, ``call_extern("int32", PRINT_CALL, kind, loc, label, *payload)``:

* ``kind = "value"``: ``payload = [value, *indices]``, ``label`` = ``msg`` or the expression's text;
  ``indices``: those of an element ``A[i, j]`` read at indices that are not all constants;
* ``kind = "tile"``: ``payload = [address_of(buf[starts]), lane, *extents]`` (a whole buffer has
  starts 0 and its shape as extents), ``label`` = ``msg`` (may be empty);
* ``kind = "msg"``: no payload, ``label`` = ``msg``.

:mod:`tilelang_core.lowering.debug_print` expands the marker in the frontend step (which knows
the block and thread indices, and stages GPU fragments through shared memory) and then lowers
each printed line for the target: ``printf`` in C and CUDA, a variadic ``printf`` call in LLVM
IR. The line format is documented in docs/tile-operators.md ("Debugging: T.print").
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ..expression_depth import check_operand_depth

from ._common import OperandCheckError, OperandTypeError, describe, fail, is_buffer, location, static_int

__all__ = ["PRINT_CALL", "WARP_GROUP_SIZE", "WARP_SIZE", "print", "printable_dtype"]

#: Callee name of the marker statement.
PRINT_CALL = "tl.print"
#: Threads of a warp group and of a warp: the printing thread of a tile is
#: ``warp_group_id * WARP_GROUP_SIZE + warp_id * WARP_SIZE`` (linear thread id).
WARP_GROUP_SIZE = 128
WARP_SIZE = 32

_OP = "T.print"


def _int64_const(value: int) -> Any:
    if -(2**63) <= value < 2**63:
        return tirx.IntImm("int32" if -(2**31) <= value < 2**31 else "int64", value)
    if value < 2**64:
        return tirx.IntImm("uint64", value)
    fail(_OP, (value,), f"obj {value} does not fit in 64 bits", OperandTypeError)
    raise AssertionError  # unreachable


def _python_scalar(obj: Any) -> Any:
    """A Python bool/int/float as a constant expression (``T.print(block_M)`` of a kernel factory)."""
    if isinstance(obj, bool):
        return tirx.const(obj, "bool")
    if isinstance(obj, Integral):
        return _int64_const(int(obj))
    return tirx.FloatImm("float64", float(obj))


def _check_lane_id(name: str, value: Any, operands: tuple) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        fail(_OP, operands, f"{name} must be an int >= 0, got {value!r}", OperandTypeError)
    return int(value)


def _region(obj: Any) -> tuple[Any, list, list]:
    """``(buffer, starts, extents)`` of a buffer or of a region ``A[0:4, j]``."""
    if is_buffer(obj):
        shape = list(obj.ty.shape)
        return obj, [tirx.IntImm("int32", 0)] * len(shape), shape
    starts = [r.min for r in obj.region]
    extents = [r.extent for r in obj.region]
    for e in extents:
        if static_int(e) is not None and static_int(e) < 1:
            fail(_OP, (obj,), f"obj: the region {describe(obj)} is empty (extent {static_int(e)})")
    return obj.source, starts, extents


def printable_dtype(dtype: str) -> bool:
    """Whether ``T.print`` can print values of ``dtype``: bool, 8- to 64-bit integers, float16,
    bfloat16, float32, float64 and the 8-bit floats (those on CUDA only: TVM 0.27 cannot convert
    them on CPU targets, which the lowering says)."""
    t = tvm.runtime.DataType(dtype)
    if t.lanes != 1:
        return False
    if dtype == "bool":
        return True
    if t.type_code in (tvm.runtime.DataTypeCode.INT, tvm.runtime.DataTypeCode.UINT):
        return t.bits in (8, 16, 32, 64)
    return dtype in ("float16", "bfloat16", "float32", "float64") or dtype.startswith("float8")


def _check_dtype(dtype: str, what: str, operands: tuple) -> None:
    if tvm.runtime.DataType(dtype).lanes != 1:
        fail(_OP, operands, f"obj is a vector value ({dtype}); print one lane at a time (T.extract_lane(v, k))",
             OperandTypeError)
    if not printable_dtype(dtype):
        fail(_OP, operands, f"{what} has dtype {dtype}, which T.print cannot print (it prints bool, int8..int64, "
             "uint8..uint64, float16, bfloat16, float32, float64 and, on CUDA, float8)", OperandTypeError)


def print(obj: Any = None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0) -> None:  # noqa: A001 - T.print
    """Print from inside a kernel, for debugging; one line per value, each saying where it came from.

    * ``obj`` a scalar expression (an element ``A[i]``, an index expression, a ``T.alloc_var``,
      a Python number): one line ``<msg> = <value>`` (``msg`` defaults to the expression's text;
      an element at computed indices adds their values: ``A[i, j] at [2, 5] = <value>``),
      printed by every thread (GPU) or every block (CPU) that executes the statement.
    * ``obj`` a buffer of any scope (global, shared, fragment, local) or a region of one
      (``A[0:4, 0:8]``): one line per element, ``[<msg>: ]A[i, j] = <value>``, row-major, printed by
      one thread of the block on GPUs (linear thread id ``warp_group_id * 128 + warp_id * 32``)
      and once per block on CPU targets. On GPUs the statement involves the whole block (a fragment
      is first copied into a shared tile by its owning threads; a global buffer is read after a
      barrier), so write it where every thread of the block runs it, as ``T.copy``.
    * ``obj`` None: the line is ``msg`` alone (``msg`` must then be a non-empty ``str``).

    Every line starts with ``T.print block=(bx, by, bz)`` and, on GPUs, ``thread=(tx, ty, tz)``.
    Integers and booleans print exactly; floats with enough digits to tell neighbouring values of
    their dtype apart (``%.9g`` for float32, ``%.17g`` for float64). Targets: ``c`` and ``llvm``
    (``printf`` to the process's standard output, flushed after each line) and CUDA (device
    ``printf``); Metal and ROCm refuse the kernel when lowering.
    """
    operands = tuple(o for o in (obj, msg) if o is not None and not (isinstance(o, str) and o == ""))
    if not isinstance(msg, str):
        fail(_OP, operands, f"msg must be a str, got {type(msg).__name__}", OperandTypeError)
    lane = _check_lane_id("warp_group_id", warp_group_id, operands) * WARP_GROUP_SIZE
    lane += _check_lane_id("warp_id", warp_id, operands) * WARP_SIZE
    loc = tvm.ir.StringImm(location())
    obj = getattr(obj, "scalar", obj)  # TVMScript's wrapper of a T.alloc_var
    if obj is None:
        if not msg:
            fail(_OP, operands, "nothing to print: give obj (a scalar expression or a buffer) or a non-empty msg",
                 OperandCheckError)
        _B.evaluate(tirx.call_extern("int32", PRINT_CALL, tvm.ir.StringImm("msg"), loc, tvm.ir.StringImm(msg)))
        return
    if isinstance(obj, str):
        fail(_OP, operands, f"obj must be a scalar expression, a buffer or None, got the str {obj!r}; to print a "
             f"message, pass it as msg: T.print(msg={obj!r})", OperandTypeError)
    if is_buffer(obj) or type(obj).__name__ == "TensorRegion":
        buffer, starts, extents = _region(obj)
        _check_dtype(str(buffer.ty.dtype), f"obj: the buffer {describe(buffer)}", operands)
        address = tirx.address_of(buffer[tuple(starts)])
        _B.evaluate(tirx.call_extern("int32", PRINT_CALL, tvm.ir.StringImm("tile"), loc, tvm.ir.StringImm(msg),
                                     address, tirx.IntImm("int32", lane), *extents))
        return
    if isinstance(obj, (bool, Integral, Real)) and not isinstance(obj, tvm.ir.Expr):
        value, label = _python_scalar(obj), msg or repr(obj)
    elif isinstance(obj, tvm.ir.Expr) and getattr(getattr(obj, "ty", None), "dtype", None) is not None:
        check_operand_depth(_OP, "obj", obj)  # before describe() prints it
        value, label = obj, msg or describe(obj)
    else:
        fail(_OP, operands, "obj must be a scalar expression (A[i], x + 1, a T.alloc_var), a buffer, a region "
             f"(A[0:4, j]) or None, got {type(obj).__name__}", OperandTypeError)
        raise AssertionError  # unreachable
    _check_dtype(str(value.ty.dtype), "obj", operands)
    # an element read at computed indices (A[i, j] in a loop) also prints the indices' values
    indices = list(value.indices) if type(value).__name__ == "TensorLoad" else []
    if all(static_int(i) is not None for i in indices):
        indices = []
    _B.evaluate(tirx.call_extern("int32", PRINT_CALL, tvm.ir.StringImm("value"), loc, tvm.ir.StringImm(label), value,
                                 *indices))
