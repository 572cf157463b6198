"""Python functions called on run-time values in a kernel: ``min(A[i], 3.0)``, ``math.exp(x)``.

A Python function called in a kernel body runs when the kernel is parsed. Its operands there are
expressions of values known only when the kernel runs (``A[i]``, a loop variable), and a Python
built-in that needs a number (``min``, ``max``, ``abs``, ``round``, ``int``, ``float``, ``bool``,
``math.exp``, ...) or a helper that needs True or False (``if x > 0:``, ``x if c else y``, ``and``)
stops on them. TVM 0.27 reported that as ``Cannot use and / or / not operator to Expr, hint: use
tvm.tirx.all / tvm.tirx.any`` or ``bad operand type for abs(): 'TensorLoad'``, which says nothing
about the call. Upstream TileLang gives the same messages.

:func:`install` keeps the error and its place (the call's line) and replaces the text: which
function, why it cannot take a run-time value, and what to write instead (``T.min(a, b)``,
``T.exp(x)``, a ``@T.macro`` helper). Nothing that parsed before parses differently.
"""

from __future__ import annotations

import re
from typing import Any, Optional

__all__ = ["install", "message_for"]

# what TVM and Python say when a Python function gets a TIR expression where it needs a number
_NEEDS_A_VALUE = re.compile(
    r"Cannot use and / or / not operator to Expr"
    r"|bad operand type for \w+\(\)"
    r"|doesn't define __\w+__ method"
    r"|argument must be a string, a bytes-like object or a (real )?number"
    r"|argument must be a string or a (real )?number"  # float(x), Python 3.11
    r"|unsupported operand type\(s\) for divmod\(\)"
    r"|must be (a )?real number, not"
    r"|can't convert .* to (int|float)"
    r"|'\w+' object cannot be interpreted as an integer"
)

#: Python built-ins and what a kernel writes instead.
BUILTIN_REPLACEMENTS = {
    "min": "T.min(a, b) (for more operands, T.min(a, T.min(b, c)))",
    "max": "T.max(a, b) (for more operands, T.max(a, T.max(b, c)))",
    "abs": "T.abs(x)",
    "round": "T.round(x)",
    "int": 'T.cast(x, "int32") (it truncates toward zero, as int() does)',
    "float": 'T.cast(x, "float32")',
    "bool": "x != 0",
    "divmod": "x // y and x % y",
    "range": "T.serial(n) for a loop, or i >= a and i < b for a test",
    "len": "the extent of the buffer's shape (A.shape[0])",
}

_RUN_TIME = "a value known only when the kernel runs"
#: math functions of two operands (the others take one), for the call a message suggests.
_ARITY = dict.fromkeys(("atan2", "copysign", "fmod", "hypot", "ldexp", "nextafter", "pow", "remainder"), 2)
_POWER = "unsupported operand type(s) for ** or pow()"


def _resolve(parser: Any, func: Any) -> Optional[tuple[str, str, Any]]:
    """``(module, name, value)`` of a call's function as written (``("", "min", min)``, ``("math",
    "exp", math.exp)``), its value looked up in the parser's names; None for any other form."""
    import builtins

    from tvm.script.parser._core import doc

    names = parser.var_table.get()
    if isinstance(func, doc.Name):
        value = names.get(func.id, getattr(builtins, func.id, None))
        return "", func.id, value
    if isinstance(func, doc.Attribute) and isinstance(func.value, doc.Name):
        return func.value.id, func.attr, getattr(names.get(func.value.id), func.attr, None)
    return None


