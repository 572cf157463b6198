"""TileLang-style constructs of the kernel language, written on TVM's TIR IR builder.

They only record *what* the kernel author asked for; the lowering pipeline
(:mod:`tilelang_core.lowering.frontend`) decides *how* for the chosen target:

- ``T.Kernel`` emits one serial loop per grid axis carrying the annotations in
  :data:`KERNEL_AXIS_KEY` and friends. GPU targets turn them into ``blockIdx``/``threadIdx``
  bindings, CPU targets into one (OpenMP-parallel) loop over all blocks.
- ``T.Parallel`` emits a marker statement (an ``Evaluate`` of an extern call named
  :data:`PARALLEL_MARKER`) immediately followed by a plain loop nest. GPU targets spread the
  iterations over the block's threads, CPU targets keep the loop nest.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import math
import os
import sys
import threading
from numbers import Integral
from typing import Any, Optional, Sequence, Union

import tvm
from tvm import tirx
from tvm.script.parser.core import utils as _parser_utils
from tvm.tirx.script.builder import ir as _B
from tvm.tirx.script.parser.entry import Buffer as _BufferProxy
from tvm.script.parser.core.entry import parse as _parse_tvmscript
from tvm.tirx.script.parser.entry import TIRMacro as _TIRMacro

from ..ast_lock import AST_LOCK
from .expression_depth import check_function_depth
from .macro_arguments import assigned_names, bind_arguments, check_statement_free
from .source import ensure_source
from .spans import spans_enabled, strip_spans

#: Annotation on a ``T.Kernel`` grid loop: the grid axis (0 = x, 1 = y, 2 = z).
KERNEL_AXIS_KEY = "tl.kernel_axis"
#: Annotation on a ``T.Kernel`` grid loop: the number of grid axes the kernel declared.
KERNEL_NDIM_KEY = "tl.kernel_ndim"
#: Annotation on a ``T.Kernel`` grid loop: the block's thread extents ``[tx, ty, tz]``.
KERNEL_THREADS_KEY = "tl.kernel_threads"
#: Annotation on a ``T.Kernel`` grid loop: ``"file:line"`` of the ``with T.Kernel(...)``.
KERNEL_LOC_KEY = "tl.kernel_loc"
#: Name of the extern call marking the loop nest that follows as a ``T.Parallel`` nest.
PARALLEL_MARKER = "tl.parallel"
#: Name of the extern call marking the loop nest that follows as a ``T.Persistent`` domain
#: (arguments: ndim, wave size, tile index, group size); lowering/persistent.py expands it.
PERSISTENT_MARKER = "tl.persistent"
#: Annotation on a ``T.Kernel`` grid loop: present (1) when the kernel was written
#: ``T.Kernel(..., is_cpu=True)`` (TileLang's CPU spelling; GPU targets reject it).
KERNEL_IS_CPU_KEY = "tl.kernel_is_cpu"
#: PrimFunc attribute: ``"file:line"`` of the kernel definition (set by :func:`prim_func`).
SOURCE_LOCATION_ATTR = "tl.source_location"
#: Former AttrStmt key of ``T.atomic_add`` (atomics are now marker calls, lowering/atomics.py);
#: kept importable.
ATOMIC_ADD_KEY = "tl.atomic_add"
#: Storage scope of ``T.alloc_fragment`` tiles (spread over the block's threads on GPU targets).
FRAGMENT_SCOPE = "local.fragment"
#: Storage scopes of per-thread buffers (``T.alloc_local``, ``T.alloc_var``).
LOCAL_SCOPES = ("local", "local.var")


def _tvm_script_ptr() -> Any:
    """TVMScript's ``T.ptr`` (which TileLang code also uses as the element type of pointer tables)."""
    from tvm.script import tirx as tvm_script

    return getattr(tvm_script, "ptr", None)


def _is_pointer_annotation(value: Any) -> bool:
    from .pointers import is_pointer_annotation

    return is_pointer_annotation(value)


def dtype_name(dtype: Any) -> str:
    """Normalise a dtype given as a string, a ``T.float32``-style constant or a torch dtype."""
    if isinstance(dtype, str):
        return dtype
    if dtype is _tvm_script_ptr() or getattr(dtype, "__name__", None) == "ptr" and _is_pointer_annotation(dtype):
        return "int64"  # T.Tensor(shape, T.ptr): a table of device addresses, as TileLang stores them
    inner = getattr(dtype, "_dtype_str", None)
    if isinstance(inner, str):
        return inner
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch.") :]
    try:
        return str(tvm.runtime.DataType(text))
    except Exception:  # noqa: BLE001 - report below with the value the user gave
        raise TypeError(
            f"dtype must be a string such as 'float32' or a constant such as T.float32, got {dtype!r}"
        ) from None


def _refuse_unusable_names(what: str, names: list) -> None:
    """A ``ValueError`` for the first of ``names`` that cannot name a symbol (symbolic.py)."""
    from ..symbolic import unusable_symbol_name

    for n in names:
        why = unusable_symbol_name(n)
        if why:
            raise ValueError(f"{what}: {why}, which cannot name a dynamic dimension; choose another name, such as {n + '_'!r}")


def dynamic(name: str, dtype: str = "int32") -> Any:
    """A dynamic (symbolic) dimension, e.g. ``N = T.dynamic("n")``; several names separated by
    commas or spaces give a tuple of them (``b, n = T.dynamic("batch, seq_len")``, as in TileLang).

    Use it in ``T.Tensor`` shapes; its value is read at call time from the first tensor
    dimension that is exactly this symbol (or from a scalar parameter of the same variable).
    """
    parts = name.replace(",", " ").split() if isinstance(name, str) else None
    if not parts or not all(n.isidentifier() for n in parts):
        raise ValueError(f"T.dynamic(name): name must be a Python identifier (or several separated by commas), got {name!r}")
    _refuse_unusable_names("T.dynamic(name)", parts)
    if len(parts) > 1:
        return tuple(tirx.Var(n, dtype_name(dtype)) for n in parts)
    return tirx.Var(parts[0], dtype_name(dtype))


#: Alias of :func:`dynamic` (TileLang spelling).
symbolic = dynamic


def const(names: str, dtype: str = "int32") -> Any:
    """Compile-time constants of an eager ``@tilelang.jit`` function: ``M, N = T.const("M N")``.

    ``names`` is one or more identifiers separated by spaces or commas; returns one symbol, or a
    tuple of them for several names. In an eager function each constant takes the value of the
    tensor dimension (or stride) it is used as in a parameter annotation, and the kernel is
    compiled for those values (docs/jit.md). Anywhere else a constant is a dynamic dimension, like
    :func:`dynamic`.
    """
    if not isinstance(names, str):
        raise TypeError(f"T.const(names): names must be a string such as 'M N', got {names!r}")
    parts = [n for n in names.replace(",", " ").split() if n]
    if not parts or not all(n.isidentifier() for n in parts):
        raise ValueError(f"T.const(names): give identifiers separated by spaces or commas, got {names!r}")
    _refuse_unusable_names("T.const(names)", parts)
    symbols = tuple(dynamic(n, dtype) for n in parts)
    return symbols[0] if len(symbols) == 1 else symbols


