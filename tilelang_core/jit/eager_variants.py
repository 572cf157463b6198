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
its own (jit/eager.py), made of the statements before the ``if`` and the arm's statements; an
arm that itself ends with such a chain is split the same way (nested ``if``s). Per call, the
plain Python statements before an ``if`` run and its conditions are evaluated in order with the
call's compile-time values (as Python runs the ``if``), and the first true one's arm specialises,
compiles and runs. A condition may read the function's compile-time parameters, globals,
closure and what those statements compute from them, not a kernel parameter or a ``T.const``:
those are known only from the tensors, once a branch is chosen.

A chain is an arm dispatch only when an arm declares something (``T.const``, ``T.empty``, a
parameter's annotation or ``T.match_buffer``): an ``if`` whose arms only open kernels is part of
an ordinary eager body, and TVMScript picks its branch when it parses the kernel.
"""

from __future__ import annotations

import ast
import builtins
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..errors import KernelDefinitionError
from ..fork_locks import renew_after_fork
from .binding import KeywordPositions

__all__ = ["Arm", "ArmChain", "arm_at", "arm_chain", "leaf_body", "leaves", "VariantEagerFunction", "eager_function"]


@dataclass
class Arm:
    """One branch of a chain: its condition (None for ``else``), its statements and, when they
    end with a chain of their own, that chain (whose prefix is the statements before it)."""

    test: Optional[ast.expr]
    body: list[ast.stmt]
    inner: Optional["ArmChain"] = None


@dataclass
class ArmChain:
    """The statements before the ``if``, the ``if`` itself and its arms in the order Python tries them."""

    prefix: list[ast.stmt]
    node: ast.If
    arms: list[Arm] = field(default_factory=list)


def _declares(stmt: ast.stmt, params: set[str]) -> bool:
    """Whether ``stmt`` is an eager declaration: ``T.const``/``T.empty``, a parameter's annotation
    (``A: T.Tensor[...]``) or ``A = T.match_buffer(A, ...)``."""
    from .eager import _call_attr, _matched_param

    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in params:
        return True
    if isinstance(stmt, ast.Assign) and _call_attr(stmt.value) in ("const", "empty"):
        return True
    return _matched_param(stmt) in params


def ends_the_function(stmts: list[ast.stmt]) -> bool:
    """Whether the last of ``stmts`` leaves the function: ``return``, ``raise`` or an ``assert``
    that always fails (``assert False, "unsupported"``)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.Assert) and isinstance(last.test, ast.Constant) and not last.test.value


def _arms_of(node: ast.If) -> list[tuple[Optional[ast.expr], list[ast.stmt]]]:
    """``(condition, statements)`` of each arm of the ``if``/``elif``/``else`` chain ``node``, in
    the order Python tries them; the ``else`` (if any) with the condition None."""
    arms = [(node.test, list(node.body))]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]  # elif
        arms.append((node.test, list(node.body)))
    if node.orelse:
        arms.append((None, list(node.orelse)))
    return arms


def _with_tail(node: ast.If, tail: list[ast.stmt], fall_through: bool) -> ast.If:
    """A copy of the ``if`` chain ``node`` with ``tail`` (the statements after it) at the end of
    each arm that does not leave the function: what Python runs after each arm, written into the
    arm. With ``fall_through`` (an arm leaves the function: ``if is_2d: ...; return Y`` and the
    other case after it), the tail is also the ``else`` the chain lacks; otherwise a call that no
    arm takes stays one ('no branch applies'), where Python would meet names only arms define."""
    def arm(stmts: list[ast.stmt]) -> list[ast.stmt]:
        return list(stmts) if ends_the_function(stmts) else [*stmts, *tail]

    if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        orelse = [_with_tail(node.orelse[0], tail, fall_through)]
    elif node.orelse:
        orelse = arm(node.orelse)
    else:
        orelse = list(tail) if fall_through else []
    return ast.copy_location(ast.If(test=node.test, body=arm(node.body), orelse=orelse), node)


