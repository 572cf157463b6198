"""The eager style of ``@tilelang.jit``: the decorated function's body *is* the kernel.

::

    @tilelang.jit
    def scale(X, factor: T.float32, block: int = 128):
        N = T.const("N")                  # a compile-time constant read from the arguments
        X: T.Tensor[(N,), T.float32]      # X is a tensor parameter of the kernel
        Y = T.empty((N,), T.float32)      # an output the kernel allocates and returns
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] * factor
        return Y

    y = scale(torch.randn(1000), 2.0)     # compiles for N=1000 (once), runs, returns Y

How a call is turned into a kernel (docs/jit.md, "The eager style"):

1. The function's source is read once and split into its *prologue* (the leading statements
   that declare constants, ``T.dynamic`` symbols, parameter annotations ``X: T.Tensor[...]``,
   ``T.empty`` outputs and plain Python values) and the *kernel body* (from the first other
   statement on; a final ``return`` of ``T.empty`` outputs is left out of the body).
2. Parameters are *kernel parameters* when annotated as tensors (in the body or the
   signature) or as scalars (``alpha: T.float32``); every other parameter is a compile-time
   value, like the arguments of a function returning a prim_func.
3. Per call, the prologue runs in Python with each ``T.const`` name bound to a symbol; the
   tensors' shapes (and strides, for ``T.StridedTensor``) then give each constant's value.
4. A generated function, whose body is the original kernel body unchanged (at the same line
   numbers, so diagnostics point at the user's lines), builds the ``T.prim_func`` for those
   values; ``tilelang.compile`` compiles it with the ``T.empty`` outputs as ``out_idx``.
   Kernels are cached per compile-time values and constant values.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import threading
import types
from typing import Any, Callable, Optional, Sequence

from ..ast_lock import AST_LOCK
from .build_locks import BuildLocks
from ..errors import KernelDefinitionError, TileLangError
from ..fork_locks import renew_after_fork
from .binding import PLAIN_TYPES, KeywordPositions, _tensor_type, special_float, symbol_stand_in, value_types

__all__ = ["is_eager_style", "EagerFunction", "declares_outputs", "prim_func_with_outputs", "OUT_IDX_ATTR",
           "ArgumentShapeError"]


class ArgumentShapeError(TileLangError, ValueError, TypeError):
    """A tensor argument's shape (or strides) disagrees with its annotation or with another
    argument over a ``T.const``: a ``ValueError``, as TileLang raises for a static shape mismatch
    and this project for a ``T.dynamic`` one, and a ``TypeError``, as it was first raised here."""

#: Attribute of a ``T.prim_func`` that returns its ``T.empty`` outputs: their parameter indices,
#: negative (TileLang's name and form); ``tilelang.compile`` takes them as ``out_idx``.
OUT_IDX_ATTR = "tilelang_out_idx"

_ENV = "__tl_env"
_TENSOR = "__tl_tensor"
_PRIM_FUNC = "__tl_prim_func"
_ANN = "__tl_annotation_"  # + a parameter's name: its annotation, evaluated once in the generated factory


# -- reading the function ----------------------------------------------------------------------


def _function_def(func: Callable[..., Any]) -> tuple[ast.FunctionDef, list[str], int]:
    """The ``def`` node of ``func``, the file's lines and the line of the ``def`` (1-based)."""
    from ..language.source import ensure_source

    ensure_source(func, "@tilelang.jit function")
    lines, start = inspect.findsource(func)
    block = inspect.getblock(lines[start:])
    text = textwrap.dedent("".join(block))
    with AST_LOCK:  # tilelang_core/ast_lock.py
        tree = ast.parse(text)
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise KernelDefinitionError(f"@tilelang.jit: could not find the definition of {func.__name__!r}")
    ast.increment_lineno(tree, start)
    indent = len(block[0]) - len(block[0].lstrip())
    for sub in ast.walk(tree):
        if hasattr(sub, "col_offset"):
            sub.col_offset += indent
            if getattr(sub, "end_col_offset", None) is not None:
                sub.end_col_offset += indent
    return node, lines, start + 1