def empty(*shape: Any, dtype: Any = "float32") -> Any:
    """An output of an eager ``@tilelang.jit`` function or a ``T.prim_func``: ``Y = T.empty((M, N), T.float16)``.

    Write it at the top of the function, before the kernel body, and return it (``return Y``);
    calling the eager function then allocates ``Y``, runs the kernel and returns it (docs/jit.md,
    "The eager style"); a ``T.prim_func`` gets ``Y`` as a trailing parameter and the attribute
    ``tilelang_out_idx``, so ``tilelang.compile`` allocates and returns it. ``shape`` is a tuple
    or the dimensions themselves (``T.empty(M, N, dtype=T.float16)``); a dtype may also be the
    last positional argument. Anywhere else (inside the kernel body, in a macro) it is an error:
    declare outputs as parameters there.
    """
    from tvm.script.ir_builder import IRBuilder

    if IRBuilder.is_in_scope():
        from ..errors import KernelDefinitionError

        raise KernelDefinitionError(
            "T.empty declares an output of an eager @tilelang.jit function or a T.prim_func and belongs at the top of "
            "the function, before its kernel body ('B = T.empty(shape, dtype)', then 'return B'); inside a kernel "
            "body or a macro declare the output as a parameter and use out_idx"
        )
    from .dtypes import is_dtype_like

    if len(shape) >= 2 and is_dtype_like(shape[-1]):  # T.empty((N,), torch.float16) too, not a dimension
        dtype, shape = shape[-1], shape[:-1]
    dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else tuple(shape)
    return _tensor_decl(dims, dtype)