def _tail_into_arms(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` ending with its first ``if`` that is not plain Python, the statements after that
    ``if`` moved into its arms (:func:`_with_tail`): ``if is_2d: ... return Y`` followed by the
    other case's statements, or arms that each declare ``Y`` followed by one ``return Y``."""
    from .eager import _plain_python

    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.If) and not _plain_python(stmt):
            tail = body[index + 1:]
            if not tail:
                return body
            fall_through = any(ends_the_function(arm) for _, arm in _arms_of(stmt))
            return [*body[:index], _with_tail(stmt, tail, fall_through)]
    return body


def _chain(body: list[ast.stmt], params: set[str]) -> Optional[ArmChain]:
    """The chain ``body`` ends with (see :func:`arm_chain`), or None."""
    from .eager import _plain_python

    body = _tail_into_arms(body)
    if not body or not isinstance(body[-1], ast.If):
        return None
    prefix, node = body[:-1], body[-1]
    if any(isinstance(s, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While, ast.Match, ast.Try))
           or isinstance(s, ast.If) and not _plain_python(s) for s in prefix):
        return None  # the kernel body starts before the if (or an earlier if declares something)
    chain = ArmChain(prefix, node, [Arm(test, body) for test, body in _arms_of(node)])
    for arm in chain.arms:
        arm.inner = _chain(arm.body, params)
    if not any(arm.inner is not None or any(_declares(s, params) for s in arm.body) for arm in chain.arms):
        return None
    return chain


def arm_chain(fdef: ast.FunctionDef) -> Optional[ArmChain]:
    """The arm chain of an eager function's body, or None when the body is not one.

    A body is one when it ends with an ``if`` statement, every statement before it is a
    declaration or plain Python (no ``with``/``for``/``while``; an ``if`` only of assignments, as
    ``if scale is None: scale = ...``), and an arm of the ``if`` declares something at its top
    level or is itself such a body (a nested chain).
    """
    from .eager import body_statements

    params = {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    return _chain(body_statements(fdef), params)


def leaves(chain: ArmChain, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The paths (arm index at each level) of the arms that are kernels, not chains."""
    found = []
    for index, arm in enumerate(chain.arms):
        if arm.inner is None:
            found.append(path + (index,))
        else:
            found.extend(leaves(arm.inner, path + (index,)))
    return found


def leaf_body(chain: ArmChain, path: tuple[int, ...]) -> list[ast.stmt]:
    """The statements of the eager function of the arm at ``path``: every prefix on the way, then
    the arm's own statements."""
    body = list(chain.prefix)
    for depth, index in enumerate(path):
        arm = chain.arms[index]
        if depth + 1 < len(path):
            chain = arm.inner
            body += chain.prefix
        else:
            body += arm.body
    return body


def arm_at(chain: ArmChain, path: tuple[int, ...]) -> Arm:
    """The arm at ``path``."""
    for index in path[:-1]:
        chain = chain.arms[index].inner
    return chain.arms[path[-1]]


def _names(node: Any) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assigned(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


class VariantEagerFunction:
    """An eager function whose body is an arm chain (see the module docstring): one
    :class:`~tilelang_core.jit.eager.EagerFunction` per kernel arm, chosen per call."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any], kind: str = "@tilelang.jit",
                 debug_root_path: Optional[str] = None) -> None:
        from .eager import EagerFunction, _function_def

        fdef, _, _ = _function_def(func)
        chain = arm_chain(fdef)
        if chain is None:  # the caller checked: a body that is not a chain has one EagerFunction
            raise KernelDefinitionError(f"{kind} {func.__name__}: the body is not an if/elif/else over kernels")
        self.func = func
        self.name = func.__name__
        self.chain = chain
        # an arm that cannot be a kernel fails when a call chooses it, as Python fails only on the
        # path it runs; the other arms work
        self.arms: dict[tuple[int, ...], Any] = {}
        self._broken: dict[tuple[int, ...], KernelDefinitionError] = {}
        for path in leaves(chain):
            try:
                self.arms[path] = EagerFunction(func, options, kind, debug_root_path, arm=path)
            except KernelDefinitionError as exc:
                self._broken[path] = exc
        if not self.arms:
            raise next(iter(self._broken.values()))
        first = next(iter(self.arms.values())).analysis
        self.signature = first.signature
        self.filename = first.filename
        kernel_params = set().union(*(arm.analysis.kernel_params for arm in self.arms.values()))
        consts = set().union(*(arm.analysis.const_names for arm in self.arms.values()))
        params = list(self.signature.parameters)
        self._compile_params = [p for p in params if p not in kernel_params]
        self._kernel_positions = frozenset(i for i, p in enumerate(params) if p in kernel_params)
        self._codes: dict[int, Any] = {}  # id(condition node) -> compiled code
        #: per chain (by id): the compiled statements before its if that run to choose an arm
        self._prefix_codes: dict[int, list[Any]] = {}
        reads: set[str] = set()
        computed: set[str] = set()
        for level in self._chains(chain):
            runnable = self._runnable(level.prefix, kernel_params)
            self._prefix_codes[id(level)] = [compile(ast.Module([stmt], []), self.filename, "exec", dont_inherit=True)
                                             for stmt in runnable]
            for stmt in runnable:
                reads |= _names(stmt) - _assigned(stmt)
                computed |= _assigned(stmt)
            for arm in level.arms:
                if arm.test is None:
                    continue
                read = _names(arm.test)
                refused = sorted(read & (kernel_params | consts) - computed)
                if refused:
                    raise KernelDefinitionError(
                        f"{self.filename}:{arm.test.lineno}: {kind} {self.name}: this condition chooses which kernel "
                        f"to build, so it is evaluated in Python before any kernel runs, but it reads "
                        f"{', '.join(refused)}, a kernel parameter or T.const known only from the tensors; test a "
                        f"compile-time parameter (a plain Python value) instead")
                reads |= read
        # a choice depends only on the call's arguments when the conditions read nothing else
        # (no global or closure value, which may change between calls): then it is remembered
        fixed = set(params) | computed | {"True", "False", "None"}
        self._remember = all(name in fixed or (hasattr(builtins, name) and name not in func.__globals__)
                             for name in reads)
        self._chosen: dict[Any, tuple[int, ...]] = {}  # positional calls seen before -> the arm they took
        self._keywords = KeywordPositions(self.signature)  # keyword calls -> the positional ones (_arm)
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")

    @staticmethod
    def _chains(chain: ArmChain) -> list[ArmChain]:
        found = [chain]
        for arm in chain.arms:
            if arm.inner is not None:
                found.extend(VariantEagerFunction._chains(arm.inner))
        return found

    @staticmethod
    def _runnable(prefix: list[ast.stmt], kernel_params: set[str]) -> list[ast.stmt]:
        """The statements of ``prefix`` that run in Python to choose an arm: plain Python that
        declares nothing and reads no kernel parameter (``big = n > 2``, ``if s is None: s = 1.0``)."""
        from .eager import _call_attr, _plain_python

        return [s for s in prefix if _plain_python(s) and not _declares(s, kernel_params)
                and not _names(s) & kernel_params and not isinstance(s, ast.AnnAssign)
                and not (_call_attr(getattr(s, "value", None)) or "").startswith("alloc_")]

    def _condition(self, test: ast.expr) -> Any:
        """``test`` compiled (once)."""
        code = self._codes.get(id(test))
        if code is None:
            code = self._codes[id(test)] = compile(ast.Expression(test), self.filename, "eval", dont_inherit=True)
        return code

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
        """Every arm's compiled kernels, each keyed by ``(arm path, its key)``; an arm's path is its
        index in its ``if``/``elif``/``else`` chain, at each level of nesting."""
        return {(path, key): kernel for path, arm in self.arms.items() for key, kernel in arm.kernels.items()}

    # choosing
    def _arm(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        key = None
        # a keyword call is remembered as the positional call that binds alike (None: not one)
        given = self._keywords.positional(args, kwargs) if kwargs else args
        if given is not None and self._remember:
            from .eager import _call_key

            try:
                key = _call_key(given, self._kernel_positions)
                path = self._chosen.get(key)
            except TypeError:  # an unhashable value: choose without remembering
                key = path = None
            if path is not None:
                return self.arms[path]
        path = self._choose(args, kwargs)
        if path in self._broken:
            raise self._broken[path]
        if key is not None:
            with self._lock:
                self._chosen.setdefault(key, path)
        return self.arms[path]

    def _choose(self, args: tuple, kwargs: dict[str, Any]) -> tuple[int, ...]:
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
        chain, path = self.chain, ()
        while True:
            for code in self._prefix_codes[id(chain)]:
                exec(code, namespace)  # noqa: S102 - the user's own statements
            index = self._pick(chain, namespace, bound)
            path += (index,)
            inner = chain.arms[index].inner
            if inner is None:
                return path
            chain = inner

    def _pick(self, chain: ArmChain, namespace: dict, bound: Any) -> int:
        where = f"{self.filename}:{chain.node.lineno}"
        for index, arm in enumerate(chain.arms):
            if arm.test is None:
                return index
            try:
                chosen = eval(self._condition(arm.test), namespace)  # noqa: S307 - the user's own condition
            except NameError as exc:
                raise TypeError(
                    f"{self.name}(): the condition at {where} that chooses the kernel could not be evaluated: {exc}; it "
                    f"may read compile-time parameters, globals, the closure and values the statements before the if "
                    f"compute from those") from None
            if chosen:
                return index
        values = ", ".join(f"{p}={bound.arguments[p]!r}" for p in self._compile_params if p in bound.arguments)
        raise TypeError(
            f"{self.name}(): no branch of the if at {where} applies to these arguments ({values}), so there is no "
            f"kernel to run; add an else: branch or pass values one of its conditions accepts")


def eager_function(func: Callable[..., Any], options: dict[str, Any], kind: str = "@tilelang.jit",
                   debug_root_path: Optional[str] = None) -> Any:
    """The eager function of ``func``: a :class:`VariantEagerFunction` when its body is an arm
    chain, else an :class:`~tilelang_core.jit.eager.EagerFunction`."""
    from .eager import EagerFunction, _function_def

    fdef, _, _ = _function_def(func)
    if arm_chain(fdef) is not None:
        return VariantEagerFunction(func, options, kind, debug_root_path)
    return EagerFunction(func, options, kind, debug_root_path)
