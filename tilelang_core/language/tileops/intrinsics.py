"""Math and GPU intrinsics of the kernel language (TileLang names).

- Fast math: ``T.__exp``, ``T.__exp10``, ``T.__log``, ``T.__log2``, ``T.__log10``, ``T.__tan``,
  ``T.__cos``, ``T.__sin``, ``T.fast_rcp``.
- IEEE rounding: ``T.ieee_add/sub/mul/fdiv(x, y, rounding_mode)``, ``T.ieee_fmaf(x, y, z, mode)``,
  ``T.ieee_frcp/fsqrt(x, mode)``, ``T.ieee_frsqrt(x)``; modes ``rn`` (nearest even), ``rz``
  (toward zero), ``ru`` (toward +inf), ``rd`` (toward -inf).
- ``T.clamp``, ``T.align_up``, ``T.dp4a``.
- GPU only (refused when lowering for a CPU target): warp votes ``T.any_sync``, ``T.all_sync``,
  ``T.ballot_sync``, ``T.ballot``, ``T.activemask``, block votes ``T.syncthreads_and/or/count``,
  shuffles ``T.shfl_sync/xor/down/up``, ``T.match_any_sync``, ``T.match_all_sync``,
  ``T.get_thread_binding(s)``, ``T.get_block_binding(s)``, ``T.__ldg``, ``T.__ffs``, ``T.__fns``.

Each returns a *marker call* (``call_extern(dtype, "tl.math", name, mode, loc, *args)``) that
:mod:`tilelang_core.lowering.intrinsics` lowers per target: the CUDA intrinsic (``__expf``,
``__fadd_rz``, ``__any_sync``, ...) on CUDA, the C/LLVM equivalent on CPU targets (accuracy in
docs/tile-operators.md).
"""

from __future__ import annotations

from numbers import Integral, Number
from typing import Any

import tvm
from tvm import tirx

from ._common import OperandTypeError, cast, fail, is_buffer, is_float, location, scope_of, static_int
from ..core import ceildiv

#: Callee name of the marker calls (lowering/intrinsics.py).
MATH_CALL = "tl.math"
#: The intrinsics that exist on GPU targets only.
GPU_ONLY = (
    "any_sync",
    "all_sync",
    "ballot_sync",
    "ballot",
    "activemask",
    "syncthreads_and",
    "syncthreads_or",
    "syncthreads_count",
    "shfl_sync",
    "shfl_xor",
    "shfl_down",
    "shfl_up",
    "match_any_sync",
    "match_all_sync",
    "thread_binding",
    "block_binding",
    "__ldg",
    "__ffs",
    "__fns",
)
ROUNDING_MODES = ("rn", "rz", "ru", "rd")
_FULL_MASK = 0xFFFFFFFF


def math_call(dtype: str, name: str, *args: Any, mode: str = "") -> Any:
    """The marker expression of one intrinsic (lowered per target)."""
    return tirx.call_extern(
        dtype, MATH_CALL, tvm.ir.StringImm(name), tvm.ir.StringImm(mode), tvm.ir.StringImm(location()), *args
    )


def _expr(value: Any) -> Any:
    if isinstance(value, (bool, Number)) and not isinstance(value, bool):
        return tirx.const(value)
    if isinstance(value, bool):
        return tirx.const(value, "bool")
    return getattr(value, "scalar", value)  # T.alloc_var's wrapper


def _dtype(value: Any) -> str:
    return str(getattr(getattr(value, "ty", None), "dtype", ""))


def _scalar(name: str, operand: str, value: Any) -> None:
    """Refuse an operand of ``T.<name>`` that is not a scalar (a buffer, a region, a string,
    None, a tuple) with the kernel's line, before TVM fails on it with a message without either."""
    from ..operand_checks import check_scalar

    check_scalar(f"T.{name}", operand, value)


def _integer(name: str, operand: str, value: Any, what: str = "an int or an integer expression") -> Any:
    """``value`` as an integer expression, after refusing a value that is not a scalar whose dtype
    is an integer (a float, a bool, a buffer, ...)."""
    from ..operand_checks import _fail, _given

    _scalar(name, operand, value)
    v = _expr(value)
    if isinstance(value, bool) or not _dtype(v).startswith(("int", "uint")):
        _fail(f"T.{name}", f"{operand} must be {what}, got {_given(getattr(value, 'scalar', value))}")
    return v