def ceildiv(lhs: Any, rhs: Any, span: Any = None) -> Any:
    """``ceil(lhs / rhs)`` for a positive ``rhs``, of ints or TIR expressions (stays an int for ints);
    TileLang's parameter names (``span`` is accepted and unused).

    A signed integer expression is ``(lhs - 1) // rhs + 1`` (floor division), which equals
    ``(lhs + rhs - 1) // rhs`` for every ``lhs`` but the type's minimum (where ``lhs - 1`` wraps)
    and does not overflow for ``lhs`` within ``rhs`` of the type's maximum (``T.ceildiv(2**31 - 1,
    4)`` of int32 was negative), and is as short for a constant ``rhs`` (``((n - 1) >> 6) + 1``).
    TVM's simplifier folds it through index arithmetic (the causal bound ``T.ceildiv((bx + 1) * 64,
    128)`` is ``(bx >> 1) + 1``); the exact ``lhs // rhs + min(lhs % rhs, 1)``, tried for the
    minimum's sake, kept a remainder and a ``min`` in such bounds. An unsigned one is ``lhs // rhs + (lhs % rhs != 0)``
    (``lhs - 1`` wraps for 0; TVM's ``(lhs + rhs - 1) // rhs`` wrapped for ``lhs`` within ``rhs``
    of the maximum: ``T.ceildiv(x, 7)`` of the uint32 ``2**32 - 1`` was 0).

    :raises OperandTypeError: ``lhs`` or ``rhs`` is not an int or an integer expression.
    :raises LoweringError: (a ``ValueError``) ``rhs`` is always 0 in the kernel body (the block
        index ``bx`` of ``T.Kernel(1)``; language/zero_divisors.py).
    """
    from .operand_checks import check_integer

    for name, value in (("lhs", lhs), ("rhs", rhs)):
        check_integer("T.ceildiv", name, value, "; for floats write T.ceil(x / y)")
    if isinstance(lhs, Integral) and isinstance(rhs, Integral):
        return -(-int(lhs) // int(rhs))
    from .zero_divisors import always_zero

    reason = always_zero(rhs)
    if reason is not None:
        from .operand_checks import _fail

        _fail("T.ceildiv", f"rhs (the divisor) {rhs} is always 0 here: {reason}; divide by a value of at least 1",
              "value")
    expr = lhs if not isinstance(lhs, Integral) else rhs
    dtype = getattr(getattr(expr, "ty", None), "dtype", None)
    if dtype is not None and str(dtype).startswith("int"):
        return tirx.floordiv(lhs - 1, rhs) + 1
    if dtype is not None and str(dtype).startswith("uint"):
        return tirx.floordiv(lhs, rhs) + tirx.Cast(str(dtype), tirx.floormod(lhs, rhs) != 0)
    return tirx.ceildiv(lhs, rhs)


class _TensorAnnotation:
    """``T.Tensor`` / ``T.StridedTensor``: a tensor parameter annotation, called or subscripted.

    ``T.Tensor((M, N), "float16")``, ``T.Tensor[(M, N), T.float16]`` and
    ``T.StridedTensor[(M, N), (s0, s1), T.float16]`` (strides in elements) are all accepted.
    """

    def __init__(self, name: str, strided: bool, scope: Optional[str] = None) -> None:
        self._name = name
        self._strided = strided
        self._scope = scope

    def __call__(self, shape: Any, *args: Any, **kwargs: Any) -> Any:
        if self._strided:
            if args:
                kwargs.setdefault("strides", args[0])
                args = args[1:]
            if kwargs.get("strides") is None:
                raise TypeError(f"T.{self._name}(shape, strides, dtype): strides are required")
        elif len(args) >= 2:
            args, kwargs = _upstream_positionals(self._name, args, kwargs)
        if self._scope is not None:
            kwargs.setdefault("scope", self._scope)
        view = _view_of_pointer(shape, args, kwargs)
        if view is not None:
            return view
        return _tensor_decl(shape, *args, **kwargs)

    def __getitem__(self, keys: Any) -> Any:
        if not isinstance(keys, tuple):
            return self(keys)
        return self(*keys)

    def __or__(self, other: Any) -> Any:  # ``T.Tensor | None`` in annotations, as TVMScript allows
        return self

    __ror__ = __or__

    def __repr__(self) -> str:
        return f"T.{self._name}"


def _upstream_positionals(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``T.Tensor(shape, dtype, data, scope)`` as TileLang orders them: a third positional
    argument that is a pointer (``A.data``) is the buffer's data (a view of another buffer's
    memory), a fourth one its scope; a list or tuple there stays this package's ``strides``.
    """
    from tvm.ir import PointerType

    third = args[1]
    if isinstance(third, tvm.ir.Expr) and isinstance(getattr(third, "ty", None), PointerType):
        kwargs = dict(kwargs)
        kwargs.setdefault("data", third)
        rest = args[2:]
        if rest:
            kwargs.setdefault("scope", rest[0])
            rest = rest[1:]
        if rest:
            raise TypeError(f"T.{name}(shape, dtype, data, scope): too many positional arguments ({len(args) + 1} given)")
        return args[:1], kwargs
    return args, kwargs


def _view_of_pointer(shape: Any, args: tuple, kwargs: dict) -> Any:
    """``T.Tensor(shape, dtype, A.data)`` in a kernel body: a tensor over ``A``'s memory
    (``T.make_tensor``, language/pointers.py, which declares it); None for any other call."""
    from tvm.ir import PointerType
    from tvm.script.ir_builder import IRBuilder

    data = kwargs.get("data")
    if data is None or not isinstance(getattr(data, "ty", None), PointerType) or not IRBuilder.is_in_scope():
        return None
    if set(kwargs) - {"data", "strides", "scope"} or kwargs.get("scope", "global") != "global":
        return None  # other buffer fields: TVMScript's T.Buffer decides
    from .pointers import make_tensor

    dtype = args[0] if args else "float32"
    return make_tensor(data, shape if isinstance(shape, (list, tuple)) else (shape,), dtype, kwargs.get("strides"))


def _tensor_decl(
    shape: Union[Sequence[Any], Any], dtype: Any = "float32", strides: Optional[Sequence[Any]] = None, **kwargs: Any
):
    """The buffer declaration behind ``T.Tensor``: ``shape``, ``dtype``, optional ``strides``.

    ``shape`` entries are ints or symbols made with :func:`dynamic` (or expressions of them).
    ``strides`` (in elements) may be given for non-compact layouts. Other keyword arguments
    (``scope``, ``data``, ``elem_offset``, ``align``, ``offset_factor``) go to TVMScript's
    ``T.Buffer``.
    """
    from .operand_checks import plain_extents

    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    shape = plain_extents("T.Tensor", shape)
    if strides is not None:
        if not isinstance(strides, (list, tuple)):
            strides = (strides,)
        kwargs["strides"] = list(plain_extents("T.Tensor", strides, "strides"))
    return _BufferProxy(tuple(shape), dtype_name(dtype), **kwargs)


#: ``A: T.Tensor((M, N), "float16")`` or ``A: T.Tensor[(M, N), T.float16]``: a tensor parameter.
Tensor = _TensorAnnotation("Tensor", strided=False)
#: ``A: T.StridedTensor[(M, N), (sM, sN), T.float16]``: a tensor parameter with explicit strides.
StridedTensor = _TensorAnnotation("StridedTensor", strided=True)
#: ``S: T.SharedBuffer([M, K], T.float16)``: a ``T.macro`` parameter that is a shared tile.
SharedBuffer = _TensorAnnotation("SharedBuffer", strided=False, scope="shared.dyn")
#: ``F: T.FragmentBuffer([M, N], T.float32)``: a ``T.macro`` parameter that is a fragment.
FragmentBuffer = _TensorAnnotation("FragmentBuffer", strided=False, scope=FRAGMENT_SCOPE)
#: ``L: T.LocalBuffer([4], T.float32)``: a ``T.macro`` parameter that is a per-thread local tile.
LocalBuffer = _TensorAnnotation("LocalBuffer", strided=False, scope="local")


def _caller_location() -> Optional[str]:
    """``file:line`` of the TVMScript statement being parsed, found from the parser's frame."""
    # start at the caller: reading this frame's own f_locals would store a snapshot holding the
    # frame itself (a cycle that keeps every caller's locals alive until the cyclic GC runs)
    frame = sys._getframe(1)
    try:
        while frame is not None:
            parser = frame.f_locals.get("self")
            node = frame.f_locals.get("node")
            diag = getattr(parser, "diag", None)
            source = getattr(diag, "source", None)
            lineno = getattr(node, "lineno", None)
            if source is not None and isinstance(lineno, int) and hasattr(source, "start_line"):
                return f"{source.source_name}:{lineno + source.start_line - 1}"
            frame = frame.f_back
    finally:
        del frame
    return None


#: Threads per block when ``T.Kernel`` is given none (``threads=None``).
DEFAULT_THREADS = 128


def _normalize_threads(threads: Union[int, Sequence[int], None]) -> list[int]:
    """``T.Kernel``'s ``threads`` as ``[tx, ty, tz]``: an int, a list/tuple of 1 to 3 ints, or None (128).

    :raises TypeError: not ints (or more than three of them).
    :raises ValueError: an extent that is not positive.
    """
    if threads is None:
        threads = DEFAULT_THREADS
    if isinstance(threads, Integral) and not isinstance(threads, bool):
        threads = (int(threads),)
    if not isinstance(threads, (list, tuple)):
        raise TypeError(f"T.Kernel threads must be an int or a tuple of up to 3 ints, got {threads!r}")
    extents = tuple(threads)
    if not 1 <= len(extents) <= 3 or not all(isinstance(t, Integral) and not isinstance(t, bool) for t in extents):
        raise TypeError(f"T.Kernel threads must be an int or a tuple of up to 3 ints, got {threads!r}")
    if any(t < 1 for t in extents):
        raise ValueError(f"T.Kernel threads must be positive (each extent >= 1), got {threads!r}")
    return [int(t) for t in extents] + [1] * (3 - len(extents))


def _as_target_is_sequence() -> bool:
    """Whether the ``with ... as`` target being parsed is a tuple or list (``as (bx,)``)."""
    from tvm.script.parser.core import doc

    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "visit_with":
                item = frame.f_locals.get("item")
                target = getattr(item, "optional_vars", None)
                return isinstance(target, (doc.Tuple, doc.List))
            frame = frame.f_back
    finally:
        del frame
    return False


#: The most blocks along one grid axis: block indices are 32-bit on every target.
_MAX_GRID_EXTENT = 2**31 - 1
#: The most blocks a grid has in all: CPU targets run them as one loop with an int64 counter.
_MAX_GRID_BLOCKS = 2**63 - 1


def _check_static_block_count(grid: Sequence[Any]) -> None:
    """Refuse a grid of constant extents with more blocks in all than :data:`_MAX_GRID_BLOCKS`.

    Each extent of ``T.Kernel(2**21, 2**21, 2**22)`` is accepted, but the 2**64 blocks wrapped the
    int64 count of the CPU block loop to 0, and the kernel ran no block without an error (c and
    llvm). A grid with an extent of 0 or less has no block and is not refused.
    """
    extents = [int(g) for g in grid if isinstance(g, Integral) and not isinstance(g, bool)]
    if len(extents) != len(grid) or any(e < 1 for e in extents):
        return
    blocks = math.prod(extents)
    if blocks > _MAX_GRID_BLOCKS:
        raise ValueError(
            f"T.Kernel grid {tuple(extents)} has {blocks} blocks: at most {_MAX_GRID_BLOCKS} (2**63 - 1) blocks in "
            "all, the most that the 64-bit block count of CPU targets holds (CUDA: grid y and z take at most 65535 "
            "each); use fewer, larger blocks, or a loop over the work inside each block")


class Kernel:
    """``with T.Kernel(gx[, gy[, gz]], threads=128) as (bx, by, ...)``: launch a grid of blocks.

    The grid extents are positional (one to three; a missing one is 1). A grid with an extent of
    0 or less (static, or dynamic and 0 when the kernel is called) launches nothing. ``threads`` is an int or a tuple ``(tx, ty, tz)`` of static extents. The ``as`` target
    receives one block index per grid extent given (``as bx`` or ``as (bx,)`` for one extent).
    Without grid extents (``T.Kernel(threads=128)``, ``T.Kernel()``) the grid is one block. On GPU targets the block indices are
    ``blockIdx.x/y/z`` and the body runs once per thread of the block; on CPU targets the
    blocks become one loop (OpenMP-parallel unless ``tl.disable_parallel_blocks``; atomics are
    real CPU atomics) and the body runs once per block.

    ``prelude`` (TileLang's keyword) is C/CUDA source placed before the kernel, as
    ``T.import_source(prelude)`` at the start of the body. ``cluster_dims`` is accepted only as
    ``None`` or 1 (no thread block clusters).

    ``is_cpu=True`` (TileLang's spelling for CPU kernels) is accepted: on CPU targets it changes
    nothing (that is already how CPU targets run a kernel); lowering such a kernel for a GPU
    target is a ``LoweringError`` pointing at the ``with T.Kernel`` line, because a kernel
    written for one thread per block would run once per thread there.
    """

    def __init__(self, *grid: Any, threads: Union[int, Sequence[int], None] = 128, is_cpu: bool = False,
                 prelude: Optional[str] = None, cluster_dims: Any = None):
        if prelude is not None and not isinstance(prelude, str):
            raise TypeError(f"T.Kernel prelude must be a str of C/CUDA source (or None), got {type(prelude).__name__}")
        clusters = cluster_dims if isinstance(cluster_dims, (list, tuple)) else [cluster_dims]
        if cluster_dims is not None and any(c != 1 or isinstance(c, bool) for c in clusters):
            raise TypeError(
                f"T.Kernel cluster_dims={cluster_dims!r}: thread block clusters (CUDA sm_90+) are not supported by this "
                "compiler; leave cluster_dims out (or 1) and exchange data between blocks through global memory")
        self.prelude = prelude
        if len(grid) == 1 and isinstance(grid[0], (list, tuple)):
            grid = tuple(grid[0])  # T.Kernel((gx, gy)) as TileLang also accepts
        if not grid:
            grid = (1,)  # T.Kernel(threads=N) / T.Kernel(): a single block
        if not 1 <= len(grid) <= 3:
            raise ValueError(f"T.Kernel takes 1 to 3 grid extents (x, y, z), got {len(grid)}")
        for i, g in enumerate(grid):
            if isinstance(g, bool) or not (isinstance(g, Integral) or isinstance(g, tvm.ir.Expr)):
                raise TypeError(f"T.Kernel grid extent #{i} must be an int or an expression, got {type(g).__name__}")
            if isinstance(g, tvm.ir.Expr):
                from .operand_checks import check_grid_extent

                check_grid_extent(i, g)
            elif g > _MAX_GRID_EXTENT:
                raise ValueError(
                    f"T.Kernel grid extent #{i} is {int(g)}: at most {_MAX_GRID_EXTENT} (2**31 - 1) blocks, the most "
                    "that a 32-bit block index counts on every target (CUDA: also the limit of grid x; y and z take "
                    "65535); use fewer, larger blocks, or a loop over the work inside each block")
        _check_static_block_count(grid)
        threads = _normalize_threads(threads)
        if not isinstance(is_cpu, (bool, Integral)) or is_cpu not in (0, 1):
            raise TypeError(f"T.Kernel is_cpu must be a bool, got {is_cpu!r}")
        self.is_cpu = bool(is_cpu)
        # a static extent of 0 or less is an empty grid, launched as nothing (as a dynamic one
        # that is 0 when the kernel is called, and as range(0)); lowering/loop_steps.py keeps it
        self.grid = tuple(0 if isinstance(g, Integral) and g < 1 else g for g in grid)
        self.threads = tuple(threads)
        self.block_vars: tuple = ()  # the block indices, once the body is entered
        self._frames: list = []

    def __enter__(self):
        loc = _caller_location() or ""
        annotations_base = {
            KERNEL_NDIM_KEY: len(self.grid),
            KERNEL_THREADS_KEY: list(self.threads),
            KERNEL_LOC_KEY: loc,
        }
        if self.is_cpu:
            annotations_base[KERNEL_IS_CPU_KEY] = 1
        block_vars = []
        for axis, extent in enumerate(self.grid):
            annotations = dict(annotations_base)
            annotations[KERNEL_AXIS_KEY] = axis
            frame = _B.serial(0, extent, annotations=annotations)
            block_vars.append(frame.__enter__())
            self._frames.append(frame)
        self.block_vars = tuple(block_vars)
        _ACTIVE_KERNELS.push(self)  # for T.get_thread_extent() & co. in the body
        if self.prelude is not None:
            from .tileops.extern_source import import_source

            import_source(self.prelude)
        if len(block_vars) == 1 and not _as_target_is_sequence():
            return block_vars[0]
        return tuple(block_vars)

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE_KERNELS.pop(self)
        while self._frames:
            self._frames.pop().__exit__(*exc)


class _ActiveKernels(threading.local):
    """The ``T.Kernel`` bodies being parsed in this thread, innermost last, each with its IR builder.

    ``T.get_thread_extent()`` & co. read the innermost one. An entry whose builder is no longer
    the one in scope (a parse that stopped with an error before leaving the kernel) is dropped.
    """

    def __init__(self) -> None:
        self.stack: list = []

    def push(self, kernel: "Kernel") -> None:
        from tvm.script.ir_builder import IRBuilder

        self.stack.append((kernel, IRBuilder.current() if IRBuilder.is_in_scope() else None))

    def pop(self, kernel: "Kernel") -> None:
        if self.stack and self.stack[-1][0] is kernel:
            self.stack.pop()

    def current(self) -> Optional["Kernel"]:
        from tvm.script.ir_builder import IRBuilder

        builder = IRBuilder.current() if IRBuilder.is_in_scope() else None
        while self.stack:
            kernel, owner = self.stack[-1]
            if owner is not None and builder is not None and owner.same_as(builder):
                return kernel
            self.stack.pop()
        return None


_ACTIVE_KERNELS = _ActiveKernels()


def current_kernel() -> Optional[Kernel]:
    """The ``T.Kernel`` whose body is being parsed (innermost), else None."""
    return _ACTIVE_KERNELS.current()


def Parallel(*extents: Any, coalesced_width: Any = None, loop_layout: Any = None, prefer_async: Any = None,
             annotations: Any = None):
    """``for i, j in T.Parallel(M, N)``: a loop nest whose iterations are independent.

    CPU targets keep the loop nest (the innermost loop is marked for SIMD vectorization);
    GPU targets spread the ``M * N`` iterations over the block's threads (strided, with a
    bounds guard when the count is not a multiple of the thread count).
    TileLang's hints ``coalesced_width`` (an int >= 1), ``loop_layout`` (a ``T.Fragment``),
    ``prefer_async`` (a bool: cp.async copies) and ``annotations`` (a dict) are accepted and do
    not change the loop. An extent of 0 or less runs no iteration (as ``range(0)``); a tuple
    extent (TVM's ``T.grid`` reads ``(a, b)`` as start and extent) is refused.

    :raises TypeError: no extent, a tuple extent, or a hint of the wrong kind.
    """
    if not extents:
        raise ValueError("T.Parallel needs at least one extent")
    if coalesced_width is not None and (isinstance(coalesced_width, bool) or not isinstance(coalesced_width, int)
                                        or coalesced_width < 1):
        raise TypeError(f"T.Parallel(..., coalesced_width=): an int >= 1 or None, got {coalesced_width!r}")
    if prefer_async is not None and not isinstance(prefer_async, bool):
        raise TypeError(f"T.Parallel(..., prefer_async=): True, False or None, got {prefer_async!r}")
    if annotations is not None and not isinstance(annotations, dict):
        raise TypeError(f"T.Parallel(..., annotations=): a dict or None, got {type(annotations).__name__}")
    from .operand_checks import check_loop_bounds

    for i, extent in enumerate(extents):
        if isinstance(extent, (tuple, list)):
            # TVM's T.grid reads (a, b) as start a and extent b, a Python reader as range(a, b); TileLang
            # takes extents only: refuse it rather than pick one meaning
            from .tileops._common import OperandTypeError, location

            raise OperandTypeError(
                f"{location()}: T.Parallel: extent {i + 1} is the {type(extent).__name__} {extent!r}; T.Parallel takes "
                "one extent per loop variable (an int or an integer expression): to start at s, write "
                "T.Parallel(count) and index with i + s")
        check_loop_bounds("T.Parallel", **{f"extent {i + 1}": extent})
    extents = wide_enough_extents(extents)
    if any(_runs_no_iteration(extent) for extent in extents):
        # as range(0): no iteration. TVM drops such a loop before lowering, which left the marker
        # without its loop nest ("T.Parallel must be used as the iterator ..." at the kernel line)
        return _B.grid(*extents)
    _B.evaluate(tirx.call_extern("int32", PARALLEL_MARKER, len(extents)))
    return _B.grid(*extents)


def wide_enough_extents(extents: Sequence[Any]) -> list:
    """Loop extents for TVM's ``T.grid`` with each Python int made an int32 constant where it fits,
    else an int64 one, so its loop variable is as wide as ``T.serial``'s or ``range``'s.

    ``T.grid`` makes every int extent an int32 constant: ``T.Parallel(2**31 + 64)`` stopped while
    parsing with "Literal value 2147483712 exceeds range of int32" (and a hint about a literal
    beside an int32 value the kernel does not have), where ``T.serial(2**31 + 64)`` worked.
    Expressions are kept as they are (their dtype already gives the loop variable's).
    """
    # tirx.const of a Python int is int32 where the value fits, else int64
    return [tirx.const(int(e)) if isinstance(e, Integral) and not isinstance(e, bool) else e for e in extents]


def _runs_no_iteration(extent: Any) -> bool:
    """Whether a ``T.Parallel`` extent is a constant of 0 or less."""
    if isinstance(extent, Integral) and not isinstance(extent, bool):
        return int(extent) <= 0
    return isinstance(extent, tirx.IntImm) and int(extent.value) <= 0


def Persistent(domain: Sequence[Any], wave_size: Any, index: Any, group_size: Any = 8, num_stages: Any = None, *,
               annotations: Any = None):
    """``for bx, by in T.Persistent([MB, NB], num_workers, block_id)``: a persistent-kernel loop.

    Visits every coordinate of ``domain`` (one extent per loop variable) exactly once, spread
    over ``wave_size`` workers: the worker numbered ``index`` (``0 <= index < wave_size``, usually
    the block index of a ``T.Kernel(wave_size)``) takes tiles ``index``, ``index + wave_size``,
    ``index + 2 * wave_size``, ... of the domain. Tiles are numbered in groups of ``group_size``
    consecutive values of the last dimension (clamped to ``1..domain[-1]``; ``None`` is 1), each
    group running over all the other dimensions before the next one starts, so the workers of a
    wave share operands (the L2 swizzle of persistent GEMMs). The body runs inside a loop over
    the waves, guarded by ``domain[-1]``, so domains that are not a multiple of the group or the
    wave size are fine. Every target; the extents may be dynamic. TileLang's ``num_stages`` (an
    int >= 0) and ``annotations`` (a dict) are accepted and do not change the loop.
    """
    if num_stages is not None and (isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 0):
        raise ValueError(f"T.Persistent: num_stages must be an int >= 0 or None, got {num_stages!r}")
    if annotations is not None and not isinstance(annotations, dict):
        raise TypeError(f"T.Persistent: annotations must be a dict or None, got {type(annotations).__name__}")
    if isinstance(domain, (int, tvm.ir.Expr)):
        domain = [domain]
    if not isinstance(domain, (list, tuple)) or not domain:
        raise ValueError(
            "T.Persistent(domain, wave_size, index): domain must be a non-empty list of extents, "
            f"one per loop variable, got {domain!r}")
    for name, value in (("wave_size", wave_size), ("group_size", group_size)):
        value = int(value.value) if isinstance(value, tirx.IntImm) else value
        if isinstance(value, int) and value < 1:
            raise ValueError(f"T.Persistent: {name} must be at least 1, got {value}")
    if group_size is None:
        group_size = 1
    if isinstance(wave_size, tvm.ir.Expr) and not isinstance(wave_size, tirx.IntImm):
        from .tile_schedule import assert_stride

        # a run-time wave_size below 1 fails the call (the wave loop runs no wave: lowering/persistent.py)
        assert_stride("T.Persistent", "wave_size", wave_size,
                      "pass the number of workers (the blocks of the T.Kernel that share the domain)")
    _B.evaluate(tirx.call_extern("int32", PERSISTENT_MARKER, len(domain), wave_size, index, group_size))
    return _B.grid(*wide_enough_extents(domain))


def alloc_fragment(shape: Union[Sequence[Any], Any], dtype: Any = "float32", scope: str = FRAGMENT_SCOPE):
    """A tile held in registers: ``C_local = T.alloc_fragment((128, 128), "float32")``.

    CPU targets: a stack array per block (like ``T.alloc_local``). GPU targets: the tile is spread
    over the block's threads (element with row-major index ``f`` lives in thread ``f % threads``,
    slot ``f // threads``); a fragment that some statement reads or writes from another thread
    than its owner is placed in shared memory instead (docs/tile-operators.md). Storage scope
    :data:`FRAGMENT_SCOPE` (``local.fragment``) unless ``scope`` names another (TileLang's third
    argument: ``T.alloc_fragment((1,), T.int32, "local")`` is a ``T.alloc_local`` tile).
    """
    return _alloc_tile("T.alloc_fragment", shape, dtype, scope, example=FRAGMENT_SCOPE)


def _alloc_tile(op: str, shape: Any, dtype: Any, scope: Any, scopes: Optional[tuple] = None,
                example: Optional[str] = None, **options: Any) -> Any:
    """The buffer of one ``T.alloc_*`` call: ``shape`` an extent or a sequence of them, ``scope``
    one of ``scopes`` (any string when None; ``example`` names one in the message)."""
    if scopes is not None and (not isinstance(scope, str) or scope not in scopes):
        expected = f"one of {', '.join(repr(s) for s in scopes)}"
    elif not isinstance(scope, str):
        expected = f"a string such as {example!r}"
    else:
        expected = None
    if expected is not None:
        raise TypeError(f"{op}(shape, dtype, scope): scope must be {expected}, got {scope!r} "
                        "(the third positional argument is the scope, as in TileLang)")
    from .operand_checks import check_dtype, check_extents, plain_extents

    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    check_extents(op, shape)
    return _B.alloc_buffer(plain_extents(op, shape), check_dtype(op, dtype), scope=scope, **options)


def alloc_buffer(shape: Union[Sequence[Any], Any], dtype: Any = "float32", scope: str = "global",
                 annotations: Optional[dict] = None, **options: Any):
    """A buffer of ``scope`` in the kernel: ``T.alloc_buffer((64,), "float32", "shared")``.

    TileLang's positional order (``shape, dtype, scope, annotations``); TVMScript's other options
    (``data=``, ``strides=``, ``elem_offset=``, ``align=``, ``offset_factor=``, ...) are keywords.
    Prefer ``T.alloc_shared`` / ``T.alloc_local`` / ``T.alloc_fragment``.
    """
    if not isinstance(shape, (list, tuple)) and not isinstance(shape, tvm.ir.Expr) and not isinstance(shape, Integral):
        raise TypeError(f"T.alloc_buffer(shape, ...): shape must be a tuple of extents, got {type(shape).__name__}")
    return _alloc_tile("T.alloc_buffer", shape, dtype, scope, example="shared", annotations=annotations, **options)


def alloc_shared(shape: Union[Sequence[Any], Any], dtype: Any = "float32", scope: str = "shared"):
    """A tile in memory shared by the block's threads: ``A_s = T.alloc_shared((64, 32), "float16")``.

    CPU targets: a stack array per block. GPU targets: ``__shared__`` memory. The third argument
    is the scope, as in TileLang: ``"shared"`` (default) or ``"shared.dyn"`` (TileLang's default;
    the same storage here).
    """
    return _alloc_tile("T.alloc_shared", shape, dtype, scope, ("shared", "shared.dyn"))


def alloc_local(shape: Union[Sequence[Any], Any], dtype: Any = "float32", scope: str = "local"):
    """A tile private to each thread: ``acc = T.alloc_local((8,), "float32")``.

    Every GPU thread (every CPU block) has its own copy. The third argument is the scope, as in
    TileLang: ``"local"`` (default), ``"local.var"`` or ``"local.fragment"``
    (:func:`alloc_fragment`).
    """
    return _alloc_tile("T.alloc_local", shape, dtype, scope, LOCAL_SCOPES + (FRAGMENT_SCOPE,))


def _def_location(fn: Any) -> str:
    """``file:line`` of the ``def`` statement of ``fn`` (after its decorators)."""
    code = fn.__code__
    filename = os.path.abspath(code.co_filename)
    line = code.co_firstlineno
    for offset in range(0, 50):
        text = linecache.getline(filename, line + offset).lstrip()
        if text.startswith(("def ", "async def ")):
            return f"{filename}:{line + offset}"
        if not text:
            break
    return f"{filename}:{line}"


def _wrapped_tilelang_error(exc: BaseException) -> Optional[BaseException]:
    """The first :class:`TileLangError`, or exception of a kernel's own ``raise`` statement
    (:mod:`.raise_statements`), in ``exc``'s ``__cause__``/``__context__`` chain (or ``exc``)."""
    from ..errors import TileLangError
    from .raise_statements import is_kernel_raise

    seen: set = set()
    todo = [exc]
    while todo:
        err = todo.pop(0)
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, TileLangError) or is_kernel_raise(err):
            return err
        todo.extend([err.__cause__, err.__context__])
    return None