def body_statements(fdef: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of ``fdef``'s body, without its docstring."""
    body = list(fdef.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return body


def _call_attr(node: Any) -> Optional[str]:
    """``"const"`` for ``T.const(...)`` (any module alias), the function name for ``f(...)``."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return None


def _has_inner_prim_func(fdef: ast.FunctionDef) -> bool:
    for sub in ast.walk(fdef):
        if sub is fdef or not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in sub.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            if name == "prim_func":
                return True
    return False


def is_eager_style(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is written in the eager style (its body is the kernel).

    Eager: the body has no inner ``@T.prim_func`` and, at its top level, annotates a parameter
    (``A: T.Tensor[...]``), calls ``T.const``/``T.empty``, or opens ``with T.Kernel(...)``, or it
    ends with an ``if`` whose branches do that (jit/eager_variants.py); or a signature annotation
    is a tensor or dtype. Functions whose source cannot be read are not,
    unless their code names ``Kernel`` or ``const`` and no ``prim_func`` (an eager body, which
    is compiled from its source text): that is the :func:`~tilelang_core.language.source.ensure_source`
    error, which says where to define the function.

    :raises KernelDefinitionError: an eager-looking function whose source Python does not keep
        (defined by ``exec`` of a string, or read from a pipe).
    """
    from ..language.source import ensure_source

    try:
        ensure_source(func, "@tilelang.jit function")
    except KernelDefinitionError:
        if _names_eager_calls(func):  # the same error, naming the style that needs the text
            ensure_source(func, "eager-style @tilelang.jit function")
        return False
    try:
        fdef, _, _ = _function_def(func)
    except (OSError, TypeError, SyntaxError, KernelDefinitionError):
        return False
    if _has_inner_prim_func(fdef):
        return False
    params = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
    for stmt in fdef.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in params:
            return True
        if isinstance(stmt, ast.Assign) and _call_attr(stmt.value) in ("const", "empty"):
            return True
        if isinstance(stmt, ast.With) and any(_call_attr(i.context_expr) == "Kernel" for i in stmt.items):
            return True
    from .eager_variants import arm_chain

    if arm_chain(fdef) is not None:  # if is_2d: declarations and a kernel; else: others
        return True
    annotations = _runtime_annotations(func)
    return any(_is_kernel_annotation(v) for k, v in annotations.items() if k != "return")


def _names_eager_calls(func: Callable[..., Any]) -> bool:
    """Whether ``func``'s own code (not a nested function's) names ``Kernel`` or ``const`` and no
    ``prim_func``: an eager-style body (``with T.Kernel(...)``, ``T.const``), told without its source."""
    names = set(getattr(getattr(func, "__code__", None), "co_names", ()))
    return bool(names & {"Kernel", "const"}) and "prim_func" not in names


def _runtime_annotations(func: Callable[..., Any]) -> dict[str, Any]:
    """``func``'s parameter annotations as values (string annotations evaluated; failures skipped)."""
    namespace: Optional[dict[str, Any]] = None
    result: dict[str, Any] = {}
    for name, value in (getattr(func, "__annotations__", {}) or {}).items():
        # only a real str is annotation text (PEP 563): T.float32 is a str subclass, a dtype value
        if type(value) is str:
            if namespace is None:
                namespace = dict(func.__globals__)
                namespace.update(_closure_values(func))
            try:
                value = eval(value, namespace)  # noqa: S307 - the user's own annotation text
            except Exception:  # noqa: BLE001 - not evaluable here: not a kernel annotation
                continue
        result[name] = value
    return result


def _is_kernel_annotation(value: Any) -> bool:
    """Whether a signature annotation makes a kernel parameter: a tensor, a dtype, ``T.ptr``."""
    import tvm

    from ..language.dtypes import dtype
    from ..language.pointers import is_pointer_annotation

    return isinstance(value, (tvm.tirx.Buffer, dtype)) or is_pointer_annotation(value)


# -- the analysis, once per function ---------------------------------------------------------


class _Analysis:
    """What the prologue declares and where the kernel body is."""

    def __init__(self, func: Callable[..., Any], kind: str = "@tilelang.jit",
                 arm: Optional[tuple[int, ...]] = None) -> None:
        from .eager_variants import ends_the_function

        self.kind = kind  # how the function is used, for messages: "@tilelang.jit" or "T.prim_func"
        fdef, lines, _ = _function_def(func)
        self.def_node = fdef  # for errors at the ``def`` line
        self.def_line = fdef.lineno
        self.func = func
        self.name = func.__name__
        self.lines = lines
        self.filename = func.__code__.co_filename
        self.signature = inspect.signature(func)
        params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
        self.params = params
        sig_ann = {a.arg: a.annotation for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
        body = body_statements(fdef)
        if arm is not None:  # one branch of an if choosing the kernel (jit/eager_variants.py)
            from .eager_variants import arm_at, arm_chain, leaf_body

            chain = arm_chain(fdef)
            body = leaf_body(chain, arm)
            branch = arm_at(chain, arm)
            self.branch_line = branch.body[0].lineno if branch.body else fdef.lineno
        # the generated factory's file name (one per arm: TVMScript reads a kernel's text back by it)
        self.factory_filename = f"{func.__code__.co_filename}<tilelang.jit {func.__name__}>" if arm is None else \
            f"{func.__code__.co_filename}<tilelang.jit {func.__name__}, branch {'.'.join(map(str, arm))}>"
        annotated_in_body = {
            s.target.id
            for s in body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is None and s.target.id in params
        }
        annotated_in_body |= {name for s in body if (name := _matched_param(s)) in params}
        runtime_values = _runtime_annotations(func)
        self.kernel_params: list[str] = []
        self.annotations: dict[str, ast.expr] = {}
        for p in params:
            if p in annotated_in_body:
                self.kernel_params.append(p)
            elif sig_ann.get(p) is not None and _is_kernel_annotation(runtime_values.get(p)):
                self.kernel_params.append(p)
                self.annotations[p] = sig_ann[p]
        self.compile_params = [p for p in params if p not in self.kernel_params]

        # the prologue
        self.const_names: list[str] = []
        self.prologue: list[ast.stmt] = []  # statements run in Python, in order (not annotations/outputs)
        self.outputs: list[tuple[str, ast.Call]] = []
        # where each parameter annotated in the body is declared: the number of prologue statements
        # before its annotation (the statements after it may read A.dtype, A.shape, ...)
        self.annotated_at: dict[str, int] = {}
        kernel_names = set(self.kernel_params)
        index = 0
        while index < len(body):
            stmt = body[index]
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in kernel_names:
                if stmt.value is not None:
                    raise self._error(stmt, f"parameter {stmt.target.id!r} is annotated with a value; write '{stmt.target.id}: T.Tensor[...]'")
                self.annotations[stmt.target.id] = stmt.annotation
                self.annotated_at[stmt.target.id] = len(self.prologue)
            elif _matched_param(stmt) in kernel_names:  # A = T.match_buffer(A, shape, dtype): A's annotation
                self.annotations[stmt.targets[0].id] = self._matched_annotation(stmt)
                self.annotated_at[stmt.targets[0].id] = len(self.prologue)
            elif isinstance(stmt, ast.Assign) and _call_attr(stmt.value) == "const":
                self.const_names.extend(self._target_names(stmt))
                self.prologue.append(stmt)
            elif isinstance(stmt, ast.Assign) and _call_attr(stmt.value) == "empty":
                names = self._target_names(stmt)
                if len(names) != 1 or not isinstance(stmt.targets[0], ast.Name):
                    raise self._error(stmt, "assign each T.empty(...) output to one name: 'Y = T.empty(shape, dtype)'")
                self.outputs.append((names[0], stmt.value))
            elif isinstance(stmt, ast.Assign) and (_call_attr(stmt.value) or "").startswith("alloc_"):
                break  # T.alloc_global & co. declare buffers of the kernel function: its body starts here
            elif isinstance(stmt, ast.Assert) and ends_the_function([stmt]):
                break  # assert False, "unsupported": the arm's body, failing when the arm is chosen
            elif _plain_python(stmt) and _reads_only_declarations(stmt, kernel_names, set(self.annotations)):
                self.prologue.append(stmt)
            else:
                break
            index += 1
        # the parameters the prologue reads (A.dtype): declared at their annotation, the others after it
        self.prologue_reads = set().union(set(), *(_names_in(s) for s in self.prologue)) & kernel_names
        kernel = body[index:]
        self.returns: Optional[list[str]] = None
        if kernel and isinstance(kernel[-1], ast.Return):
            ret = kernel.pop()
            self.returns = self._return_names(ret)
            # an arm's return may be the function's one after the whole if (eager_variants._with_tail)
            self.end_line = ret.lineno - 1 if arm is None or not kernel else kernel[-1].end_lineno
        else:
            self.end_line = (kernel[-1].end_lineno if kernel and arm is not None
                             else fdef.end_lineno or (kernel[-1].end_lineno if kernel else fdef.lineno))
        if not kernel and arm is not None:
            raise KernelDefinitionError(
                f"{self.filename}:{self.branch_line}: {self.kind} {self.name}: this branch of the if that chooses the "
                f"kernel has no kernel body (expected 'with T.Kernel(...)' after its declarations)")
        if not kernel:
            raise self._error(fdef, "the function has no kernel body (expected 'with T.Kernel(...)' after the declarations)")
        for stmt in kernel:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in kernel_names and stmt.value is None:
                raise self._error(stmt, f"annotate parameter {stmt.target.id!r} before the kernel body starts")
        output_names = [n for n, _ in self.outputs]
        if self.outputs and self.returns is None:
            raise self._error(fdef, f"T.empty output(s) {', '.join(output_names)} are never returned; end with 'return {', '.join(output_names)}'")
        if self.returns is not None:
            unknown = [n for n in self.returns if n not in output_names]
            if unknown:
                self._check_output_calls(body, unknown)
                raise self._error(
                    fdef,
                    f"the function returns its T.empty outputs by name; {', '.join(unknown)} is not one "
                    f"(outputs: {', '.join(output_names) or 'none'})",
                )
        self.body_start = kernel[0].lineno
        self.body_indent = kernel[0].col_offset
        missing = [p for p in self.kernel_params if p not in self.annotations]
        if missing:
            raise self._error(fdef, f"kernel parameter(s) {', '.join(missing)} have no annotation")
        self._factory_code: Optional[types.CodeType] = None

    def _error(self, node: Any, message: str) -> KernelDefinitionError:
        return KernelDefinitionError(f"{self.filename}:{getattr(node, 'lineno', '?')}: {self.kind} {self.name}: {message}")

    def _check_output_calls(self, body: list[ast.stmt], names: list[str]) -> None:
        """Refuse ``C = T.empty_like(A)`` (a ``T.`` name that does not exist) for a returned ``C``
        at its line, naming the missing name: otherwise the function is reported as returning
        something that is not a ``T.empty`` output, at its ``def``."""
        from .. import language

        for stmt in body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id in names and isinstance(stmt.value, ast.Call)):
                continue
            func = stmt.value.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                continue
            module = self.func.__globals__.get(func.value.id)
            if getattr(module, "__name__", None) in ("tilelang.language", language.__name__) and not hasattr(module, func.attr):
                raise self._error(
                    stmt, f"{stmt.targets[0].id} = {func.value.id}.{func.attr}(...): module 'tilelang.language' has no "
                          f"attribute {func.attr!r}; declare each returned output with "
                          f"{func.value.id}.empty(shape, dtype) before the kernel body")

    def _matched_annotation(self, stmt: ast.Assign) -> ast.expr:
        """``T.Tensor(shape, dtype, **options)`` for ``A = T.match_buffer(A, shape, dtype, **options)``."""
        call = stmt.value
        if len(call.args) > 3:
            raise self._error(stmt, "T.match_buffer of a parameter takes (param, shape, dtype) and keyword "
                                    "arguments (strides=, elem_offset=, ...)")
        tensor = ast.Attribute(value=call.func.value, attr="Tensor", ctx=ast.Load())
        annotation = ast.Call(func=tensor, args=call.args[1:], keywords=call.keywords)
        ast.copy_location(tensor, call.func)
        return ast.copy_location(annotation, call)

    def _target_names(self, stmt: ast.Assign) -> list[str]:
        names = []
        for target in stmt.targets:
            elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            for e in elts:
                if not isinstance(e, ast.Name):
                    raise self._error(stmt, "assign T.const(...) to names: 'M, N = T.const(\"M N\")'")
                names.append(e.id)
        return names

    def _return_names(self, ret: ast.Return) -> list[str]:
        value = ret.value
        if value is None:
            return []
        elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self._error(ret, "the function returns its T.empty outputs by name ('return Y' or 'return Y, Z')")
        return [e.id for e in elts]

    # -- the generated factory ------------------------------------------------------------------

    def factory(self) -> types.CodeType:
        """Code of ``def factory(__tl_env)``, which returns the prim_func for the values in env."""
        if self._factory_code is not None:
            return self._factory_code
        outer = max(1, self.body_indent // 2) if self.body_indent >= 2 else None
        if outer is None:
            raise self._error(None, "indent the kernel body by at least two spaces")
        pad = " " * outer
        header = [f"def __tl_eager_factory({_ENV}):"]
        env_names = list(self.func.__code__.co_freevars) + self.compile_params + self.const_names
        if env_names:
            header.append(pad + "; ".join(f"{n} = {_ENV}[{n!r}]" for n in dict.fromkeys(env_names)))
        # kernel parameters the prologue or an output reads (T.empty([m + 1], ...), T.empty(..., A.dtype)):
        # a scalar's variable (from env), a tensor's declaration (its annotation, evaluated here with
        # the constants and T.dynamic symbols of this run), for the Python run here; the kernel's
        # signature declares the parameters
        # and the kernel parameters another parameter's annotation reads (A: T.Tensor[[M, K], ...]
        # of scalar parameters M, K), which the signature evaluates here
        annotation_reads = {p: _names_in(self.annotations[p]) & set(self.kernel_params) - {p} for p in self.kernel_params}
        referenced = set().union(set(), *annotation_reads.values())
        read = set().union(referenced, *(_names_in(stmt) for stmt in self.prologue), *(_names_in(call) for _, call in self.outputs))
        declared = [p for p in self.kernel_params if p in read and p not in env_names]

        def bind(params: list[str]) -> None:
            """One header line evaluating the annotations of ``params`` once (the kernel's signature
            takes the same declaration, so a ``T.dynamic`` made in the annotation is one symbol);
            parameters other annotations read come first."""
            params = sorted(params, key=lambda p: p not in referenced)
            if params:
                header.append(pad + "; ".join(
                    f"{_ANN}{n} = ({ast.unparse(self.annotations[n])}); {n} = {_ENV}[{n!r}] if {n!r} in {_ENV} "
                    f"else {_ANN}{n}" for n in params))

        early = [p for p in declared if p in self.prologue_reads]  # at their annotation; the others after the prologue
        early += [p for p in declared if p not in early and any(p in annotation_reads[e] for e in early)]
        bind([p for p in early if p not in self.annotated_at])  # annotated in the signature
        for index, stmt in enumerate(self.prologue):
            bind([p for p in early if self.annotated_at.get(p) == index])
            if isinstance(stmt, ast.Assign) and _call_attr(stmt.value) == "const":
                continue
            for line in ast.unparse(stmt).splitlines():
                header.append(pad + line)
        bind([p for p in declared if p not in early])
        # a declared parameter's name here is its declaration, or a scalar's variable from env: the
        # kernel takes that variable itself, so the tensor shapes and outputs written with it are
        # shaped by the parameter (A: T.Tensor[[M, K], ...] checks A's shape against M and K)
        signature = [f"{p}: {p if p in declared else ast.unparse(self.annotations[p])}" for p in self.kernel_params]
        for name, call in self.outputs:
            args = [ast.unparse(a) for a in call.args] + [ast.unparse(k) for k in call.keywords]
            signature.append(f"{name}: {_TENSOR}({', '.join(args)})")
        header.append(pad + f"@{_PRIM_FUNC}")
        header.append(pad + f"def {self.name}({', '.join(signature)}):")
        body = self.lines[self.body_start - 1 : self.end_line]
        free = self.body_start - 1 - len(header)
        text = "\n" * free + "\n".join(header) + "\n" if free >= 0 else "\n".join(header) + "\n"
        text += "".join(line if line.endswith("\n") else line + "\n" for line in body)
        text += pad + f"return {self.name}\n"
        filename = self.factory_filename
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        module = compile(text, filename, "exec", dont_inherit=True)
        code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
        self._factory_code = code
        return code


_PLAIN = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Assert, ast.Pass, ast.Import, ast.ImportFrom)


def _matched_param(stmt: ast.stmt) -> Optional[str]:
    """``A`` for ``A = T.match_buffer(A, ...)`` (TileLang's shape of a ``T.ptr`` parameter in the
    body: it declares ``A`` as ``A: T.Tensor[...]`` does), else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    call = stmt.value
    if _call_attr(call) != "match_buffer" or not isinstance(call.func, ast.Attribute) or not call.args:
        return None
    first = call.args[0]
    return stmt.targets[0].id if isinstance(first, ast.Name) and first.id == stmt.targets[0].id else None


def _plain_python(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is a prologue statement run in Python: an assignment, ``assert``, import,
    ``pass``, or an ``if`` made only of those (``if sm_scale is None: sm_scale = ...``, as TileLang
    runs such code before the kernel); none declaring constants, outputs or buffers."""
    if isinstance(stmt, ast.If):
        return all(_plain_python(s) for s in (*stmt.body, *stmt.orelse)) and not any(
            _call_attr(getattr(s, "value", None)) in ("const", "empty") or (_call_attr(getattr(s, "value", None)) or "").startswith("alloc_")
            for s in ast.walk(stmt) if isinstance(s, ast.Assign)
        )
    return isinstance(stmt, _PLAIN)


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


#: What a statement before the kernel body may read of a kernel parameter already annotated
#: (``B = T.empty((N,), A.dtype)``, ``M, K = A.shape``): the attributes of its declaration.
_DECLARATION_ATTRS = frozenset({"dtype", "shape", "strides", "name", "scope", "elem_offset", "offset_factor",
                                "data_alignment"})


def _reads_only_declarations(stmt: ast.stmt, kernel_names: set[str], annotated: set[str]) -> bool:
    """Whether ``stmt`` uses the kernel parameters ``kernel_names`` only to read an attribute of
    :data:`_DECLARATION_ATTRS` of one already ``annotated`` (``dtype = A.dtype``), so it can run
    before the kernel body; any other use (``A[0]``, ``T.view(A, ...)``, ``A = ...``) starts the body."""
    allowed = {
        id(node.value)
        for node in ast.walk(stmt)
        if isinstance(node, ast.Attribute) and node.attr in _DECLARATION_ATTRS and isinstance(node.value, ast.Name)
        and node.value.id in annotated and isinstance(node.value.ctx, ast.Load)
    }
    return all(id(n) in allowed for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id in kernel_names)


# -- per call --------------------------------------------------------------------------------


def _call_key(args: tuple, runtime: frozenset) -> tuple:
    """What a positional call's kernel depends on: each tensor's shape, strides, dtype and device
    (they give the ``T.const`` values and the target), each other value by type and value, except
    at the ``runtime`` positions (the kernel's own scalar parameters, passed at every call): by
    type only, so that their values do not make one entry each.

    :raises TypeError: a value cannot be hashed.
    """
    tensor = _tensor_type()
    return tuple((x.shape, x.stride(), x.dtype, x.device) if isinstance(x, tensor)
                 else (type(x),) if i in runtime
                 else (type(x), x) if type(x) in PLAIN_TYPES  # with their type: 1 and True differ
                 else _value_key(x) for i, x in enumerate(args))


def _value_key(x: Any) -> tuple:
    """The key of a compile-time value other than an int, str, bool or None, told apart as the
    full path tells them apart: ``-0.0`` from ``0.0`` and every NaN alike (also inside tuples and
    for NumPy floats), and ``(2,)`` from ``(2.0,)`` by the types of what is inside.

    :raises TypeError: the value cannot be hashed (the caller then takes the full path).
    """
    if type(x) is float:
        return (float, special_float(x) or x)
    stand_in = symbol_stand_in(x)
    return (type(x), stand_in, value_types(stand_in))


def _tensor_decl(*args: Any, dtype: Any = "float32", **kwargs: Any) -> Any:
    """``T.empty``'s arguments as a tensor declaration: ``(shape, dtype)``, ``(d0, d1, dtype=)``."""
    import tvm_ffi

    from ..language.core import Tensor

    from ..language.dtypes import is_dtype_like

    if len(args) >= 2 and is_dtype_like(args[-1]):  # T.empty((N,), torch.float16) too, not a dimension
        dtype, args = args[-1], args[:-1]
    if len(args) == 1 and isinstance(args[0], (list, tuple, tvm_ffi.Array)):
        shape = tuple(args[0])  # a list, a tuple, or a declaration's shape (T.empty(A.shape, A.dtype))
    else:
        shape = tuple(args)
    return Tensor(shape, dtype, **kwargs)


class EagerFunction:
    """An eager-style ``@tilelang.jit`` function (see the module docstring)."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any], kind: str = "@tilelang.jit",
                 debug_root_path: Optional[str] = None, arm: Optional[tuple[int, ...]] = None) -> None:
        """``arm``: the path of the branch of the body's kernel-choosing ``if`` to make the function
        of (its index in each nested ``if``/``elif``/``else`` chain, jit/eager_variants.py); None for
        the whole body."""
        if options.get("out_idx") is not None:
            raise KernelDefinitionError(
                f"@tilelang.jit {func.__name__}: out_idx is for functions that return a prim_func; in the eager style "
                "declare outputs with T.empty(...) and return them"
            )
        self.analysis = _Analysis(func, kind, arm)
        self.func = func
        self.options = options
        self.debug_root_path = debug_root_path  # jit/debug_dump.py
        self._kernels: dict[Any, Any] = {}
        self._annotation_codes: dict[str, Any] = {}
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")
        self._building = BuildLocks()  # one build per new specialisation, however many threads ask
        #: positional calls seen before -> (kernel, positions of the kernel's arguments, the values of
        #: those the call leaves to their defaults, or None): see __call__
        self._calls: dict[Any, tuple[Any, tuple[int, ...], Any]] = {}
        #: keyword calls -> the positional calls that bind alike, for the fast path of __call__
        self._keywords = KeywordPositions(self.analysis.signature)
        names = list(self.analysis.signature.parameters)
        self._positions = tuple(names.index(p) for p in self.analysis.kernel_params)
        self._runtime = frozenset(self._positions)

    # the three entry points
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Specialise for these arguments (once), run the kernel, return the declared outputs.

        A positional call like one seen before (the same tensor shapes, strides, dtypes and
        devices, and equal other values) goes straight to its kernel: specialising runs the
        prologue and builds TVM declarations, about 110 us a call for two tensors, against a few
        hundred nanoseconds for this lookup. The kernel's own call still checks every tensor. So
        does one leaving kernel parameters to their defaults (``scale(x)`` of ``s: T.float32 =
        1.5``), which took the full path at every call (146 us against 12), and a keyword call
        that Python binds without error (``scale(x, factor=2.0)``, ``scale(X=x, factor=2.0)``: as
        ``scale(x, 2.0)``, :class:`~tilelang_core.jit.binding.KeywordPositions`), which took it
        too (130-165 us against 10); one naming a ``T.const`` still does.
        """
        a = self.analysis
        # a keyword call as the positional call that binds alike (None: Python would refuse it, or
        # it names a T.const: the full path, with its errors)
        given = self._keywords.positional(args, kwargs) if kwargs else args
        if given is not None:
            try:
                found = self._calls.get(_call_key(given, self._runtime))
            except TypeError:  # an unhashable value: the full path says what is wrong with it
                found = None
            if found is not None:
                kernel, positions, defaults = found
                if defaults is None:
                    return self._outputs(kernel(*[given[i] for i in positions]))
                return self._outputs(kernel(*[given[i] if i < len(given) else defaults[i] for i in positions]))
        kernel, bound = self._kernel_for(args, kwargs, calling=True)
        inputs = [bound[p] for p in a.kernel_params]
        result = kernel(*inputs)
        if given is not None:
            left = {i: bound[p] for i, p in zip(self._positions, a.kernel_params) if i >= len(given)}
            try:
                self._calls.setdefault(_call_key(given, self._runtime), (kernel, self._positions, left or None))
            except TypeError:
                pass
        return self._outputs(result)

    def _outputs(self, result: Any) -> Any:
        """What a call returns: the declared outputs it returns, in order (None, one, or a tuple)."""
        a = self.analysis
        if not a.returns:
            return None
        produced = result if isinstance(result, (list, tuple)) else [result]
        by_name = dict(zip([n for n, _ in a.outputs], produced))
        values = [by_name[n] for n in a.returns]
        return values[0] if len(values) == 1 else tuple(values)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The kernel for these arguments (tensors or ``T.Tensor`` specs; constants by name)."""
        return self._kernel_for(args, kwargs)[0]

    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The ``T.prim_func`` these arguments specialise the function into."""
        key, env, _ = self._specialise(args, kwargs)
        return self._prim_func(env)

    @property
    def kernels(self) -> dict[Any, Any]:
        return dict(self._kernels)

    # the work
    def _kernel_for(self, args: tuple, kwargs: dict[str, Any], calling: bool = False) -> tuple[Any, dict[str, Any]]:
        """The kernel for these arguments and the bound arguments; ``calling``: every kernel
        parameter must be given (``compile()`` may leave them out), checked before compiling."""
        key, env, bound = self._specialise(args, kwargs, calling)
        target = self.options.get("target", "auto")
        if target == "auto":  # the tensors' device picks the target: a CPU kernel is no CUDA kernel
            target = _target_of(bound, self.analysis.kernel_params)
            key = (key, target if target != "auto" else _auto_key())
        kernel = self._kernels.get(key)
        if kernel is None:
            with self._building.held(key):  # threads asking for it at once: built once (build_locks.py)
                kernel = self._kernels.get(key)
                if kernel is None:
                    kernel = self._build(env, target)
                    with self._lock:
                        kernel = self._kernels.setdefault(key, kernel)
        return kernel, bound

    def _build(self, env: Any, target: Any) -> Any:
        """Lower and compile the specialisation of ``env`` for ``target``."""
        from .compile import compile as tl_compile

        prim = self._prim_func(env)
        opts = dict(self.options)
        a = self.analysis
        n = len(a.kernel_params)
        opts["out_idx"] = list(range(n, n + len(a.outputs))) or None
        opts["target"] = target
        kernel = tl_compile(prim, **opts)
        if self.debug_root_path is not None:
            from .debug_dump import dump_kernel

            dump_kernel(self.debug_root_path, a.name, kernel, prim)
        return kernel

    def _specialise(self, args: tuple, kwargs: dict[str, Any],
                    calling: bool = False) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """``(key, env, bound)`` of a call's arguments; ``calling``: every kernel parameter must be
        given, said in Python's words before anything else (``add()`` said a ``T.const`` had no
        value; ``compile()`` may leave them out)."""
        a = self.analysis
        const_given = {k: kwargs.pop(k) for k in list(kwargs) if k in a.const_names and k not in a.params}
        try:
            bound_args = a.signature.bind_partial(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{a.name}(): {exc}") from None
        bound_args.apply_defaults()
        bound = dict(bound_args.arguments)
        missing = [p for p in a.kernel_params if p not in bound] if calling else []
        if missing:  # Python's own wording (bind_partial lets the kernel's parameters be left out for compile())
            raise TypeError(f"{a.name}() missing {len(missing)} required argument"
                            f"{'s' if len(missing) > 1 else ''}: {', '.join(repr(p) for p in missing)}")
        if calling:
            _refuse_specs(a.name, a.kernel_params, bound)
        missing_compile = [p for p in a.compile_params if p not in bound]
        if missing_compile:
            raise TypeError(f"{a.name}(): missing compile-time argument(s) {', '.join(missing_compile)}")
        env = _closure_values(self.func)
        torch = sys.modules.get("torch")
        for p in a.compile_params:
            if torch is not None and isinstance(bound[p], torch.Tensor):
                raise TypeError(
                    f"{a.name}() argument {p!r}: got a torch.Tensor, but {p!r} has no tensor annotation, so it is a "
                    f"compile-time value; declare it a tensor of the kernel: in the signature ({p}: T.Tensor[[N], "
                    f"T.float32]) or before the kernel body ({p}: T.Tensor((N,), T.float32), or {p} = "
                    f"T.match_buffer({p}, (N,), T.float32)), with N = T.const(\"N\") for a size the tensor gives")
            env[p] = bound[p]
        symbols, decls = self._run_prologue(env)
        consts = dict(const_given)
        origins = {c: f"the keyword argument {c}={v!r}" for c, v in const_given.items()}
        for position, p in enumerate(a.kernel_params):  # numbered as the kernel call numbers them
            decl = decls[p]
            value = bound.get(p)
            if value is None and p in bound and a.signature.parameters[p].default is not None and hasattr(decl, "shape"):
                # given None (not left to a None default): it said only that a T.const had no value
                raise TypeError(f"{a.name}() argument '{p}' (#{position}): expected a torch.Tensor, got NoneType")
            if value is None or not hasattr(decl, "shape"):
                continue
            from .decorator import is_numpy_array, numpy_array_message

            if is_numpy_array(value):  # it has a shape, but a kernel takes torch tensors
                raise TypeError(numpy_array_message(a.name, f"argument {p!r}"))
            if not hasattr(value, "shape"):  # a list or a number for a tensor: the calling convention's error
                raise TypeError(f"{a.name}() argument '{p}' (#{position}): expected a torch.Tensor, got "
                                f"{type(value).__name__}")
            _bind_consts(a.name, p, decl, value, symbols, consts, origins, position)
        missing = [c for c in a.const_names if c not in consts]
        if missing:
            raise TypeError(
                f"{a.name}(): cannot tell the value of T.const {', '.join(missing)}: pass tensors whose shapes give it, "
                f"or give it by name ({a.name}.compile({missing[0]}=...))"
            )
        for c in a.const_names:
            value = consts[c]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TypeError(f"{a.name}(): T.const {c} must be an int >= 0 (a size), got {type(value).__name__} "
                                f"{value!r}")
        env.update({c: int(consts[c]) for c in a.const_names})
        from .decorator import _freeze, unhashable_message

        values = []
        for p in a.compile_params:
            try:
                values.append(_freeze(bound.get(p)))
            except TypeError:
                raise TypeError(unhashable_message(a.name, f"compile-time argument {p!r}", bound.get(p))) from None
        key = (tuple(values), tuple(env[c] for c in a.const_names))
        return key, env, bound

    def _run_prologue(self, env: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run the prologue with each constant a symbol; the declarations of the kernel params."""
        from tvm import tirx

        from ..language.dtypes import dtype

        a = self.analysis
        namespace = dict(self.func.__globals__)
        namespace.update(env)
        namespace[_TENSOR] = _tensor_decl
        # A scalar kernel parameter (m: T.int32) is a variable: outputs may be shaped by it
        # (B = T.empty([m + 1], ...)), and the kernel then allocates them for each call's m.
        decls: dict[str, Any] = {}
        for p in a.kernel_params:
            try:
                declared = eval(self._annotation_code(p), namespace)  # noqa: S307 - the user's own annotation
            except Exception:  # noqa: BLE001 - a tensor annotation over constants not bound yet
                continue
            if isinstance(declared, dtype):
                decls[p] = declared
                env[p] = namespace[p] = tirx.Var(p, str(declared))
        symbols: dict[str, Any] = {}

        def declare(index: Optional[int]) -> None:
            """Bind the tensors the prologue reads and that are annotated before its statement
            ``index`` (None: in the signature) to their declarations (the statements after them read
            A.dtype); the others are declared after the prologue, as before."""
            for p in a.prologue_reads:
                if p not in decls and a.annotated_at.get(p) == index:
                    decls[p] = namespace[p] = eval(self._annotation_code(p), namespace)  # noqa: S307 - the user's own annotation

        declare(None)
        for index, stmt in enumerate(a.prologue):
            declare(index)
            if isinstance(stmt, ast.Assign) and _call_attr(stmt.value) == "const":
                for name in a._target_names(stmt):
                    symbols[name] = namespace[name] = tirx.Var(name, "int32")
                continue
            exec(compile(ast.Module([stmt], []), a.filename, "exec", dont_inherit=True), namespace)  # noqa: S102 - the user's own prologue
        for p in a.kernel_params:
            if p not in decls:  # tensors: their annotations may use the constants and symbols just bound
                decls[p] = eval(self._annotation_code(p), namespace)  # noqa: S307 - the user's own annotation
        return symbols, decls

    def _annotation_code(self, param: str) -> Any:
        """The compiled annotation of kernel parameter ``param`` (compiled once per function)."""
        code = self._annotation_codes.get(param)
        if code is None:
            a = self.analysis
            code = self._annotation_codes[param] = compile(ast.Expression(a.annotations[param]), a.filename, "eval",
                                                           dont_inherit=True)
        return code

    def _prim_func(self, env: dict[str, Any]) -> Any:
        from ..language.core import SOURCE_LOCATION_ATTR, prim_func

        a = self.analysis
        # the factory reads __tl_tensor / __tl_prim_func as globals: a copy of the function's
        # globals with both, so the user's module is left untouched
        scope = dict(self.func.__globals__)
        scope[_TENSOR] = _tensor_decl
        scope[_PRIM_FUNC] = prim_func
        factory = types.FunctionType(a.factory(), scope, "__tl_eager_factory")
        full_env = dict(env)
        result = factory(full_env)
        location = f"{a.filename}:{a.def_line}"
        result = result.with_attr(SOURCE_LOCATION_ATTR, location)
        _restore_spans(result, a)
        return result


def _restore_spans(func: Any, a: Any) -> None:
    """Point the spans of the generated kernel back at the user's file (language/spans.py).

    The kernel body keeps its line numbers in the generated source, only the file name differs;
    the generated signature's parameters get the line of their annotation (``A: T.Tensor[...]``)
    or of their ``T.empty`` declaration.
    """
    from ..language.spans import get_stmt_span, make_span, set_buffer_span, set_stmt_span, spans_enabled, _walk

    if not spans_enabled():
        return
    def in_user_file(span: Any) -> Any:
        """``span`` pointing at the user's file; a macro's statements carry a ``SequentialSpan``
        (the spans of its statements, without a file of its own: it stopped the kernel's
        definition with "'SequentialSpan' object has no attribute 'source_name'")."""
        inner = getattr(span, "spans", None)
        if inner is not None:
            import tvm

            inner = list(inner)
            moved = [in_user_file(s) for s in inner]
            return span if all(m is s for m, s in zip(moved, inner)) else tvm.ir.SequentialSpan(moved)
        source = getattr(span, "source_name", None)
        if source is None or str(source.name) == a.filename:
            return span
        return make_span(a.filename, span.line, span.column, span.end_line, span.end_column)

    stmts, _ = _walk(func)
    for stmt in stmts:
        span = get_stmt_span(stmt)
        moved = None if span is None else in_user_file(span)
        if moved is not span:
            set_stmt_span(stmt, moved)
    declared: dict[str, ast.AST] = dict(a.annotations)
    declared.update({name: call for name, call in a.outputs})
    for param in func.params:
        node = declared.get(getattr(param, "name", None))
        if node is not None and hasattr(node, "lineno"):
            set_buffer_span(param, make_span(a.filename, node.lineno, node.col_offset + 1))


def _closure_values(func: Callable[..., Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            values[name] = cell.cell_contents
        except ValueError:
            pass  # not assigned yet
    return values


def _bind_consts(fname: str, param: str, decl: Any, value: Any, symbols: dict[str, Any], consts: dict[str, Any],
                 origins: dict[str, str], position: int) -> None:
    """Read each constant used as a dimension (or stride) of ``param`` (the kernel's argument
    ``position``) from the argument ``value``; ``origins`` says where each value in ``consts``
    came from (for the error of a disagreement). Dtype and rank errors are worded as the calling
    convention words them for a compiled kernel."""
    from tvm import tirx

    label = f"{fname}() argument '{param}' (#{position})"
    want, got = _dtype_text(decl), _dtype_text(value)
    if want and got and want != got:  # a T.Tensor spec (f.compile) or a tensor of another dtype
        raise ValueError(f"{label}: expected dtype {want}, got {got}")
    shape = [int(d) for d in value.shape] if not hasattr(value, "buffer_type") else [_int_or_none(d) for d in value.shape]
    strides = _strides_of(value)
    for what, dims, actual in (("dimension", list(decl.shape), shape), ("stride", list(decl.strides or []), strides)):
        if not dims or actual is None:
            continue
        if len(dims) != len(actual):
            raise ArgumentShapeError(f"{label}: expected {len(dims)} {what}s, got {len(actual)}")
        for i, (dim, got) in enumerate(zip(dims, actual)):
            if got is None:
                continue
            if isinstance(dim, tirx.Var) and dim.name in symbols and symbols[dim.name].same_as(dim):
                previous = consts.setdefault(dim.name, got)
                origins.setdefault(dim.name, f"{param}'s {what} {i}")
                if previous != got:
                    raise ArgumentShapeError(
                        f"{fname}(): T.const {dim.name} is {previous} from {origins[dim.name]} but {param}'s {what} {i} "
                        f"is {got}"
                    )
            elif isinstance(dim, (int, tirx.IntImm)) and int(dim) != got:
                raise ArgumentShapeError(f"{fname}(): {param}'s {what} {i} is {got}, its annotation says {int(dim)}")


def _refuse_specs(fname: str, kernel_params: Sequence[str], bound: dict[str, Any]) -> None:
    """Refuse a ``T.Tensor`` spec given to a call for a kernel parameter (numbered as the kernel
    call numbers them): a call runs the kernel, which takes torch tensors; ``f.compile`` takes
    specs. It failed late with "expected a torch.Tensor, got Var", naming neither the spec nor
    ``f.compile``.

    :raises TypeError: a kernel parameter in ``bound`` is a ``T.Tensor`` spec.
    """
    import tvm

    for position, p in enumerate(kernel_params):
        spec = bound.get(p)
        if isinstance(spec, tvm.tirx.Buffer):
            dims = [str(d) for d in spec.shape]
            shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
            raise TypeError(
                f"{fname}() argument '{p}' (#{position}): got a T.Tensor spec, T.Tensor({shape}, {spec.dtype}), but "
                f"calling {fname}() runs the kernel, which takes a torch.Tensor; pass a torch tensor of that shape "
                f"and dtype, or use {fname}.compile(...) with the spec to compile the kernel without running it")


def _dtype_text(x: Any) -> Optional[str]:
    """The element dtype of a buffer, T.Tensor spec or torch tensor as text (``float32``), or None."""
    ty = getattr(x, "ty", None)
    if ty is not None and getattr(ty, "dtype", None) is not None:
        return str(ty.dtype)
    dtype = getattr(x, "dtype", None)
    return None if dtype is None else str(dtype).replace("torch.", "")


def _int_or_none(d: Any) -> Optional[int]:
    try:
        return int(d)
    except (TypeError, ValueError):
        return None


def _strides_of(value: Any) -> Optional[list[Optional[int]]]:
    stride = getattr(value, "stride", None)
    if callable(stride):
        return [int(s) for s in stride()]
    strides = getattr(value, "strides", None)
    if strides:
        return [_int_or_none(s) for s in strides]
    return None


def _target_of(bound: dict[str, Any], params: Sequence[str]) -> str:
    """The target ``target="auto"`` means for the arguments ``bound``: the first tensor's device
    names it (``cpu`` -> ``c``, :data:`~tilelang_core.jit.decorator.DEVICE_TARGETS`); without a
    tensor (``f.compile`` of ``T.Tensor`` specs), :func:`_auto_target`."""
    from .decorator import DEVICE_TARGETS

    for p in params:
        device = getattr(bound.get(p), "device", None)
        kind = getattr(device, "type", None)
        if kind is not None:
            return DEVICE_TARGETS.get(kind, "auto")
    return _auto_target()


def _auto_key() -> tuple:
    """What ``target="auto"`` left to ``tilelang.compile`` depends on: the enclosing ``with
    tvm.target.Target(...)`` and ``$TILELANG_DEFAULT_TARGET``. In the key of such a kernel, so that
    ``f.compile(spec)`` under ``with Target("llvm")`` is not handed the kernel an earlier compile
    built under ``with Target("c")`` (it was: both were keyed ``auto``)."""
    import os

    import tvm

    from ..lowering.target import DEFAULT_TARGET_ENV

    current = tvm.target.Target.current(allow_none=True)
    return ("auto", None if current is None else str(current), os.environ.get(DEFAULT_TARGET_ENV, "").strip())


def _auto_target() -> str:
    """What ``target="auto"`` resolves to without tensors, named as a device names it (``c``,
    ``cuda``, ``metal``), so that ``f.compile(T.Tensor(...))`` and a later call with tensors of
    that device key one kernel alike (they kept two entries, ``auto`` and ``c``, for one kernel);
    ``"auto"`` when an enclosing ``with tvm.target.Target(...)`` or a ``TILELANG_DEFAULT_TARGET``
    that is not a bare device target decides, which ``tilelang.compile`` then resolves."""
    import tvm

    from ..lowering.target import auto_target_kind, env_default_target
    from .decorator import DEVICE_TARGETS

    if tvm.target.Target.current(allow_none=True) is not None:
        return "auto"
    chosen = env_default_target()
    if chosen is None:
        chosen = auto_target_kind()
    return chosen if isinstance(chosen, str) and chosen in DEVICE_TARGETS.values() else "auto"


# -- TileLang's lazy style with outputs: a T.prim_func that returns T.empty tensors -----------------


def declares_outputs(func: Callable[..., Any]) -> bool:
    """Whether ``func`` (about to become a ``T.prim_func``) assigns ``T.empty(...)`` at its top level.

    Cheap for every other kernel: the source is read only when the function's code names ``empty``.
    """
    if "empty" not in func.__code__.co_names:
        return False
    try:
        fdef, _, _ = _function_def(func)
    except (OSError, TypeError, SyntaxError, KernelDefinitionError):
        return False
    return any(isinstance(s, ast.Assign) and _call_attr(s.value) == "empty" for s in fdef.body)


def prim_func_with_outputs(func: Callable[..., Any]) -> Any:
    """The ``T.prim_func`` of a function written in TileLang's lazy style with outputs::

        @T.prim_func
        def add_one(A):
            A: T.Tensor[(128,), T.float32]
            B = T.empty((128,), T.float32)
            with T.Kernel(1):
                ...
            return B

    Each ``T.empty`` output becomes a parameter after the function's own, in the order of the
    ``return`` (the compiled kernel returns its outputs in parameter order, so ``c, b = kernel(a)``
    after ``return C, B``), and the attribute :data:`OUT_IDX_ATTR` holds their indices, negative
    (``[-2, -1]``), so ``tilelang.compile(add_one)`` allocates and returns them.

    :raises KernelDefinitionError: a parameter without a tensor or scalar type, ``T.const``
        (which needs the arguments of an ``@tilelang.jit`` call), an output that is not returned,
        or what the eager style refuses.
    """
    kernel = EagerFunction(func, {}, kind="T.prim_func")
    a = kernel.analysis
    fdef = a.def_node
    unreturned = [name for name, _ in a.outputs if name not in (a.returns or [])]
    if unreturned:
        raise a._error(fdef, f"T.empty output(s) {', '.join(unreturned)} are not returned; a T.prim_func returns every "
                             f"output it declares ('return {', '.join(n for n, _ in a.outputs)}')")
    a.outputs.sort(key=lambda output: a.returns.index(output[0]))
    if a.compile_params:
        raise a._error(fdef, f"parameter(s) {', '.join(a.compile_params)} have no type: annotate every parameter of a "
                             "T.prim_func as a tensor (A: T.Tensor[...]) or a scalar (n: T.int32); compile-time values "
                             "need @tilelang.jit")
    if a.const_names:
        raise a._error(fdef, f"T.const ({', '.join(a.const_names)}) takes its value from the arguments of an "
                             "@tilelang.jit call; in a T.prim_func use T.dynamic or a Python int")
    _, env, _ = kernel._specialise((), {})
    prim = kernel._prim_func(env)
    total = len(a.kernel_params) + len(a.outputs)
    position = {name: len(a.kernel_params) + k for k, (name, _) in enumerate(a.outputs)}
    out_idx = [position[name] - total for name in a.returns or []]
    return prim.with_attr(OUT_IDX_ATTR, out_idx)
