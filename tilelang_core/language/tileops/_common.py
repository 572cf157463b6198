"""Shared helpers of the tile operators: operands, errors, loop nests, bounds guards.

Every operator expands, at kernel definition time, into ordinary TIR through TVM's IR builder:
``T.Parallel`` nests (spread over the block's threads on GPU targets, loop nests on CPU) or
serial loops (when an operand is a per-thread ``local`` buffer), with bounds guards computed
from the buffers' shapes. See docs/tile-operators.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable, Optional, Sequence

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as _B

from ...errors import LoweringError
from ..core import ATOMIC_ADD_KEY, FRAGMENT_SCOPE, Parallel, _caller_location  # noqa: F401 - re-exported
#: Loop annotation of ``T.Pipelined``: the requested number of stages.
PIPELINED_STAGES_KEY = "tl.pipelined_num_stages"

ON_CHIP_SCOPES = ("shared", "shared.dyn", "local", FRAGMENT_SCOPE)
#: The 16-bit float dtypes. Their sums run in float32 and are rounded from it, as torch's:
#: ``T.reduce_sum``/``reduce_abssum`` (reduce.py) and ``T.cumsum`` (scan.py).
HALF_FLOATS = ("float16", "bfloat16")
#: The dtype those sums run in.
HALF_SUM_DTYPE = "float32"


def location() -> str:
    """``file:line`` of the kernel statement being parsed (``<unknown>`` outside the parser)."""
    return _caller_location() or "<unknown>"


def describe(value: Any) -> str:
    """Short text of an operand as the kernel author wrote it (``A``, ``A[0:32, k:k + 16]``)."""
    try:
        if is_buffer(value) and isinstance(getattr(value, "name", None), str) and value.name:
            return value.name
        return str(value)
    except Exception:  # noqa: BLE001 - printing never hides the real error
        return repr(value)


class OperandTypeError(LoweringError, TypeError):
    """An operand of the wrong kind of type (also a ``TypeError``, as TileLang raises there)."""


class OperandCheckError(LoweringError, AssertionError):
    """An operand check that TileLang makes with ``assert`` (also an ``AssertionError``)."""


def fail(op: str, operands: Sequence[Any], message: str, error: type = LoweringError) -> None:
    """Raise ``error`` (a :class:`LoweringError`) naming the operator, its operands (as the kernel
    wrote them where they are the arguments of the call being parsed) and the kernel line."""
    from ..spans import written_argument

    text = ", ".join(written_argument(o) or describe(o) for o in operands)
    raise error(f"{location()}: {op}({text}): {message}")


def is_buffer(value: Any) -> bool:
    """Whether ``value`` is a buffer (a tensor variable with a buffer type)."""
    try:
        return bool(tirx.buffer.is_buffer_var(value))
    except Exception:  # noqa: BLE001
        return False


def static_int(expr: Any) -> Optional[int]:
    """The int value of an int or ``IntImm``, else None."""
    if isinstance(expr, Integral) and not isinstance(expr, bool):
        return int(expr)
    if type(expr).__name__ == "IntImm":
        return int(expr.value)
    return None


def check_options(op: str, operands: Any, annotations: Any = None, **flags: Any) -> None:
    """Refuse options of the wrong kind: each of ``flags`` (``clear=...``) must be a bool (or the
    int 0 or 1), ``annotations`` a dict or None. An argument given in another position than
    TileLang's (``T.reduce_sum(A, B, 1, 4)``, where 4 is the batch width elsewhere) is then an
    error, not a silently different operation."""
    for name, value in flags.items():
        if not isinstance(value, bool) and not (isinstance(value, Integral) and value in (0, 1)):
            fail(op, operands, f"{name} must be True or False, got {value!r}", OperandTypeError)
    if annotations is not None and not isinstance(annotations, dict):
        from ..operand_checks import _given

        fail(op, operands, f"annotations must be a dict or None, got {_given(annotations)}", OperandTypeError)


def disjoint(a: Any, b: Any) -> bool:
    """Whether two tiles of one buffer provably share no element (constant starts and extents that
    do not meet in some dimension)."""
    for sa, ea, sb, eb in zip(a.starts, a.extents, b.starts, b.extents):
        sa, ea, sb, eb = (static_int(x) for x in (sa, ea, sb, eb))
        if None not in (sa, ea, sb, eb) and (sa + ea <= sb or sb + eb <= sa):
            return True
    return False


def check_batch(op: str, operands: Any, batch: Any, extents: Sequence[Any], name: str) -> None:
    """TileLang's all-reduce ``batch=``: an int >= 1 that divides the output's element count
    (checked where the count is static). The result does not depend on it."""
    if isinstance(batch, bool) or not isinstance(batch, Integral) or batch < 1:
        fail(op, operands, f"batch must be >= 1, got {batch!r}")
    total = 1
    for e in extents:
        v = static_int(e)
        if v is None:
            return
        total *= v
    if batch > total:
        fail(op, operands, f"batch {batch} exceeds total output elements ({total}) of '{name}'")
    if total % batch:
        fail(op, operands, f"batch {batch} must evenly divide total output elements ({total}) of '{name}'")


def shape_text(shape: Sequence[Any]) -> str:
    """``(32, 16)`` for a shape given as ints or expressions."""
    items = [str(static_int(s)) if static_int(s) is not None else str(s) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


_ANALYZER = None


def analyzer():
    """A shared arithmetic analyzer (definition-time proofs over constants only)."""
    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = tvm.sym.Analyzer()
    return _ANALYZER


def same_extent(a: Any, b: Any) -> bool:
    """Whether two extents are provably equal."""
    ia, ib = static_int(a), static_int(b)
    if ia is not None and ib is not None:
        return ia == ib
    try:
        return bool(analyzer().can_prove_equal(_expr(a), _expr(b)))
    except Exception:  # noqa: BLE001
        return False


def _expr(value: Any, dtype: str = "int32") -> Any:
    if isinstance(value, Integral) and not isinstance(value, bool):
        return tirx.IntImm(dtype, int(value))
    return value


def is_unit(extent: Any) -> bool:
    """Whether an extent is provably 1."""
    return static_int(extent) == 1


@dataclass
class Tile:
    """An operand of a tile operator: a buffer, a region of one, or a tile corner (element).

    ``starts``/``extents`` give the part of ``buffer`` the operator touches; for a corner
    (``kind == "element"``) ``extents`` is None until :meth:`with_extents` gives the other side's
    shape.
    """

    buffer: Any
    starts: list
    extents: Optional[list]
    kind: str  # "buffer" | "region" | "element"
    source: Any

    @property
    def name(self) -> str:
        """Name of the buffer."""
        return str(self.buffer)

    @property
    def shape(self) -> list:
        """Shape of the whole buffer."""
        return list(self.buffer.ty.shape)

    @property
    def dtype(self) -> str:
        """Element dtype of the buffer."""
        return str(self.buffer.ty.dtype)

    @property
    def scope(self) -> str:
        """Storage scope of the buffer (``global``, ``shared``, ``local``, ``local.fragment``)."""
        scope = str(self.buffer.ty.storage_scope)
        return scope or "global"

    @property
    def squeezed(self) -> list:
        """The extents without unit dimensions."""
        return [e for e in self.extents if not is_unit(e)]

    def with_extents(self, extents: Sequence[Any]) -> "Tile":
        """A corner operand completed with a tile extent (trailing dims; leading dims get 1)."""
        rank = len(self.shape)
        ext = list(extents)
        if len(ext) > rank:
            raise ValueError("rank")
        full = [1] * (rank - len(ext)) + ext
        return Tile(self.buffer, list(self.starts), full, "region", self.source)

    def indices(self, squeezed_vars: Sequence[Any]) -> list:
        """Buffer indices for one point of the squeezed iteration space."""
        out = []
        k = 0
        for start, extent in zip(self.starts, self.extents):
            if is_unit(extent):
                out.append(start)
            else:
                var = squeezed_vars[k]
                k += 1
                out.append(var if static_int(start) == 0 else start + var)
        return out

    def bounds_condition(self, squeezed_vars: Sequence[Any]) -> Optional[Any]:
        """The condition keeping an access inside the buffer, or None when always inside: each index
        below its dimension, and at least 0 where the region's start may be negative (a halo tile,
        ``T.copy(A[bx * 64 - 1], S)``; before, only the upper end was guarded, so block 0 read
        ``A[-1]`` where the access guards were off, and on GPU targets)."""
        conds = []
        for index, start, extent, dim in zip(self.indices(squeezed_vars), self.starts, self.extents, self.shape):
            if provably_inside(start, extent, dim):
                continue
            s, e, d = static_int(start), static_int(extent), static_int(dim)
            if s is not None and e is not None and d is not None and s + e > d and s >= d:
                conds.append(tirx.IntImm("bool", 0))
                continue
            index = index_in_dim_width(index, dim)
            if not provably_nonnegative(start):
                conds.append(index >= tirx.const(0, index.ty.dtype))
            if not provably_ends_inside(start, extent, dim):
                conds.append(index < _expr(dim))
        return all_of(conds)


def index_in_dim_width(index: Any, dim: Any) -> Any:
    """``index`` as an expression computed in the width of the dimension ``dim`` it indexes.

    A guard ``0 <= bx * 256 + v < 2**31 + 64`` built from an int32 index was computed in int32
    (TVM casts only the finished sum to compare it with the int64 extent): the sum wrapped past
    2**31 - 1 (undefined behaviour on c), and on llvm TVM's passes stopped with "Literal value
    2147483904 exceeds range of int32" while bounding it. Where the extent is int64, the index is
    computed in int64 from its leaves; elsewhere it stays as it is.
    """
    index = _expr(index)
    dim_dtype = str(_expr(dim).ty.dtype)
    if dim_dtype == "int64" and str(index.ty.dtype) in ("int8", "int16", "int32", "uint8", "uint16", "uint32"):
        from ...lowering.signature import to_int64

        return to_int64(index)
    return index


#: Frames of control flow: a block barrier inside one may not be reached by every thread.
_CONTROL_FRAMES = ("IfFrame", "ThenFrame", "ElseFrame", "WhileFrame")


def _is_parallel_loop(parent: Any) -> bool:
    """Whether the loop frame opened inside ``parent`` is a ``T.Parallel`` one (``T.Parallel`` emits
    its marker statement right before the loop)."""
    from ..core import PARALLEL_MARKER

    stmts = list(getattr(parent, "stmts", ()))
    call = getattr(stmts[-1], "value", None) if stmts else None
    return (getattr(getattr(call, "op", None), "name", "") == "tirx.call_extern"
            and str(getattr(call.args[0], "value", "")) == PARALLEL_MARKER)


def every_thread_gets_here(serial_loops: bool = False) -> bool:
    """Whether every thread of a GPU block reaches the statement being built, as a block barrier
    needs: it is in a ``T.Kernel`` body and inside no ``if`` or ``while`` of it, and no loop
    (``serial_loops``: no ``T.Parallel`` loop; serial loops are run by every thread alike). A
    barrier inside ``if tx < 8:`` would be reached by some threads only: undefined behaviour in
    CUDA, where the block may hang."""
    from ..core import current_kernel

    kernel = current_kernel()
    if kernel is None or not kernel._frames:
        return False
    frames = list(IRBuilder.current().frames)
    start = next((i for i, f in enumerate(frames) if f.same_as(kernel._frames[-1])), None)
    if start is None:
        return False
    for parent, frame in zip(frames[start:], frames[start + 1:]):
        name = type(frame).__name__
        if name in _CONTROL_FRAMES:
            return False
        if name == "ForFrame" and (not serial_loops or _is_parallel_loop(parent)):
            return False
    return True


def provably_inside(start: Any, extent: Any, dim: Any) -> bool:
    """Whether ``[start, start + extent)`` provably lies inside a dimension of size ``dim`` (ints or
    expressions: constants are compared, expressions proved by the shared analyzer)."""
    return provably_nonnegative(start) and provably_ends_inside(start, extent, dim)


def provably_nonnegative(start: Any) -> bool:
    """Whether the region start ``start`` is provably at least 0."""
    s = static_int(start)
    if s is not None:
        return s >= 0
    try:
        value = _expr(start)
        return bool(analyzer().can_prove(value >= tirx.const(0, value.ty.dtype)))
    except Exception:  # noqa: BLE001
        return False


def provably_ends_inside(start: Any, extent: Any, dim: Any) -> bool:
    """Whether ``start + extent <= dim`` provably holds."""
    s, e, d = static_int(start), static_int(extent), static_int(dim)
    if s is not None and e is not None and d is not None:
        return s + e <= d
    try:
        return bool(analyzer().can_prove(_expr(start) + _expr(extent) <= _expr(dim)))
    except Exception:  # noqa: BLE001
        return False


def scope_of(buffer: Any) -> str:
    """The storage scope of ``buffer`` (``"global"`` when it has none)."""
    return str(buffer.ty.storage_scope) or "global"


def is_var_buffer(buffer: Any) -> bool:
    """Whether ``buffer`` is a one-element local buffer (what ``T.alloc_var`` allocates)."""
    shape = list(buffer.ty.shape)
    return len(shape) == 1 and static_int(shape[0]) == 1 and scope_of(buffer) == "local"


def contains(nodes: Sequence[Any], node: Any) -> bool:
    """Whether ``node`` is one of ``nodes`` (the same IR object: ``same_as``, not structural equality)."""
    return any(node.same_as(x) for x in nodes)


def storage_root(buffer: Any) -> Any:
    """The buffer whose storage ``buffer`` is on: ``A`` for a ``T.view``/``T.reshape`` of ``A`` (or a
    view of such a view) declared in an enclosing frame, else ``buffer`` itself."""
    frames = [f for f in IRBuilder.current().frames if type(f).__name__ == "DeclBufferFrame"]
    for _ in range(len(frames)):
        frame = next((f for f in frames if f.buffer.same_as(buffer)), None)
        data = getattr(frame, "data", None)
        args = list(getattr(data, "args", ())) if data is not None else []
        if not (args and getattr(getattr(data, "op", None), "name", "") == "tirx.buffer_data"):
            break
        buffer = args[0]
    return buffer


def collect(node: Any, kinds: Any) -> list:
    """The nodes of the classes ``kinds`` (a class or a tuple) in ``node``, a statement or expression."""
    found: list = []
    tvm_ffi.structural_walk(node, (kinds if isinstance(kinds, tuple) else (kinds,), found.append), order="pre")
    return found


def uses_var(node: Any, var: Any) -> bool:
    """Whether the variable ``var`` occurs in ``node``, a statement or expression."""
    import tvm

    return any(v.same_as(var) for v in collect(node, tvm.ir.Var))


def substitute(node: Any, mapping: Sequence[tuple]) -> Any:
    """``node`` with variables replaced (``[(old_var, new_expr)]``) everywhere."""
    if not mapping:
        return node

    def on_var(var: Any) -> Any:
        for old, new in mapping:
            if var.same_as(old):
                return new
        return var

    return tvm_ffi.structural_map(node, [(tvm.ir.Var, on_var)])


def as_tile(op: str, operands: Sequence[Any], value: Any, role: str, allow_element: bool = True,
            element_region: bool = False) -> Tile:
    """Turn an operator argument into a :class:`Tile`, or fail naming ``role``.

    Where a tile is required (``allow_element=False``), a ``T.alloc_var`` scalar stands for its
    one-element buffer (``T.reduce_sum(src, total_var)``); with ``element_region`` any single
    element ``A[i, j]`` is the one-element region there (``T.fill(count[0], 0)``, as in TileLang).
    """
    value = getattr(value, "scalar", value)  # TVMScript's scalar wrapper (T.alloc_var)
    if not allow_element and type(value).__name__ == "TensorLoad" and is_var_buffer(value.source):
        value = value.source
    if is_buffer(value):
        shape = list(value.ty.shape)
        return Tile(value, [0] * len(shape), shape, "buffer", value)
    kind = type(value).__name__
    if kind == "TensorRegion":
        starts = [r.min for r in value.region]
        extents = [r.extent for r in value.region]
        for e in extents:
            if static_int(e) is not None and static_int(e) < 1:
                fail(op, operands, f"{role} region {describe(value)} is empty (extent {static_int(e)})")
        return Tile(value.source, starts, extents, "region", value)
    if kind == "TensorLoad":
        if not allow_element and element_region:
            for idx in value.indices:
                if type(idx).__name__ == "Ramp":
                    fail(op, operands, f"{role} {describe(value)}: use a region (A[a:b, c:d]) instead of a vector index")
            return Tile(value.source, list(value.indices), [1] * len(value.indices), "region", value)
        if not allow_element:
            fail(
                op,
                operands,
                f"{role} must be a buffer or a region such as {describe(value.source)}[0:32, 0:32], "
                f"got the single element {describe(value)}",
            )
        for idx in value.indices:
            if type(idx).__name__ == "Ramp":
                fail(op, operands, f"{role} {describe(value)}: use a region (A[a:b, c:d]) instead of a vector index")
        return Tile(value.source, list(value.indices), None, "element", value)
    fail(
        op,
        operands,
        f"{role} must be a buffer, a region (A[0:32, k:k + 16]) or a tile corner (A[i, j]), "
        f"got {type(value).__name__} {describe(value)}",
    )
    raise AssertionError  # unreachable


def per_thread(*tiles: Tile) -> bool:
    """Whether an operator runs whole in every thread: its destination is a per-thread ``local`` tile.

    Otherwise the operator is a ``T.Parallel`` nest over the destination, spread over the block's
    threads on GPU targets (each thread reads its own copy of ``local`` sources).
    """
    return any(t.scope == "local" for t in tiles)


def _reads_memory(expr: Any) -> bool:
    return isinstance(expr, tvm.ir.Expr) and bool(collect(expr, tvm.ir.TensorLoad))


def loop_nest(extents: Sequence[Any], parallel: bool, body: Callable[[list], None]) -> None:
    """Emit a loop nest over ``extents`` (``T.Parallel`` or serial) and call ``body(vars)`` inside.

    An empty ``extents`` list runs ``body([])`` once, without a loop.
    """
    extents = list(extents)
    if not extents:
        body([])
        return
    # An extent that reads memory (``x[a:b]`` with ``T.alloc_var`` bounds) is read once, before
    # the loop, into a bound variable: TVM's passes refuse buffer reads in loop extents.
    extents = [_B.bind(e) if _reads_memory(e) else e for e in extents]
    frame = Parallel(*extents) if parallel else _B.grid(*extents)
    with frame as loop_vars:
        if isinstance(loop_vars, tvm.ir.Expr):
            loop_vars = [loop_vars]
        body(list(loop_vars))


def all_of(conds: Sequence[Any]) -> Optional[Any]:
    """The conjunction of the conditions that are not None (None when none is left)."""
    kept = [c for c in conds if c is not None]
    if not kept:
        return None
    cond = kept[0]
    for c in kept[1:]:
        cond = tirx.And(cond, c)
    return cond


def guarded(cond: Optional[Any], emit: Callable[[], None]) -> None:
    """Run ``emit()`` under ``if cond`` (or unguarded when ``cond`` is None)."""
    if cond is None:
        emit()
        return
    with _B.If(cond):
        with _B.Then():
            emit()


def cast(value: Any, dtype: str) -> Any:
    """``value`` converted to ``dtype`` (no-op when it already has it)."""
    if isinstance(value, bool):
        return tirx.IntImm(dtype, int(value)) if not dtype.startswith(("float", "bfloat")) else tirx.FloatImm(dtype, float(value))
    if isinstance(value, Integral):
        if dtype.startswith(("float", "bfloat")):
            return tirx.FloatImm(dtype, float(value))
        return tirx.IntImm(dtype, int(value))
    if isinstance(value, float):
        if not dtype.startswith(("float", "bfloat")):
            return tirx.IntImm(dtype, int(value))
        return tirx.FloatImm(dtype, value)
    if str(value.ty.dtype) == dtype:
        return value
    return tirx.Cast(dtype, value)


def integer_range(dtype: str) -> Optional[tuple]:
    """``(lowest, highest)`` of an integer ``dtype`` (``int8``, ``uint32``, ...), else None."""
    for prefix, signed in (("uint", False), ("int", True)):
        if dtype.startswith(prefix) and dtype[len(prefix):].isdigit():
            bits = int(dtype[len(prefix):])
            return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return None


def number_constant(op: str, operands: Sequence[Any], value: Any, dtype: str, what: str = "value") -> Any:
    """The Python number ``value`` as a constant of ``dtype``, or a clear error naming ``op`` when
    it does not fit (``T.fill(S, -5)`` with ``S`` uint8), instead of TVM's raw literal check."""
    if not isinstance(value, bool) and isinstance(value, Integral):
        limits = integer_range(dtype)
        if limits is not None and not limits[0] <= int(value) <= limits[1]:
            low, high = limits
            kind = "negative for the unsigned type" if int(value) < 0 and low == 0 else "out of range for"
            wrapped = (int(value) - low) % (high - low + 1) + low
            fail(op, operands, f"the {what} {int(value)} is {kind} {dtype} (range {low}..{high}); "
                 f"give a value in that range ({int(value)} wrapped to {dtype} is {wrapped})")
    try:
        return cast(value, dtype)
    except Exception as err:  # noqa: BLE001 - TVM refuses values outside the dtype's range
        reason = str(err).strip().splitlines()[-1].split(" : ")[-1].split("is false: ")[-1]
        fail(op, operands, f"the {what} {value!r} does not fit {dtype} ({reason})")


def zero(dtype: str) -> Any:
    """The constant 0 of ``dtype``."""
    return cast(0, dtype)


def is_float(dtype: str) -> bool:
    """Whether ``dtype`` is a floating-point type."""
    return dtype.startswith(("float", "bfloat"))