def _with_limit_hint(exc: BaseException) -> Optional[BaseException]:
    """TVMScript's ``DiagnosticError`` for a constant an integer type cannot hold (``A[i] + -1``
    with ``A`` unsigned: "cannot make uint from negative value -1"), with a line under its first
    saying what to write instead (:func:`~tilelang_core.lowering.limit_hints.limit_hint`); None
    for any other error."""
    from tvm import error as tvm_error

    from ..lowering.limit_hints import limit_hint

    if type(exc) is not tvm_error.DiagnosticError:
        return None
    text = str(exc)
    hint = limit_hint(text).strip()
    if not hint:
        return None
    first, newline, rest = text.partition("\n")
    return tvm_error.DiagnosticError(f"{first}\nhint: {hint[1:-1]}{newline}{rest}")


def _caller_frames() -> list[inspect.FrameInfo]:
    """The stack from the caller of this function outwards, as ``inspect.stack()`` gives it.

    ``inspect.stack()`` looks up the module of every frame's file (a scan of ``sys.modules``
    each, about 0.1 s per kernel once torch is imported); TVMScript's parser only needs the
    frames and the current source line of each, which ``linecache`` gives directly.
    """
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno, frame.f_globals)
        frames.append(
            inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, [line] if line else None, 0)
        )
        frame = frame.f_back
    return frames


