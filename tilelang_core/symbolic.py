"""Integer expressions over dynamic symbols, as they appear in kernel artifacts.

Shapes and launch sizes in a :class:`~tilelang_core.artifact.KernelArtifact` are ints or strings
such as ``"n + 1"`` or ``"(n + 127) // 128"``. This module checks such a string once (only names,
integer literals, ``+ - * // %``, unary minus, ``min``/``max``) and turns it into a plain Python
function of the symbol values, so evaluating it at call time costs one function call.
"""

from __future__ import annotations

import ast
import keyword
from functools import lru_cache
from typing import Callable, Mapping, Optional, Union

from .ast_lock import AST_LOCK

_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_ALLOWED_CALLS = {"min", "max"}


def unusable_symbol_name(name: str) -> Optional[str]:
    """Why ``name`` cannot name a symbol in these expressions (``None`` when it can): a Python
    keyword (``for``, ``None``) does not parse, and ``min``/``max`` are the expressions' functions."""
    if keyword.iskeyword(name):
        return f"{name!r} is a Python keyword"
    if name in _ALLOWED_CALLS:
        return f"{name!r} names the {name}() function of shape expressions"
    return None


def free_symbols(expr: Union[int, str]) -> set[str]:
    """Names used by an expression (empty for an int)."""
    if isinstance(expr, int):
        return set()
    tree = _parse(expr)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _ALLOWED_CALLS}


@lru_cache(maxsize=4096)
def _parse(expr: str) -> ast.Expression:
    try:
        with AST_LOCK:  # tilelang_core/ast_lock.py
            tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"invalid symbolic expression {expr!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Name, ast.Load)):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINOPS):
            continue
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            continue
        if isinstance(node, ast.operator) or isinstance(node, ast.unaryop):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ALLOWED_CALLS:
            if node.keywords:
                raise ValueError(f"invalid symbolic expression {expr!r}: keywords not allowed")
            continue
        raise ValueError(f"invalid symbolic expression {expr!r}: {type(node).__name__} is not allowed")
    return tree


@lru_cache(maxsize=4096)
def compile_expr(expr: Union[int, str]) -> Callable[[Mapping[str, int]], int]:
    """A function ``f(symbols) -> int`` evaluating ``expr`` with the given symbol values."""
    if isinstance(expr, int):
        value = expr
        return lambda _symbols: value
    tree = _parse(expr)
    code = compile(tree, f"<symbolic {expr}>", "eval")
    builtins = {"min": min, "max": max}

    def evaluate(symbols: Mapping[str, int]) -> int:
        try:
            return int(eval(code, {"__builtins__": builtins}, dict(symbols)))  # noqa: S307 - checked AST
        except NameError as exc:
            raise ValueError(f"expression {expr!r} uses an unbound symbol: {exc}") from None

    return evaluate


def evaluate(expr: Union[int, str], symbols: Mapping[str, int]) -> int:
    """Evaluate ``expr`` with ``symbols`` (see :func:`compile_expr`)."""
    return compile_expr(expr)(symbols)
