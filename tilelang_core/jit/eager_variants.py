"""Eager ``@tilelang.jit`` functions that pick one of several kernels by a compile-time value.

TileLang writes a kernel whose declarations differ per case as an ``if`` over a Python value,
each branch declaring its own constants and tensors and opening its own ``T.Kernel``::

    @tilelang.jit
    def fill(A: T.ptr, is_2d: bool = False):
        if is_2d:
            M, N = T.const("M, N")
            A = T.match_buffer(A, [M, N], T.float32)
            with T.Kernel(1):
                A[0, 0] = 1.0
        else:
            L = T.const("L")
            A = T.match_buffer(A, [L], T.float32)
            with T.Kernel(1):
                A[0] = 2.0

Each branch (*arm*) of such a top-level ``if``/``elif``/``else`` chain is an eager function of
its own (jit/eager.py), made of the statements before the ``if`` and the arm's statements. Per
call, the conditions are evaluated in order with the call's compile-time values (as Python runs
the ``if``), and the first true one's arm specialises, compiles and runs. A condition may read
the function's compile-time parameters, globals and closure, not a kernel parameter: those
are symbols until the kernel runs.

A chain is an arm dispatch only when an arm declares something (``T.const``, ``T.empty``, a
parameter's annotation or ``T.match_buffer``): an ``if`` whose arms only open kernels is part of
an ordinary eager body, and TVMScript picks its branch when it parses the kernel.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import KernelDefinitionError
from ..fork_locks import renew_after_fork

__all__ = ["Arm", "ArmChain", "arm_chain", "VariantEagerFunction", "eager_function"]


@dataclass
class Arm:
    """One branch of the chain: its condition (None for ``else``) and its statements."""

    test: Optional[ast.expr]
    body: list[ast.stmt]


@dataclass
class ArmChain:
    """The statements before the ``if``, the ``if`` itself and its arms in the order Python tries them."""

    prefix: list[ast.stmt]
    node: ast.If
    arms: list[Arm]


def _declares(stmt: ast.stmt, params: set[str]) -> bool:
    """Whether ``stmt`` is an eager declaration: ``T.const``/``T.empty``, a parameter's annotation
    (``A: T.Tensor[...]``) or ``A = T.match_buffer(A, ...)``."""
    from .eager import _call_attr, _matched_param

    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in params:
        return True
    if isinstance(stmt, ast.Assign) and _call_attr(stmt.value) in ("const", "empty"):
        return True
    return _matched_param(stmt) in params


def arm_chain(fdef: ast.FunctionDef) -> Optional[ArmChain]:
    """The arm chain of an eager function's body, or None when the body is not one.

    A body is one when it ends with an ``if`` statement, every statement before it is a
    declaration or plain Python (no ``with``/``for``/``while``; an ``if`` only of assignments, as
    ``if scale is None: scale = ...``), and an arm of the ``if`` declares something at its top
    level.
    """
    params = {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    body = list(fdef.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # docstring
    if not body or not isinstance(body[-1], ast.If):
        return None
    prefix, node = body[:-1], body[-1]
    from .eager import _plain_python

    if any(isinstance(s, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.Match, ast.Try))
           or isinstance(s, ast.If) and not _plain_python(s) for s in prefix):
        return None  # the kernel body starts before the if (or an earlier if declares something)
    arms: list[Arm] = []
    current: Any = node
    while True:
        arms.append(Arm(current.test, list(current.body)))
        rest = current.orelse
        if len(rest) == 1 and isinstance(rest[0], ast.If):
            current = rest[0]  # elif
            continue
        if rest:
            arms.append(Arm(None, list(rest)))
        break
    if not any(_declares(s, params) for arm in arms for s in arm.body):
        return None
    return ArmChain(prefix, node, arms)


class VariantEagerFunction:
    """An eager function whose body is an arm chain (see the module docstring): one
    :class:`~tilelang_core.jit.eager.EagerFunction` per arm, chosen per call."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any], kind: str = "@tilelang.jit",
                 debug_root_path: Optional[str] = None) -> None:
        from .eager import EagerFunction, _function_def

        fdef, _, _ = _function_def(func)
        chain = arm_chain(fdef)
        if chain is None:  # the caller checked: a body that is not a chain has one EagerFunction
            raise KernelDefinitionError(f"{kind} {func.__name__}: the body is not an if/elif/else over kernels")
        self.func = func
        self.name = func.__name__
        self.arms = [EagerFunction(func, options, kind, debug_root_path, arm=i) for i in range(len(chain.arms))]
        first = self.arms[0].analysis
        self.signature = first.signature
        self.filename = first.filename
        self.line = chain.node.lineno
        kernel_params = set().union(*(arm.analysis.kernel_params for arm in self.arms))
        for arm in chain.arms:
            if arm.test is None:
                continue
            read = sorted({n.id for n in ast.walk(arm.test) if isinstance(n, ast.Name)} & kernel_params)
            if read:
                raise KernelDefinitionError(
                    f"{self.filename}:{arm.test.lineno}: {kind} {self.name}: this condition chooses which kernel to "
                    f"build, so it is evaluated in Python before any kernel runs, but it reads the kernel "
                    f"parameter(s) {', '.join(read)}; test a compile-time parameter (a plain Python value) instead")
        self._tests = [None if arm.test is None else compile(ast.Expression(arm.test), self.filename, "eval",
                                                              dont_inherit=True) for arm in chain.arms]
        self._has_else = chain.arms[-1].test is None
        names = list(self.signature.parameters)
        self._kernel_positions = frozenset(i for i, p in enumerate(names) if p in kernel_params)
        self._compile_params = [p for p in names if p not in kernel_params]
        self._chosen: dict[Any, int] = {}  # positional calls seen before -> the arm they took
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")

    # what EagerFunction offers
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Choose the arm for these arguments and call its eager function."""
        return self._arm(args, kwargs)(*args, **kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The kernel of the arm these arguments choose, for these arguments."""
        return self._arm(args, kwargs).compile(*args, **kwargs)

    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The ``T.prim_func`` of the arm these arguments choose."""
        return self._arm(args, kwargs).get_tir(*args, **kwargs)

    @property
    def kernels(self) -> dict[Any, Any]:
        """Every arm's compiled kernels, each keyed by ``(arm index, its key)``."""
        return {(i, key): kernel for i, arm in enumerate(self.arms) for key, kernel in arm.kernels.items()}

    # choosing
    def _arm(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        key = None
        if not kwargs:
            from .eager import _call_key

            try:
                key = _call_key(args, self._kernel_positions)
                index = self._chosen.get(key)
            except TypeError:  # an unhashable value: choose without remembering
                key = index = None
            if index is not None:
                return self.arms[index]
        index = self._choose(args, kwargs)
        if key is not None:
            with self._lock:
                self._chosen.setdefault(key, index)
        return self.arms[index]

    def _choose(self, args: tuple, kwargs: dict[str, Any]) -> int:
        from .eager import _closure_values

        params = self.signature.parameters
        named = {k: v for k, v in kwargs.items() if k in params}  # T.const values given by name stay out
        try:
            bound = self.signature.bind_partial(*args, **named)
        except TypeError as exc:
            raise TypeError(f"{self.name}(): {exc}") from None
        bound.apply_defaults()
        namespace = dict(self.func.__globals__)
        namespace.update(_closure_values(self.func))
        namespace.update({p: v for p, v in bound.arguments.items() if p in self._compile_params})
        for index, code in enumerate(self._tests):
            if code is None:
                return index
            try:
                chosen = eval(code, namespace)  # noqa: S307 - the user's own condition
            except NameError as exc:
                raise TypeError(
                    f"{self.name}(): the condition at {self.filename}:{self.line} that chooses the kernel could not "
                    f"be evaluated: {exc} (pass every compile-time argument it reads)") from None
            if chosen:
                return index
        values = ", ".join(f"{p}={bound.arguments[p]!r}" for p in self._compile_params if p in bound.arguments)
        raise TypeError(
            f"{self.name}(): no branch of the if at {self.filename}:{self.line} applies to these arguments ({values}), "
            f"so there is no kernel to run; add an else: branch or pass values one of its conditions accepts")


def eager_function(func: Callable[..., Any], options: dict[str, Any], kind: str = "@tilelang.jit",
                   debug_root_path: Optional[str] = None) -> Any:
    """The eager function of ``func``: a :class:`VariantEagerFunction` when its body is an arm
    chain, else an :class:`~tilelang_core.jit.eager.EagerFunction`."""
    from .eager import EagerFunction, _function_def

    fdef, _, _ = _function_def(func)
    if arm_chain(fdef) is not None:
        return VariantEagerFunction(func, options, kind, debug_root_path)
    return EagerFunction(func, options, kind, debug_root_path)