def _resolve_annotation_names(fn: Any, names: dict, outer_stack: list) -> None:
    """Bind the names the parameter annotations use as Python resolves them: a local of an
    enclosing function first, then a module global.

    TVMScript evaluates the annotations again from the source, with the function's globals and
    the names its closure captured; a name used only in annotations is not captured (Python
    evaluated it when the ``def`` ran), so an unrelated module global of that name won:
    ``def scale(N, M, out_dtype)`` building ``B: T.Tensor((M,), out_dtype)`` compiled B with the
    global ``out_dtype`` and ``M``, and the kernel returned a tensor of the wrong dtype and shape,
    without an error. TVMScript's own lookup of such names covers only string annotations
    (PEP 563) and lets a global shadow the local.
    """
    wanted = _parser_utils._collect_annotation_names(fn) - set(_parser_utils.get_func_nonlocals(fn))
    if not wanted:
        return
    enclosing = _parser_utils._get_enclosing_scope_names(fn.__qualname__)
    for name in wanted:
        for frame_info in outer_stack[1:]:
            frame = frame_info.frame
            if frame.f_code.co_name in enclosing and name in frame.f_locals:
                names[name] = frame.f_locals[name]
                break


def prim_func(func: Any = None, *, private: bool = False, check_well_formed: bool = True):
    """Parse a Python function into a TIR ``PrimFunc`` (TVMScript), remembering where it was written.

    Same as TVMScript's ``T.prim_func``, plus:

    - the attribute :data:`SOURCE_LOCATION_ATTR` (``"file:line"`` of the ``def``) that lowering
      errors and the artifact use;
    - a :class:`~tilelang_core.errors.TileLangError` raised inside the kernel body (by
      ``T.Kernel``, ``T.Parallel``, a tile operator, ...) propagates as itself (its message starts
      with the ``file:line`` of the statement) instead of inside TVMScript's ``DiagnosticError``.
      Other exceptions keep TVMScript's diagnostic.
    """
    outer_stack = _caller_frames()

    def decorate(fn: Any):
        if not inspect.isfunction(fn):
            raise TypeError(f"T.prim_func expects a function, got {fn!r}")
        if _parser_utils.is_defined_in_class(outer_stack, fn):
            return fn
        ensure_source(fn, "kernel")
        from ..jit.eager import declares_outputs, prim_func_with_outputs

        if declares_outputs(fn):  # TileLang's lazy style with T.empty outputs (jit/eager.py)
            result = prim_func_with_outputs(fn)
            setattr(result, "__name__", fn.__name__)
            return result
        try:
            # what TVMScript's own T.prim_func does, with the cheap frame list above
            # (``private`` is read from the decorator's source by the parser)
            with AST_LOCK:  # one parse at a time (tilelang_core/ast_lock.py)
                names = _parser_utils.inspect_function_capture(fn)
                _resolve_annotation_names(fn, names, outer_stack)
                parsed = _parse_tvmscript(fn, names, check_well_formed=check_well_formed)
        except Exception as exc:  # noqa: BLE001 - re-raised below, unwrapped when it is ours
            inner = _wrapped_tilelang_error(exc)
            if inner is None:
                hinted = _with_limit_hint(exc)
                if hinted is None:
                    raise
                raise hinted.with_traceback(exc.__traceback__) from None
            raise inner.with_traceback(inner.__traceback__) from inner.__cause__  # a kernel's `raise X from Y` keeps Y
        check_function_depth(parsed, _def_location(fn))  # before anything prints or lowers it (a crash)
        result = parsed.with_attr(SOURCE_LOCATION_ATTR, _def_location(fn))
        if not spans_enabled():
            strip_spans(result)  # TILELANG_ENABLE_IR_SPAN=0 (language/spans.py)
        setattr(result, "__name__", fn.__name__)
        return result

    if func is not None:
        try:
            return decorate(func)
        finally:
            # the list holds this very frame: without this the frames of every caller (and their
            # locals, such as the caller's tensors) would live until the cyclic GC runs
            outer_stack.clear()
    setattr(decorate, "dispatch_token", "tirx")
    return decorate