def _float_operand(name: str, x: Any) -> Any:
    _scalar(name, "the operand x", x)
    x = _expr(x)
    dtype = _dtype(x)
    code = tvm.runtime.DataType(dtype).type_code if dtype else None
    if code not in (tvm.runtime.DataTypeCode.FLOAT, tvm.runtime.DataTypeCode.BFLOAT):
        fail(f"T.{name}", (x,), f"T.{name} only supports floating-point inputs, but got {dtype}", OperandTypeError)
    return x


def _fast(name: str):
    def intrinsic(x: Any) -> Any:
        x = _float_operand(name, x)
        return math_call(_dtype(x), name, x)

    intrinsic.__name__ = name
    intrinsic.__qualname__ = name
    intrinsic.__doc__ = (
        f"``{name[2:]}(x)`` with the GPU's fast approximation: CUDA ``{name}f`` for float32 (other float "
        "dtypes: the precise function); on CPU targets the precise C/LLVM function. Float dtypes only."
    )
    return intrinsic


__exp = _fast("__exp")
__exp10 = _fast("__exp10")
__log = _fast("__log")
__log2 = _fast("__log2")
__log10 = _fast("__log10")
__tan = _fast("__tan")
__cos = _fast("__cos")
__sin = _fast("__sin")


def fast_rcp(x: Any) -> Any:
    """``1 / x`` approximated (CUDA ``__fdividef(1, x)`` for float32; exact division on CPU)."""
    x = _float_operand("fast_rcp", x)
    return math_call(_dtype(x), "fast_rcp", x)


def _mode(name: str, rounding_mode: Any) -> str:
    if not isinstance(rounding_mode, str) or rounding_mode not in ROUNDING_MODES:
        fail(f"T.{name}", (rounding_mode,), f"Invalid rounding mode '{rounding_mode}'. Must be one of: {', '.join(ROUNDING_MODES)}")
    return rounding_mode


#: Operand dtypes of the IEEE operations; the 16-bit ones round to nearest only (as CUDA's
#: half-precision intrinsics ``__hadd_rn``, ``__hfma``, ``hsqrt``, ...).
_IEEE_DTYPES = ("float32", "float64", "float16", "bfloat16")


def _ieee(name: str, args: tuple, rounding_mode: Any) -> Any:
    for operand, a in zip(("x", "y", "z"), args):
        _scalar(name, f"the operand {operand}", a)
    mode = _mode(name, rounding_mode)
    values = [_expr(a) for a in args]
    floats = [v for v in values if _dtype(v) in _IEEE_DTYPES]
    if not floats:
        fail(f"T.{name}", values, "needs float32, float64, float16 or bfloat16 operands", OperandTypeError)
    dtype = _dtype(floats[0])
    if dtype in ("float16", "bfloat16") and mode != "rn":
        fail(f"T.{name}", values, f"{dtype} operands round to nearest only (Only rounding mode 'rn' is available "
             f"for half precision): give rounding_mode='rn' (got '{mode}'), or compute in float32", OperandTypeError)
    converted = []
    for v in values:
        if _dtype(v) != dtype:
            if is_float(_dtype(v)) or not isinstance(v, (tirx.IntImm, tirx.FloatImm)):
                fail(f"T.{name}", values, f"dtype mismatch: operands are {', '.join(_dtype(x) for x in values)}")
            v = cast(v.value, dtype)
        converted.append(v)
    return math_call(dtype, name, *converted, mode=mode)


