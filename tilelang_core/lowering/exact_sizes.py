"""Integer expressions of a kernel computed again, exactly, in int64, with every step checked.

A size known at call time only (the extent ``n * m`` of a tile after ``FlattenBuffer``) is an
expression the kernel computes in its own integer types, where a step can wrap (``65536 * 65536``
is 0 in int32). :class:`ExactSize` emits ``Bind`` statements that compute such an expression from
its leaves in int64, each step checked against the range of its own type, and say whether the
result is exact. :class:`Lets` reads the values the simplifier bound to variables, so that a size
naming one (``cse_v1 = m + 1``) is computed from its value. Used by lowering/workspaces.py.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import PrimType

from ..language.tileops._common import collect, substitute
from .stack_buffers import KEEP_ON_STACK

__all__ = ["BOUND_64", "ExactSize", "Lets", "all_of", "as_bool", "as_i64", "is_int"]

#: Bound of every 64-bit step of a size computation: a sum or a difference of two such values
#: cannot overflow int64, and a product is formed only once it is known to stay within it.
BOUND_64 = 2**62 - 1

#: The integer steps :meth:`ExactSize.evaluate` computes (TIR node class names).
_BINARY_STEPS = ("Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max")


def is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def _step_range(dtype: str) -> tuple[int, int]:
    """The values a step of integer type ``dtype`` takes without wrapping (64-bit steps: within
    :data:`BOUND_64`, so that the next step cannot overflow int64 either)."""
    bits = tvm.runtime.DataType(dtype).bits
    unsigned = dtype.startswith("uint")
    if bits >= 64:
        return (0 if unsigned else -BOUND_64), BOUND_64
    return (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def as_i64(value: Any) -> Any:
    return tirx.IntImm("int64", value) if isinstance(value, int) else value


def all_of(*conditions: Any) -> Any:
    """The conjunction of ``conditions`` (Python bools or TIR ones); a Python bool when they all are."""
    out: Any = True
    for cond in conditions:
        if cond is False or out is False:
            return False
        if cond is True:
            continue
        out = cond if out is True else tirx.And(out, cond)
    return out


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _fold(kind: str, a: int, b: int) -> tuple[bool, int]:
    """``(divisor not 0, value)`` of the step ``kind`` on two constants."""
    if kind in ("Div", "Mod", "FloorDiv", "FloorMod") and b == 0:
        return False, 0
    value = {
        "Add": lambda: a + b, "Sub": lambda: a - b, "Mul": lambda: a * b, "Div": lambda: _truncdiv(a, b),
        "Mod": lambda: a - b * _truncdiv(a, b), "FloorDiv": lambda: a // b, "FloorMod": lambda: a % b,
        "Min": lambda: min(a, b), "Max": lambda: max(a, b),
    }[kind]()
    return True, value


class Lets:
    """The variables a function body binds (``Bind``) once to a value that reads no memory and
    calls nothing (the simplifier's ``cse_v1 = m + 1``): a size naming one is computed from its
    value. A variable bound otherwise counts as the value the kernel computed."""

    def __init__(self, body: Any):
        found: dict = {}
        for bind in collect(body, tirx.Bind):
            key = hash(bind.var)
            pure = not collect(bind.value, (tvm.ir.TensorLoad, tvm.ir.Call))
            found[key] = None if key in found else ((bind.var, bind.value) if pure else None)
        self._values = found

    def value(self, var: Any) -> Optional[Any]:
        """The value ``var`` is bound to, or None."""
        entry = self._values.get(hash(var))
        return entry[1] if entry is not None and entry[0].same_as(var) else None

    def expand(self, expr: Any) -> Any:
        """``expr`` with the variables of :meth:`value` replaced by their values (for messages)."""
        def on_var(var: Any) -> Any:
            value = self.value(var)
            return var if value is None else self.expand(value)

        return tvm_ffi.structural_map(expr, [(tvm.ir.Var, on_var)])


class ExactSize:
    """``Bind`` statements computing integer expressions exactly, in int64.

    Each step (``+ - * / % min max``, a cast) is computed from its operands' exact values and
    checked against the range of its own type (:func:`_step_range`): a step out of it, which the
    kernel's own arithmetic would have wrapped, makes the result invalid. A product is formed only
    once it is known to fit and a division only by a divisor that is not 0, so nothing computed
    here can overflow or trap. Constant steps are folded here.
    """

    def __init__(self, lets: Lets, prefix: str):
        self.lets = lets
        self.prefix = prefix
        self.stmts: list = []
        self.leaves: list = []  # the variables the statements read
        self._known: dict = {}  # hash(let variable) -> (variable, its (valid, value))

    def bind(self, value: Any, dtype: str) -> Any:
        """``value`` bound to a new variable of ``dtype`` (a constant or a variable as it is)."""
        if isinstance(value, (tirx.IntImm, tvm.ir.Var)):
            return value
        var = tirx.Var(f"{self.prefix}_{len(self.stmts)}", PrimType(dtype))
        self.stmts.append(tirx.Bind(var, value))
        return var

    def in_array(self, name: str, results: list) -> tuple[list, list]:
        """The statements bound so far as stores into one int64 stack array ``name``, and
        ``results`` (expressions of them) as loads from it.

        TVM's simplifying passes (``LowerIntrin``) substitute the value of every pure ``Bind``
        into its uses, and the steps use their operands several times: a chain of ``Bind``s grew
        exponentially there (minutes for a tile ``(n, m)`` of int64 sizes). A load they leave alone.
        """
        if not self.stmts:
            return [], results
        slots = [b.var for b in self.stmts]
        array = tirx.decl_buffer([len(slots)], "int64", name=name, scope="global")

        def load(k: int, var: Any) -> Any:
            value = tirx.BufferLoad(array, [tirx.IntImm("int32", k)])
            return value != as_i64(0) if str(var.ty.dtype) == "bool" else value

        mapping = [(var, load(k, var)) for k, var in enumerate(slots)]
        stores = [tirx.BufferStore(array, tirx.Cast("int64", substitute(b.value, mapping)), [tirx.IntImm("int32", k)])
                  for k, b in enumerate(self.stmts)]
        alloc = tirx.AllocBuffer(array, annotations={KEEP_ON_STACK: tirx.IntImm("int32", 1)})
        return [alloc, *stores], [substitute(as_bool(r), mapping) for r in results]

    def evaluate(self, expr: Any) -> tuple[Any, Any]:
        """``(valid, value)`` of the integer expression ``expr``: ``value`` (int64, 0 when not
        ``valid``) is its exact value when ``valid``; Python values where they are constant."""
        kind = type(expr).__name__
        if kind == "IntImm":
            return True, int(expr.value)
        if isinstance(expr, tvm.ir.Var):
            value = self.lets.value(expr)
            if value is None:
                return self._leaf(expr)
            known = self._known.get(hash(expr))
            if known is None or not known[0].same_as(expr):
                known = (expr, self.evaluate(value))  # once: a let used twice is not expanded twice
                self._known[hash(expr)] = known
            return known[1]
        if kind == "Cast" and is_int(str(expr.value.ty.dtype)):
            valid, value = self.evaluate(expr.value)
            return self._step(str(expr.ty.dtype), valid, value)
        if kind in _BINARY_STEPS:
            valid_a, a = self.evaluate(expr.a)
            valid_b, b = self.evaluate(expr.b)
            return self._binary(kind, str(expr.ty.dtype), all_of(valid_a, valid_b), a, b)
        if kind == "Select":
            valid_t, t = self.evaluate(expr.true_value)
            valid_f, f = self.evaluate(expr.false_value)
            cond = expr.condition
            valid = tirx.Select(cond, as_bool(valid_t), as_bool(valid_f))
            return self.bind(valid, "bool"), self.bind(tirx.Select(cond, as_i64(t), as_i64(f)), "int64")
        return self._leaf(expr)

    def _leaf(self, expr: Any) -> tuple[Any, Any]:
        """A value taken as the kernel computed it (a variable, a load): in range of its type."""
        self.leaves.extend(collect(expr, tvm.ir.Var) if not isinstance(expr, tvm.ir.Var) else [expr])
        dtype = str(expr.ty.dtype)
        value = expr if dtype == "int64" else tirx.Cast("int64", expr)
        if tvm.runtime.DataType(dtype).bits < 64:
            return True, value
        return self._step(dtype, True, value)  # an int64 size may pass BOUND_64

    def product(self, valid: Any, a: Any, b: Any) -> tuple[Any, Any]:
        """``(valid, a * b)`` of two results of :meth:`evaluate`, an int64 step."""
        return self._binary("Mul", "int64", valid, a, b)

    def _binary(self, kind: str, dtype: str, valid: Any, a: Any, b: Any) -> tuple[Any, Any]:
        if isinstance(a, int) and isinstance(b, int):
            divisor_ok, value = _fold(kind, a, b)
            return self._step(dtype, all_of(valid, divisor_ok), value)
        x, y = as_i64(a), as_i64(b)
        if kind == "Add":
            raw = x + y
        elif kind == "Sub":
            raw = x - y
        elif kind == "Mul" and dtype.startswith("int") and tvm.runtime.DataType(dtype).bits <= 32:
            raw = x * y  # operands within +-2**31: the product fits int64
        elif kind == "Mul":
            lo, hi = _step_range(dtype)
            divisor = self.bind(_at_least_one(_abs(y)), "int64")
            fits = self.bind(_abs(x) <= tirx.Div(as_i64(max(-lo, hi)), divisor), "bool")
            valid = all_of(valid, fits)
            raw = tirx.Select(fits, x * y, as_i64(0))
        elif kind in ("Div", "Mod", "FloorDiv", "FloorMod"):
            nonzero = self.bind(y != as_i64(0), "bool") if not isinstance(b, int) else b != 0
            valid = all_of(valid, nonzero)
            safe = y if isinstance(b, int) and b != 0 else tirx.Select(as_bool(nonzero), y, as_i64(1))
            raw = getattr(tirx, kind)(x, safe)
        elif kind == "Min":
            raw = tirx.Select(x < y, x, y)
        else:
            raw = tirx.Select(x > y, x, y)
        return self._step(dtype, valid, raw)

    def _step(self, dtype: str, valid: Any, raw: Any) -> tuple[Any, Any]:
        """The result of a step of ``dtype``: ``raw`` when ``valid`` and within the step's range."""
        lo, hi = _step_range(dtype)
        if isinstance(raw, int):
            ok = all_of(valid, lo <= raw <= hi)
            if isinstance(ok, bool):
                return ok, (raw if ok else 0)
            return ok, self.bind(tirx.Select(ok, as_i64(raw), as_i64(0)), "int64")
        raw = self.bind(raw, "int64")
        ok = self.bind(all_of(valid, as_i64(lo) <= raw, raw <= as_i64(hi)), "bool")
        return ok, self.bind(tirx.Select(ok, raw, as_i64(0)), "int64")


def as_bool(value: Any) -> Any:
    return tirx.IntImm("bool", int(value)) if isinstance(value, bool) else value


def _abs(x: Any) -> Any:
    if isinstance(x, tirx.IntImm):
        return tirx.IntImm("int64", abs(int(x.value)))
    return tirx.Select(x < as_i64(0), as_i64(0) - x, x)


def _at_least_one(x: Any) -> Any:
    if isinstance(x, tirx.IntImm):
        return tirx.IntImm("int64", max(int(x.value), 1))
    return tirx.Select(x > as_i64(1), x, as_i64(1))