setattr(prim_func, "dispatch_token", "tirx")


class _ValueMacro(_TIRMacro):
    """TVMScript's macro whose ``return expr`` is the value of the macro call, and whose names are
    bound when it is expanded.

    TVMScript emits ``return`` inside a macro as a TIR return statement and the call evaluates to
    ``None`` (storing that ``None`` then crashes TVM). Here a ``return`` among the macro's
    top-level statements ends the macro: the statements before it run and the call evaluates to
    its ``expr`` (``y[i] = plus_one(x[i])``), or to ``None`` for a bare ``return``. A ``return``
    inside an ``if``/``for``/``while``/``with`` of the macro (TVMScript made it a TIR return of
    the kernel, or an empty ``DiagnosticError``) is a :class:`~tilelang_core.errors.KernelDefinitionError`
    naming its line.

    The names the body uses are read, at each expansion, from the macro function's closure cells
    and module globals as they are then (Python's late binding), not from a snapshot taken by the
    decorator: a global rebound after the ``def``, a macro defined further down the module and a
    macro that calls itself all resolve as in Python.
    """

    def __init__(self, source: Any, fn: Any, hygienic: bool) -> None:
        self._names, self._nested_returns, self._assigned = _macro_body_names(source, fn)
        self._parameters = tuple(inspect.signature(fn).parameters)
        code = fn.__code__
        self._cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        super().__init__(source, {}, fn, hygienic)

    @property
    def closure_vars(self) -> dict:
        """The names the body uses, bound as Python would bind them now: a closure cell of the
        macro's function, else its module global (builtins are left to the parser). A name
        bound nowhere is left out (the parser then reports "Undefined variable")."""
        bound = {}
        module = self.func.__globals__
        cells = self._cells
        for name in self._names:
            cell = cells.get(name)
            if cell is not None:
                try:
                    bound[name] = cell.cell_contents
                except ValueError:  # an empty cell: assigned later in the enclosing function
                    pass
            elif name in module:
                bound[name] = module[name]
        return bound

    @closure_vars.setter
    def closure_vars(self, _value: Any) -> None:
        """Ignored: TVMScript's constructor stores the definition-time capture here."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Expand the macro at the call; the call's ``file:line`` is kept for errors about it
        (inside the expansion, the line being parsed is the macro's own)."""
        from .tileops._common import location

        self._call_site = location()
        return super().__call__(*args, **kwargs)

    def _find_parser_def(self) -> Any:
        """The parser expanding this call, found in the callers' globals as TVMScript does, but
        with ``sys._getframe`` (TVMScript's ``inspect.getouterframes`` reads the source of every
        frame: 0.1 s per expansion)."""
        name = self.parser_object_name
        frame = sys._getframe(1)
        try:
            while frame is not None:
                parser = frame.f_globals.get(name)
                if parser is not None:
                    return parser
                frame = frame.f_back
        finally:
            del frame
        from ..errors import KernelDefinitionError

        raise KernelDefinitionError(
            f"macro '{self.func.__name__}' was called outside kernel code: a @T.macro is expanded into the kernel "
            "that calls it, so call it in the body of a T.prim_func (or of an eager @tilelang.jit function); "
            "for a value computed in Python, write a plain def"
        )

    def parse_macro(self, parser: Any) -> Any:
        """Expand the body into ``parser``; the value of its top-level ``return``, else None."""
        from tvm.tirx.script.builder import block_name_suffix_context

        body = list(self.get_macro_def().body)
        suffix = f"_{self.call_count}" if self.call_count > 0 else ""
        self.call_count += 1
        hooked = "visit_Return" in vars(parser)
        previous = parser.visit_Return
        parser.visit_Return = functools.partial(self._visit_nested_return, previous)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            with block_name_suffix_context(suffix):
                check_statement_free(parser, self.func.__name__, self._call_site, lambda: self._first_statement(body))
                if self.hygienic:  # arguments bound as Python binds them (macro_arguments)
                    bind_arguments(parser, self.get_macro_def(), self._parameters, self._assigned)
                # the first return reached ends the expansion: what follows it never runs, as in Python
                return self._expand(parser, body)[1]
        except Exception as exc:  # noqa: BLE001 - only the recursion limit is translated
            if _past_recursion_limit(exc):
                raise self._too_deep() from None
            raise
        finally:
            self._depth -= 1
            if hooked:
                parser.visit_Return = previous
            else:
                del parser.visit_Return

    def _expand(self, parser: Any, body: list) -> tuple[bool, Any]:
        """Visit ``body`` statement by statement; ``(True, value)`` once a ``return`` is reached
        through ``if`` statements decided when the kernel is parsed (``if not round_sf: return sf``
        on a Python value, as in TileLang, or ``if n > 2:`` of a static shape ``n``), else
        ``(False, None)``.

        Such an ``if`` (one holding a nested ``return`` of this macro) is decided here, by Python's
        truthiness, and the chosen branch's statements are expanded in the macro's own scope, as
        TVMScript expands a branch chosen at parse time. An ``if`` on a run-time value goes to the
        parser with its condition already evaluated, and a ``return`` inside it is refused
        (:meth:`_visit_nested_return`)."""
        from tvm.script.parser.core import doc

        from .python_conditions import constant_truth
        from .tirx_visitors import given_values

        for stmt in body:
            if isinstance(stmt, doc.Return):
                return True, (parser.eval_expr(stmt.value) if stmt.value is not None else None)
            if self._python_rebinding(parser, stmt, doc):
                continue
            if isinstance(stmt, doc.If) and self._holds_nested_return(stmt):
                test = parser.eval_expr(stmt.test)
                truth = constant_truth(test)  # a Python value, or a TIR constant (n > 2 of a static shape)
                if truth is not None:
                    returned, value = self._expand(parser, stmt.body if truth else stmt.orelse)
                    if returned:
                        return True, value
                    continue
                with given_values(parser, (stmt.test, test)):  # not evaluated twice
                    parser.visit_body([stmt])
                continue
            parser.visit_body([stmt])
        return False, None

    def _too_deep(self) -> Exception:
        """The error of a recursion past Python's limit (each macro level costs some 40 Python
        frames of the parser: ``sys.getrecursionlimit()`` 1000 allows about 24 levels)."""
        from ..errors import KernelDefinitionError

        limit = sys.getrecursionlimit()
        return KernelDefinitionError(
            f"macro '{self.func.__name__}' ({self.source.source_name}) reached Python's recursion limit ({limit}) "
            f"{self._depth} levels deep: expanding one macro level takes about 40 Python frames of the "
            f"parser. Raise the limit before the kernel is defined (sys.setrecursionlimit({max(limit * 4, 4000)})), or "
            "write the recursion as a loop (a Python for loop over the levels unrolls as well)"
        )

    def _first_statement(self, body: list) -> tuple[Any, str]:
        """``(statement, "file:line")`` of the first statement of ``body`` that is not its
        top-level ``return`` or a docstring; ``(None, "")`` for a macro that is one expression."""
        from tvm.script.parser.core import doc

        for stmt in body:
            if isinstance(stmt, doc.Return):
                break
            if isinstance(stmt, doc.Expr) and isinstance(stmt.value, doc.Constant) and isinstance(stmt.value.value, str):
                continue
            return stmt, f"{self.source.source_name}:{stmt.lineno + self.source.start_line - 1}"
        return None, ""

    @staticmethod
    def _python_rebinding(parser: Any, stmt: Any, doc: Any) -> bool:
        """``n = n * 2`` (or ``n *= 2``) among the macro's top-level statements, of a name holding
        a Python number and a value that is one: rebound when the kernel is parsed, as Python
        rebinds it (True). TVMScript refused it ("Variable n already defined in current scope")
        when ``n`` was a parameter given a number. Any other statement: False (untouched)."""
        from numbers import Number

        from tvm.script.parser.core.evaluator import _eval_op

        def number(value: Any) -> bool:
            return isinstance(value, Number) and not isinstance(value, bool)

        if isinstance(stmt, doc.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], doc.Name):
            name, value_node = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, doc.AugAssign) and isinstance(stmt.target, doc.Name):
            name, value_node = stmt.target.id, None
        else:
            return False
        current = parser.var_table.get().get(name)
        if not number(current):
            return False
        if value_node is not None:
            value = parser.eval_expr(value_node)
        else:
            operand = parser.eval_expr(stmt.value)
            # TVMScript's own evaluation of the operator: Python's, of two Python numbers
            value = _eval_op(stmt.op, values=[current, operand]) if number(operand) else None
        if not number(value):
            from .tirx_visitors import given_values

            given = (value_node, value) if value_node is not None else (stmt.value, operand)
            with given_values(parser, given):  # the value is not evaluated twice
                parser.visit_body([stmt])
            return True
        parser.var_table.add(name, value, allow_shadowing=True)
        return True

    def _holds_nested_return(self, stmt: Any) -> bool:
        """Whether one of this macro's nested ``return`` statements lies within ``stmt``'s lines."""
        end = getattr(stmt, "end_lineno", None) or stmt.lineno
        return any(stmt.lineno <= line <= end for line, _ in self._nested_returns)

    def _visit_nested_return(self, previous: Any, node: Any) -> Any:
        """Refuse a ``return`` of this macro that the parser reaches inside an if/for/while/with;
        any other ``return`` (a function defined in the body) goes to ``previous``."""
        if (node.lineno, node.col_offset) not in self._nested_returns:
            return previous(node)
        from ..errors import KernelDefinitionError

        where = f"{self.source.source_name}:{node.lineno + self.source.start_line - 1}"
        raise KernelDefinitionError(
            f"{where}: a return inside a loop, a with block or an if on a run-time value of macro "
            f"'{self.func.__name__}' is not supported (one inside an if on a Python value is): "
            "assign to a T.alloc_var and return it after the branch"
        )