def message_for(module: str, name: str, value: Any, error_text: str) -> Optional[str]:
    """The message for a call of ``module.name`` (``module`` empty for a plain name; ``value`` the
    function called) that stopped with ``error_text`` on a run-time value; None when the error is
    not that, or the function is TileLang's or TVM's own (their errors are their own)."""
    import builtins

    if not _NEEDS_A_VALUE.search(error_text) or value is None:
        return None
    owner = getattr(value, "__module__", None) or ""
    if owner.startswith(("tilelang", "tvm")):  # TileLang's, TVM's and TVM FFI's own functions
        return None
    if not module and name in BUILTIN_REPLACEMENTS and value is getattr(builtins, name):
        return (f"{name}() is Python's built-in: it runs when the kernel is parsed and needs numbers known "
                f"then, but an operand is {_RUN_TIME} (a tensor element, a loop variable or an expression "
                f"of them); write {BUILTIN_REPLACEMENTS[name]}")
    if owner in ("math", "cmath") or owner.split(".")[0] in ("numpy", "torch"):
        from .. import language as T

        arity = _ARITY.get(name, 1)
        args = "x" if arity == 1 else "x, y"
        instead = (f"T.{name}({args})" if callable(getattr(T, name, None))
                   else "the T. function of the same math (T.exp, T.log, T.sqrt, ...)")
        return (f"{module or owner}.{name}() runs when the kernel is parsed and needs a number known then, "
                f"but an operand is {_RUN_TIME}; write {instead}")
    if not callable(value) or owner == "builtins":
        return None
    called = f"{module}.{name}" if module else name
    return (f"{called}() is a Python function: it runs when the kernel is parsed, and it used {_RUN_TIME} "
            f"where Python needs a number or True/False (an if, while, and, or, not, x if c else y, min(), "
            f"max(), abs(), int() ...) ({error_text.splitlines()[0]}); make it a @T.macro, whose body is "
            f"kernel code, or write T.if_then_else(c, a, b), T.max(a, b), T.min(a, b) in it")


def _power_message(written: str) -> str:
    return (f"{written} of {_RUN_TIME} is not computed in kernels (TVM has no power operator); write T.pow(x, y) "
            f"(floats; for a small integer power, multiply: x * x)")


def _python_array_message(parser: Any, node: Any, doc: Any) -> Optional[str]:
    """The message for indexing, in a kernel, a torch tensor or numpy array of the Python program
    (a parameter forgotten in a macro's list, ``Out[i] = v`` with a script's ``Out``); None for
    any other error. TVM said "Expected `ir.Var` but got `ffi.Tensor`" (a store) or torch
    "object of type 'Var' has no len()" (a load)."""
    target = node
    if isinstance(node, (doc.Assign, doc.AugAssign)):
        targets = node.targets if isinstance(node, doc.Assign) else [node.target]
        target = next((t for t in targets if isinstance(t, doc.Subscript)), None)
    if not isinstance(target, doc.Subscript) or not isinstance(target.value, doc.Name):
        return None
    name = target.value.id
    value = parser.var_table.get().get(name)
    kind = type(value).__module__.split(".")[0] + "." + type(value).__name__
    if kind not in ("torch.Tensor", "torch.nn.Parameter", "numpy.ndarray"):
        return None
    shape = tuple(getattr(value, "shape", ()))
    return (f"{name} is a {kind} of the Python program (shape {shape}, {getattr(value, 'dtype', '?')}), not a buffer of "
            f"the kernel: a kernel reads and writes the tensors it takes as parameters. Add a parameter for it "
            f"({name}: T.Tensor(...)) and pass {name} when calling the kernel (in a macro: take it as an argument)")


def install() -> None:
    """Give such errors of a call, of ``x ** y``, and of indexing a torch tensor of the Python
    program in a kernel, their message (idempotent)."""
    from tvm.error import DiagnosticError
    from tvm.script.parser._core import doc
    from tvm.script.parser.core.parser import Parser

    original = Parser.report_error
    if getattr(original, "_tilelang_python_calls", False):
        return

    def report_error(self: Any, node: Any, err: Any) -> None:
        if isinstance(node, doc.Call) and isinstance(err, Exception) and not isinstance(err, DiagnosticError):
            called = _resolve(self, node.func)
            text = message_for(*called, str(err)) if called else None
            if text is None and _POWER in str(err):  # pow(x, 2) of a run-time x
                text = _power_message("pow(x, y)")
            if text is not None:
                err = type(err)(text) if isinstance(err, (TypeError, ValueError)) else ValueError(text)
        elif isinstance(node, doc.BinOp) and isinstance(err, TypeError) and _POWER in str(err):
            err = TypeError(_power_message("x ** y"))
        elif isinstance(err, Exception) and not isinstance(err, DiagnosticError):
            text = _python_array_message(self, node, doc)
            if text is not None:
                err = TypeError(text)
        return original(self, node, err)

    report_error.__doc__ = original.__doc__
    report_error._tilelang_python_calls = True  # type: ignore[attr-defined]
    Parser.report_error = report_error