def ieee_add(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x + y`` rounded with ``rounding_mode`` (float32/float64; float16/bfloat16: ``"rn"`` only)."""
    return _ieee("ieee_add", (x, y), rounding_mode)


def ieee_sub(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x - y`` rounded with ``rounding_mode`` (float32/float64; float16/bfloat16: ``"rn"`` only)."""
    return _ieee("ieee_sub", (x, y), rounding_mode)


def ieee_mul(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x * y`` rounded with ``rounding_mode`` (float32/float64; float16/bfloat16: ``"rn"`` only)."""
    return _ieee("ieee_mul", (x, y), rounding_mode)


def ieee_fmaf(x: Any, y: Any, z: Any, rounding_mode: str = "rn") -> Any:
    """``x * y + z`` with one rounding (``rounding_mode``): float32 and float64 in every mode,
    float16/bfloat16 with ``"rn"``."""
    return _ieee("ieee_fmaf", (x, y, z), rounding_mode)


def ieee_frcp(x: Any, rounding_mode: str = "rn") -> Any:
    """``1 / x`` rounded with ``rounding_mode`` (float32/float64; float16/bfloat16: ``"rn"`` only)."""
    return _ieee("ieee_frcp", (x,), rounding_mode)


def ieee_fsqrt(x: Any, rounding_mode: str = "rn") -> Any:
    """``sqrt(x)`` rounded with ``rounding_mode`` (float32/float64; float16/bfloat16: ``"rn"`` only)."""
    return _ieee("ieee_fsqrt", (x,), rounding_mode)


def ieee_frsqrt(x: Any) -> Any:
    """``1 / sqrt(x)`` rounded to nearest (float32/float64/float16/bfloat16)."""
    return _ieee("ieee_frsqrt", (x,), "rn")


def ieee_fdiv(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """``x / y`` rounded with ``rounding_mode`` (float32/float64; float16/bfloat16: ``"rn"`` only)."""
    return _ieee("ieee_fdiv", (x, y), rounding_mode)


def abs(x: Any, span: Any = None) -> Any:  # noqa: A001 - T.abs
    """``|x|`` (TVM's ``T.abs``). An operand with a side effect (an atomic's previous value, a
    ``T.call_extern``) is bound once (``Let``) instead of being repeated in the select an integer
    ``|x|`` is made of. A signed integer's minimum is its own ``|x|``, as in torch (see
    :func:`wrapping_abs`)."""
    from tvm.tirx import op as tir_op

    value = _expr(x)
    dtype = _dtype(value)
    if dtype and dtype.startswith("int"):
        return _evaluated_once(value, wrapping_abs)
    if dtype and not is_float(dtype):
        return _evaluated_once(value, lambda v: tir_op.abs(v, span))
    element = str(tvm.DataType(dtype).with_lanes(1)) if dtype else ""
    if element and element not in ("float16", "bfloat16", "float32", "float64"):
        # TVM's abs takes no float8 (or narrower float): computed in float32, which is exact
        wide = str(tvm.DataType("float32").with_lanes(tvm.DataType(dtype).lanes))
        return tirx.Cast(dtype, tir_op.abs(tirx.Cast(wide, value), span))
    return tir_op.abs(x, span)


def wrapping_abs(x: Any) -> Any:
    """``|x|`` of a signed integer ``x`` that wraps as torch's: ``|MIN|`` is ``MIN`` (int8 -128,
    int32 -2**31), on every target and without C's undefined ``-MIN``.

    TVM's ``T.abs`` is ``select(x >= 0, x, 0 - x)``: ``0 - MIN`` overflows, so ``c`` and ``llvm``
    disagreed (``max(|MIN|, 3)`` was 3 on ``c`` and ``MIN`` on ``llvm``, whose optimizer takes
    ``|x| >= 0`` for granted), and TVM's simplifier folded ``|x| < 0`` to false. Here the
    minimum takes the outer select's other arm: ``select(MIN < x, select(x < 0, 0 - x, x), x)``,
    whose ``0 - x`` never overflows where it is taken (C's ``?:`` evaluates one arm, LLVM's
    ``select`` ignores the other arm's value), and whose bounds include ``MIN``, so no simplifier
    or optimizer rule drops the sign. (A form in the unsigned type cast back would not do: TVM
    bounds a cast to its value's range, ``[0, MAX]``, and folded ``|x| < 0`` again.)"""
    dtype = tvm.DataType(_dtype(x))
    element = str(dtype.with_lanes(1))
    zero, low = tirx.const(0, element), tirx.min_value(element)
    if dtype.lanes > 1:
        zero, low = tirx.Broadcast(zero, dtype.lanes), tirx.Broadcast(low, dtype.lanes)
    return tirx.Select(low < x, tirx.Select(x < zero, zero - x, x), x)


def _evaluated_once(value: Any, build: Any) -> Any:
    """``build(value)``, with ``value`` bound once when it has a side effect (an atomic's previous
    value, a ``T.call_extern``): lowering/atomic_values.py ``evaluated_once``."""
    from ...lowering.atomic_values import evaluated_once

    return evaluated_once(build, value)


def clamp(dst: Any, min_val: Any, max_val: Any) -> Any:
    """``min(max(dst, min_val), max_val)``; for floats a NaN operand gives NaN (as ``torch.clamp``).

    When ``min_val > max_val`` the result is ``max_val``. Every target (plain TIR).
    """
    from ..operand_checks import check_scalar

    for name, operand in (("the value", dst), ("min_val", min_val), ("max_val", max_val)):
        check_scalar("T.clamp", name, operand)
    x = _expr(dst)  # a number or a scalar expression (checked above): it has a dtype
    dtype = _dtype(x)
    lo = cast(min_val, dtype) if isinstance(min_val, Number) else _expr(min_val)
    hi = cast(max_val, dtype) if isinstance(max_val, Number) else _expr(max_val)
    if _dtype(lo) != dtype:
        lo = cast(lo, dtype)
    if _dtype(hi) != dtype:
        hi = cast(hi, dtype)
    if not is_float(dtype):
        return tirx.min(tirx.max(x, lo), hi)
    from .reduce import isnan

    def float_clamp(v: Any) -> Any:
        nan = tirx.Or(tirx.Or(isnan(v), isnan(lo)), isnan(hi))
        return tirx.Select(nan, v + lo + hi, tirx.min(tirx.max(v, lo), hi))

    return _evaluated_once(x, float_clamp)


def align_up(x: Any, y: Any) -> Any:
    """``x`` rounded up to a multiple of ``y`` (ints stay ints); TileLang's parameter names.

    :raises LoweringError: (a ``TypeError``) an operand that is not an int or an integer
        expression; (a ``ValueError``) a constant ``y`` that is not positive, or a ``y`` that is
        always 0 in the kernel body (the block index ``bx`` of ``T.Kernel(1)``).
    """
    from ..operand_checks import _fail
    from ..zero_divisors import always_zero

    _integer("align_up", "x", x)
    y_expr = _integer("align_up", "y (the alignment)", y)
    alignment = static_int(y_expr)
    if alignment is not None and alignment < 1:
        _fail("T.align_up", f"y (the alignment) must be at least 1, got {alignment}", "value")
    reason = always_zero(y_expr)
    if reason is not None:
        _fail("T.align_up", f"y (the alignment) {y_expr} is always 0 here: {reason}; the alignment must be at "
              "least 1", "value")
    return ceildiv(x, y) * y


#: ``T.round``'s rounding modes (TileLang's names).
ROUND_MODES = ("ties-to-even", "ties-away-from-zero")


def round(x: Any, rounding_mode: str = "ties-to-even", span: Any = None) -> Any:  # noqa: A001 - TileLang's name
    """``x`` rounded to the nearest integer value, in ``x``'s float dtype.

    ``rounding_mode="ties-to-even"`` (default; TIR's ``round``: ``nearbyint``, as ``torch.round``)
    or ``"ties-away-from-zero"`` (C's ``round``: 2.5 gives 3, -0.5 gives -1). Every target: the
    second mode is ``trunc(x)`` moved one unit away from zero where ``|x - trunc(x)| >= 0.5``
    (exact in every float dtype; NaN and infinities are returned unchanged).

    :raises LoweringError: (a ``ValueError``) an unknown ``rounding_mode``.
    """
    if rounding_mode not in ROUND_MODES:
        fail("T.round", (x,), f"rounding_mode must be one of {', '.join(repr(m) for m in ROUND_MODES)}, "
             f"got {rounding_mode!r}")
    value = _expr(x)
    dtype = _dtype(value)
    if rounding_mode == "ties-to-even" or not is_float(dtype):
        return tirx.round(value, span)
    def away_from_zero(v: Any) -> Any:
        whole = tirx.trunc(v)
        one = cast(1, dtype)
        away = whole + tirx.Select(v < cast(0, dtype), -one, one)
        return tirx.Select(tirx.abs(v - whole) >= cast(0.5, dtype), away, whole)

    return _evaluated_once(value, away_from_zero)  # an atomic's previous value: once, not 3 times


def _dp4a_operand(value: Any, role: str, operands: tuple):
    if is_buffer(value):
        return value, [0] * len(value.ty.shape)
    if type(value).__name__ == "TensorLoad":
        return value.source, list(value.indices)
    if type(value).__name__ == "TensorRegion":
        return value.source, [r.min for r in value.region]
    fail("T.dp4a", operands, f"{role} must be a buffer or an element such as {role}[k], got {type(value).__name__}")
    raise AssertionError  # unreachable


def _dp4a_four(value: Any, role: str, buf: Any, start: list, operands: tuple) -> None:
    """``A``/``B`` of ``T.dp4a`` reach 4 elements along their last dimension from ``start``:
    a region of fewer, or a start less than 4 elements before the end of the row, is refused
    (dp4a would read past them: elements of the next row or outside the buffer)."""
    last = static_int(buf.ty.shape[-1]) if len(buf.ty.shape) else None
    first = static_int(start[-1]) if start else None
    if type(value).__name__ == "TensorRegion":
        extent = static_int(value.region[-1].extent)
        if extent is not None and extent < 4:
            fail("T.dp4a", operands, f"{role} must reach 4 int8 elements along its last dimension, but the region "
                 f"{value} has {extent}; give {role}[..., k:k + 4] or the first element {role}[..., k]")
    if last is not None and first is not None and first + 4 > last:
        fail("T.dp4a", operands, f"{role} must reach 4 int8 elements along its last dimension: from index {first} "
             f"the last dimension of '{buf.name}' ({last}) has only {max(last - first, 0)}; start at most at {last - 4}")


def dp4a(A: Any, B: Any, C: Any) -> Any:
    """``C[0] += A[0]*B[0] + A[1]*B[1] + A[2]*B[2] + A[3]*B[3]`` (int8 x int8 -> int32).

    ``A``/``B`` are int8 buffers or elements (4 consecutive elements along the last dimension),
    ``C`` an int32 buffer or element. CUDA: ``__dp4a``; CPU: four products and adds.

    :raises LoweringError: (a ``ValueError``) ``A``/``B`` not int8 or ``C`` not int32.
    """
    operands = (A, B, C)
    a, ai = _dp4a_operand(A, "A", operands)
    b, bi = _dp4a_operand(B, "B", operands)
    c, ci = _dp4a_operand(C, "C", operands)
    _dp4a_four(A, "A", a, ai, operands)
    _dp4a_four(B, "B", b, bi, operands)
    if str(a.ty.dtype) != "int8":
        fail("T.dp4a", operands, f"dp4a requires int8 inputs, got A.dtype='{a.ty.dtype}'")
    if str(b.ty.dtype) != "int8":
        fail("T.dp4a", operands, f"dp4a requires int8 inputs, got B.dtype='{b.ty.dtype}'")
    if str(c.ty.dtype) != "int32":
        fail("T.dp4a", operands, f"dp4a requires an int32 accumulator, got C.dtype='{c.ty.dtype}'")
    return math_call(
        "int32", "dp4a", tirx.address_of(a[tuple(ai)]), tirx.address_of(b[tuple(bi)]), tirx.address_of(c[tuple(ci)])
    )


# -- GPU only ------------------------------------------------------------------------------


def _mask(mask: Any, name: str = "") -> Any:
    """A lane mask as uint32 (an int) or as given (an expression); with ``name`` (``T.<name>``), an
    operand that is not an integer scalar is refused."""
    if isinstance(mask, Integral) and not isinstance(mask, bool):
        return tirx.IntImm("uint32", int(mask) & 0xFFFFFFFF)
    if name:
        return _integer(name, "mask", mask, "a lane mask: an int such as 0xFFFFFFFF (every lane) or an integer expression")
    return _expr(mask)


def _predicate(name: str, predicate: Any) -> Any:
    _scalar(name, "the predicate", predicate)
    p = _expr(predicate)
    code = tvm.runtime.DataType(_dtype(p)).type_code if _dtype(p) else None
    if code not in (tvm.runtime.DataTypeCode.INT, tvm.runtime.DataTypeCode.UINT, tvm.runtime.DataTypeCode.BOOL):
        fail(f"T.{name}", (predicate,), f"T.{name} requires an integer or boolean predicate, but got {_dtype(p) or type(predicate).__name__}.", OperandTypeError)
    return p


def any_sync(predicate: Any, mask: Any = _FULL_MASK) -> Any:
    """Non-zero when ``predicate`` is non-zero in any lane of ``mask`` (CUDA ``__any_sync``). GPU only."""
    return math_call("int32", "any_sync", _mask(mask, "any_sync"), _predicate("any_sync", predicate))


def all_sync(predicate: Any, mask: Any = _FULL_MASK) -> Any:
    """Non-zero when ``predicate`` is non-zero in every lane of ``mask`` (``__all_sync``). GPU only."""
    return math_call("int32", "all_sync", _mask(mask, "all_sync"), _predicate("all_sync", predicate))


def ballot_sync(predicate: Any, mask: Any = _FULL_MASK) -> Any:
    """uint64 bit mask of the lanes of ``mask`` whose ``predicate`` is non-zero (``__ballot_sync``). GPU only."""
    return math_call("uint64", "ballot_sync", _mask(mask, "ballot_sync"), _predicate("ballot_sync", predicate))


def ballot(predicate: Any) -> Any:
    """``ballot_sync(predicate)`` over the whole warp. GPU only."""
    return math_call("uint64", "ballot_sync", _mask(_FULL_MASK), _predicate("ballot", predicate))


def activemask() -> Any:
    """uint64 bit mask of the active lanes of the warp (``__activemask``). GPU only."""
    return math_call("uint64", "activemask")


def syncthreads_count(predicate: Any) -> Any:
    """Block barrier returning how many threads have a non-zero ``predicate``. GPU only."""
    return math_call("int32", "syncthreads_count", _predicate("syncthreads_count", predicate))


def syncthreads_and(predicate: Any) -> Any:
    """Block barrier returning non-zero when every thread's ``predicate`` is non-zero. GPU only."""
    return math_call("int32", "syncthreads_and", _predicate("syncthreads_and", predicate))


def syncthreads_or(predicate: Any) -> Any:
    """Block barrier returning non-zero when some thread's ``predicate`` is non-zero. GPU only."""
    return math_call("int32", "syncthreads_or", _predicate("syncthreads_or", predicate))


def _shuffle(name: str, value: Any, lane: Any, width: Any, mask: Any) -> Any:
    from ..operand_checks import _fail

    _scalar(name, "the value", value)  # a number or a scalar expression: it has a dtype
    lane = _integer(name, "srcLane" if name == "shfl_sync" else "delta", lane)
    width = _integer(name, "width", width, "an int (a power of two from 1 to 32) or an integer expression")
    w = static_int(width)
    if w is not None and (w < 1 or w > 32 or w & (w - 1)):
        _fail(f"T.{name}", f"width must be a power of two from 1 to 32 (lanes per shuffle group), got {w}", "value")
    v = _expr(value)
    dtype = _dtype(v)
    if dtype.startswith("float8"):
        # CUDA has no __shfl_*_sync of __nv_fp8_*: shuffle its bits as a 32-bit integer (as the
        # warp reductions carry 8-bit integers): reinterpret as uint8, widen, shuffle, narrow back
        bits = tirx.Cast("uint32", tirx.reinterpret("uint8", v))
        moved = math_call("uint32", name, _mask(mask, name), bits, lane, width)
        return tirx.reinterpret(dtype, tirx.Cast("uint8", moved))
    return math_call(dtype, name, _mask(mask, name), v, lane, width)


def shfl_sync(value: Any, srcLane: Any, width: Any = 32, mask: Any = _FULL_MASK) -> Any:  # noqa: N803 - TileLang name
    """``value`` of lane ``srcLane`` (``__shfl_sync``). GPU only."""
    return _shuffle("shfl_sync", value, srcLane, width, mask)


def shfl_xor(value: Any, delta: Any, width: Any = 32, mask: Any = _FULL_MASK) -> Any:
    """``value`` of lane ``lane ^ delta`` (``__shfl_xor_sync``). GPU only."""
    return _shuffle("shfl_xor", value, delta, width, mask)


def shfl_down(value: Any, delta: Any, width: Any = 32, mask: Any = _FULL_MASK) -> Any:
    """``value`` of lane ``lane + delta`` (``__shfl_down_sync``). GPU only."""
    return _shuffle("shfl_down", value, delta, width, mask)


def shfl_up(value: Any, delta: Any, width: Any = 32, mask: Any = _FULL_MASK) -> Any:
    """``value`` of lane ``lane - delta`` (``__shfl_up_sync``). GPU only."""
    return _shuffle("shfl_up", value, delta, width, mask)


def match_any_sync(value: Any, mask: Any = _FULL_MASK) -> Any:
    """uint32 mask of the lanes whose ``value`` equals this lane's (``__match_any_sync``, sm_70+). GPU only."""
    _scalar("match_any_sync", "the value", value)
    return math_call("uint32", "match_any_sync", _mask(mask, "match_any_sync"), _expr(value))


def match_all_sync(value: Any, mask: Any = _FULL_MASK) -> Any:
    """``mask`` when every lane of ``mask`` has the same ``value``, else 0 (``__match_all_sync``). GPU only."""
    _scalar("match_all_sync", "the value", value)
    return math_call("uint32", "match_all_sync", _mask(mask, "match_all_sync"), _expr(value))


def _dim(name: str, dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, Integral) or not 0 <= dim <= 2:
        fail(f"T.{name}", (dim,), f"dim must be 0, 1 or 2 (x, y, z), got {dim!r}")
    return int(dim)


def get_thread_binding(dim: int = 0) -> Any:
    """``threadIdx.x/y/z`` of the enclosing ``T.Kernel`` (0 on an axis of one thread). GPU only."""
    return math_call("int32", "thread_binding", tirx.IntImm("int32", _dim("get_thread_binding", dim)))


def get_thread_bindings() -> list:
    """``[threadIdx.x, threadIdx.y, threadIdx.z]`` (see :func:`get_thread_binding`). GPU only."""
    return [get_thread_binding(d) for d in range(3)]


def get_block_binding(dim: int = 0) -> Any:
    """``blockIdx.x/y/z`` of the enclosing ``T.Kernel``. GPU only (CPU kernels name their block
    indices in ``with T.Kernel(...) as (bx, by)``)."""
    return math_call("int32", "block_binding", tirx.IntImm("int32", _dim("get_block_binding", dim)))


def get_block_bindings() -> list:
    """``[blockIdx.x, blockIdx.y, blockIdx.z]`` (see :func:`get_block_binding`). GPU only."""
    return [get_block_binding(d) for d in range(3)]


def __ffs(value: Any) -> Any:
    """Position (1-based) of the least significant set bit, 0 for 0 (CUDA ``__ffs``/``__ffsll``). GPU only."""
    v = _expr(value)
    if not _dtype(v).startswith(("int", "uint")):
        fail("T.__ffs", (value,), f"T.__ffs needs an integer, got {_dtype(v) or type(value).__name__}", OperandTypeError)
    return math_call("int32", "__ffs", v)


def __fns(mask: Any, base: Any, offset: Any) -> Any:
    """Lane of the ``offset``-th set bit of ``mask`` counted from ``base`` (CUDA ``__fns``, uint32). GPU only."""
    base, offset = _integer("__fns", "base", base), _integer("__fns", "offset", offset)
    return math_call("uint32", "__fns", _mask(mask, "__fns"), base, offset)


def __ldg(load_or_buf: Any, index: Any = None) -> Any:
    """Load ``x[i]`` through the read-only data cache (CUDA ``__ldg(&x[i])``). GPU only.

    Give an element (``T.__ldg(x[i])``) or a buffer and a flat index (``T.__ldg(x, i)``).
    """
    value = load_or_buf
    if is_buffer(value):
        if index is None:
            fail("T.__ldg", (value,), "T.__ldg(Buffer, index) requires an index when passing a Buffer.")
        idx = list(index) if isinstance(index, (list, tuple)) else [index]
        for i in idx:
            _integer("__ldg", "the index", i)
        value = value[tuple(idx)]
    elif index is not None:
        from ..operand_checks import _fail, _given

        _fail("T.__ldg", f"an index is given only with a buffer (T.__ldg(x, i)); the first operand is "
                         f"{_given(getattr(value, 'scalar', value))}, so give it alone (T.__ldg(x[i])), got the index {_given(index)}")
    if type(value).__name__ != "TensorLoad":
        fail("T.__ldg", (load_or_buf,), f"T.__ldg expects an element such as x[i] or a buffer and an index, got {type(load_or_buf).__name__}", OperandTypeError)
    if static_int(tvm.runtime.DataType(_dtype(value)).lanes) != 1:
        fail("T.__ldg", (load_or_buf,), "T.__ldg loads one element (no vector index)")
    scope = scope_of(value.source)
    if scope != "global":
        fail("T.__ldg", (load_or_buf,), f"T.__ldg reads global memory (a kernel parameter or T.alloc_global) through "
             f"the read-only data cache, but '{value.source.name}' is in {scope} memory; read the element directly "
             f"({value}), without T.__ldg")
    return math_call(_dtype(value), "__ldg", tirx.address_of(value))