def _past_recursion_limit(exc: BaseException) -> bool:
    """Whether ``exc`` is Python's recursion limit, as itself or as the parser's report of it."""
    from ..errors import KernelDefinitionError

    if isinstance(exc, KernelDefinitionError):
        return False
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, RecursionError) or "maximum recursion depth exceeded" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _macro_body_names(source: Any, fn: Any) -> tuple:
    """``(names, nested_returns, assigned_parameters)`` of the ``def`` of ``fn`` in ``source``
    (TVMScript's ``Source``): the names its body uses, less its parameters and the names it
    assigns (its locals, as Python decides them: those the body may take from the closure or the
    module; a script's global ``y`` no longer clashes with a macro's ``y = ...``), the ``(line,
    column)`` of each ``return`` of the macro that is not one of its top-level statements (a
    function defined in the body keeps its own), and the parameters the body assigns to."""
    import ast

    tree = ast.parse(source.source)
    fdef = next(
        (d for d in tree.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == fn.__name__),
        None,
    )
    if fdef is None:
        return (), frozenset(), frozenset()
    parameters = set(inspect.signature(fn).parameters)
    stored = assigned_names(fdef.body)
    names: dict = {}
    nested_returns = set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    todo = [(stmt, False) for stmt in fdef.body]
    while todo:
        node, inner = todo.pop()
        if isinstance(node, ast.Name) and node.id not in parameters and node.id not in stored:
            names[node.id] = None
        elif isinstance(node, ast.Return) and not inner:
            if node not in fdef.body:
                nested_returns.add((node.lineno, node.col_offset))
        inner = inner or isinstance(node, scopes)
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
    return tuple(names), frozenset(nested_returns), frozenset(stored & parameters)


