"""Symbolic shape expressions of a kernel artifact, turned into what native code can evaluate.

The artifact writes shapes and launch sizes as ints or Python-syntax expressions over symbol
names (see :mod:`tilelang_core.symbolic`). The dispatcher evaluates them with a tiny stack
machine (:func:`to_bytecode`); the CUDA host launcher gets them as C expressions (:func:`to_c`).
Both follow Python's floor division and modulo.
"""

from __future__ import annotations

import ast
from typing import Callable, Sequence, Union

from tilelang_core.errors import KernelNotSupportedError
from tilelang_core.symbolic import compile_expr

# opcodes understood by _dispatch_core.h (keep in sync with TL_OP_*)
OP_END, OP_CONST, OP_SYM, OP_ADD, OP_SUB, OP_MUL, OP_FLOORDIV, OP_MOD, OP_NEG, OP_MIN, OP_MAX = range(11)

_BINOPS = {ast.Add: OP_ADD, ast.Sub: OP_SUB, ast.Mult: OP_MUL, ast.FloorDiv: OP_FLOORDIV, ast.Mod: OP_MOD}
_MAX_DEPTH = 30  # the native evaluator's stack holds 32 values


def _tree(expr: str) -> ast.expr:
    compile_expr(expr)  # validates with the core's rules (raises ValueError)
    return ast.parse(expr.strip(), mode="eval").body


def is_plain_symbol(expr: Union[int, str]) -> bool:
    """True when ``expr`` is just a symbol name such as ``"n"``."""
    return isinstance(expr, str) and expr.strip().isidentifier()


def to_bytecode(expr: str, symbol_index: Callable[[str], int]) -> list[int]:
    """Postfix code for the dispatcher's evaluator; ``symbol_index`` maps a name to its slot."""
    code: list[int] = []
    depth = 0

    def emit(node: ast.expr, level: int) -> None:
        nonlocal depth
        depth = max(depth, level)
        if isinstance(node, ast.Constant):
            code.extend((OP_CONST, int(node.value)))
        elif isinstance(node, ast.Name):
            code.extend((OP_SYM, symbol_index(node.id)))
        elif isinstance(node, ast.UnaryOp):
            emit(node.operand, level)
            if isinstance(node.op, ast.USub):
                code.append(OP_NEG)
        elif isinstance(node, ast.BinOp):
            emit(node.left, level)
            emit(node.right, level + 1)
            code.append(_BINOPS[type(node.op)])
        elif isinstance(node, ast.Call):
            op = OP_MIN if node.func.id == "min" else OP_MAX  # type: ignore[attr-defined]
            if not node.args:
                raise ValueError(f"invalid symbolic expression {expr!r}: {node.func.id}() needs arguments")  # type: ignore[attr-defined]
            emit(node.args[0], level)
            for arg in node.args[1:]:
                emit(arg, level + 1)
                code.append(op)
        else:  # pragma: no cover - excluded by compile_expr
            raise ValueError(f"invalid symbolic expression {expr!r}")

    emit(_tree(expr), 1)
    if depth > _MAX_DEPTH:  # a ValueError too
        raise KernelNotSupportedError(f"the cython backend evaluates shape expressions nested at most {_MAX_DEPTH} "
                                      f"deep, {expr!r} is nested {depth} deep")
    code.append(OP_END)
    return code


def to_c(expr: Union[int, str], symbol_ref: Callable[[str], str]) -> str:
    """A C expression of type ``long long``; ``symbol_ref`` gives the C text of a symbol's value.

    Uses the helpers ``__tl_cy_floordiv``/``__tl_cy_mod``/``__tl_cy_min``/``__tl_cy_max`` that
    the generated launcher defines.
    """
    if isinstance(expr, int):
        return f"{expr}LL"

    def emit(node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            return f"{int(node.value)}LL"
        if isinstance(node, ast.Name):
            return f"((long long){symbol_ref(node.id)})"
        if isinstance(node, ast.UnaryOp):
            inner = emit(node.operand)
            return f"(-{inner})" if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            a, b = emit(node.left), emit(node.right)
            if isinstance(node.op, ast.FloorDiv):
                return f"__tl_cy_floordiv({a}, {b})"
            if isinstance(node.op, ast.Mod):
                return f"__tl_cy_mod({a}, {b})"
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(node.op)]
            return f"({a} {sym} {b})"
        if isinstance(node, ast.Call):
            fn = "__tl_cy_min" if node.func.id == "min" else "__tl_cy_max"  # type: ignore[attr-defined]
            out = emit(node.args[0])
            for arg in node.args[1:]:
                out = f"{fn}({out}, {emit(arg)})"
            return out
        raise ValueError(f"invalid symbolic expression {expr!r}")  # pragma: no cover

    return emit(_tree(expr))