def macro(*args: Any, hygienic: bool = True) -> Any:
    """TVMScript's ``T.macro`` (``@T.macro`` or ``@T.macro(hygienic=False)``).

    Same as TVMScript's, except that:

    - a ``return`` among the macro's top-level statements ends it, and a call of a macro that
      returns ``expr`` evaluates to ``expr`` (``y = plus_one(x)``); a ``return`` inside an
      ``if``/``for`` of the macro is a ``KernelDefinitionError`` (assign to a ``T.alloc_var`` and
      return it after the branch);
    - a hygienic macro binds the names its body uses late, as Python does: at each expansion (each
      call in a kernel being parsed), from the function's closure cells and module globals as they
      are then, so a global rebound after the ``def``, a macro defined further down the module and
      a recursive macro (on a Python-level depth) work; TVMScript snapshotted them when the
      decorator ran. A parameter hides a global of its name, and so does a name the body assigns;
    - arguments are bound as Python binds them: a parameter the body assigns to is the macro's own
      scalar, and an argument with a side effect is evaluated once
      (:mod:`tilelang_core.language.macro_arguments`);
    - a macro defined where Python keeps no source (``python -c``, the interactive prompt) is
      found the way :func:`prim_func` finds kernels (:mod:`tilelang_core.language.source`).
    """

    def decorate(fn: Any) -> Any:
        from tvm.script.parser.core.diagnostics import Source

        ensure_source(fn, "macro")
        obj = _ValueMacro(Source(fn), fn, hygienic)

        @functools.wraps(fn)
        def wrapper(*call_args: Any, **call_kwargs: Any) -> Any:
            return obj(*call_args, **call_kwargs)

        return wrapper

    if len(args) == 1 and inspect.isfunction(args[0]):
        return decorate(args[0])
    if args:
        raise ValueError("Invalid use of T.macro. Usage: @T.macro or @T.macro()")
    return decorate


setattr(macro, "dispatch_token", "tir.macro")
