"""``T.print`` markers -> printed lines, in two steps.

1. **Frontend step** (:func:`expand_print`, called by :mod:`.frontend` for each ``tl.print`` marker
   of :mod:`tilelang_core.language.tileops.debug_print`, where the kernel's block and thread
   indices are known). Each marker becomes *line* markers, ``call_extern("int32", LINE_CALL, loc,
   text0, value0, text1, value1, ..., textN)``: literal text and values alternate. A tile becomes a
   serial loop nest over its elements (elements outside the buffer are skipped), on GPU targets
   under ``if (linear thread id == lane)`` (a global buffer after a barrier); a GPU fragment is
   first copied into a shared tile by a ``T.Parallel``-style nest, so that each element is read
   by the thread that owns it (docs/tile-operators.md, "GPU fragments: the layout"), in chunks of
   at most :data:`FRAGMENT_CHUNK_BYTES`, and TVM's ``ThreadSync`` puts the barriers between that
   copy and the printing thread's reads (:func:`_expand_fragment`).
2. **Target step**: each line marker becomes a call of a helper with the line's format built in.
   TVM's code generators cannot pass a string to a function, so every distinct line shape gets a
   helper of its own, defined in the source (``pragma_import_c`` / ``pragma_import_llvm``):

   * C (:func:`lower_cpu_prints`, ``language="c"``): ``printf(format, ...)`` then
     ``fflush(stdout)``: one ``printf`` per line (glibc locks the stream per call, so lines of
     blocks running in parallel never mix), written out before the kernel call returns;
   * LLVM (``language="llvm"``): the same helper in LLVM IR, calling the C library's variadic
     ``printf`` through its variadic type (``call i32 (ptr, ...) @printf``), so that the x86-64
     ABI's vector-register count for the ``double`` arguments is set, then ``fflush(NULL)``;
   * CUDA (:func:`lower_gpu_prints`): a ``__device__`` helper calling device ``printf``;
     other GPU targets (Metal, ROCm) are refused with a :class:`LoweringError`.

Values are passed as ``int32`` (bool, 8- to 32-bit integers; uint32 as ``uint32``), ``int64`` /
``uint64``, or ``float64`` (every float, through float32 for the narrow ones), printed with
``%d``/``%u``/``%lld``/``%llu`` and ``%.<digits>g`` (:data:`FLOAT_DIGITS`: enough significant
digits for the printed text to read back as the same value of the dtype); booleans as
``true``/``false``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

import tvm
from tvm import tirx

from ..errors import LoweringError
from ..language.core import FRAGMENT_SCOPE
from ..language.tileops._common import all_of, static_int
from ..language.tileops.debug_print import PRINT_CALL
from .atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END, checked_map
from .device_assert import c_string
from .markers import marker_args
from .source_imports import c_definitions, with_import

__all__ = ["FLOAT_DIGITS", "FRAGMENT_CHUNK_BYTES", "LINE_CALL", "expand_print", "has_prints", "lower_cpu_prints",
           "lower_gpu_prints", "print_marker", "thread_dependent_prints"]

#: Callee name of a line marker (the frontend's output for one printed line).
LINE_CALL = "tl.print_line"
#: Significant digits printed per float dtype: the fewest that tell neighbouring values apart
#: (``10**(digits - 1) > 2**precision``), so the text reads back as the same value.
FLOAT_DIGITS = {"float64": 17, "float32": 9, "float16": 5, "bfloat16": 4}
_FLOAT8_DIGITS = 3


def print_marker(stmt: Any) -> Optional[list]:
    """``[kind, loc, label, *payload]`` of a ``T.print`` marker statement, else None."""
    return marker_args(stmt, PRINT_CALL)


def has_prints(func: tirx.PrimFunc) -> bool:
    """Whether ``func`` holds a ``T.print`` marker or a line marker."""
    found = []

    def on_evaluate(stmt: Any) -> Any:
        if print_marker(stmt) is not None or marker_args(stmt, LINE_CALL) is not None:
            found.append(stmt)
        return stmt

    checked_map(func.body, [(tirx.Evaluate, on_evaluate)])
    return bool(found)


# --------------------------------------------------------------------------------------------
# frontend step
# --------------------------------------------------------------------------------------------


def _line(loc: str, parts: list) -> Any:
    """A line marker of ``parts`` (``str`` pieces and value expressions, in order)."""
    args: list = [tvm.ir.StringImm(loc)]
    text = ""
    for part in parts:
        if isinstance(part, str):
            text += part
        else:
            args += [tvm.ir.StringImm(text), part]
            text = ""
    args.append(tvm.ir.StringImm(text))
    return tirx.Evaluate(tirx.call_extern("int32", LINE_CALL, *args))


def _as_int32(value: Any) -> Any:
    if isinstance(value, int):
        return tirx.IntImm("int32", value)
    return value if str(value.ty.dtype) == "int32" else tirx.Cast("int32", value)


def _as_int64(value: Any) -> Any:
    return value if str(value.ty.dtype) == "int64" else tirx.Cast("int64", value)


def _origin(kernel: dict, gpu: bool) -> list:
    """``T.print block=(bx, by, bz)`` [`` thread=(tx, ty, tz)``] ``: `` as line parts."""
    blocks = list(kernel["blocks"]) + [0] * (3 - len(kernel["blocks"]))
    parts: list = ["T.print block=("]
    for k, b in enumerate(blocks):
        parts += [", " if k else "", _as_int32(b)]
    parts.append(")")
    if gpu:
        parts.append(" thread=(")
        for k, t in enumerate(kernel["thread_vars"]):
            parts += [", " if k else "", _as_int32(t if t is not None else 0)]
        parts.append(")")
    return parts + [": "]


def _wider(a: Any, b: Any) -> tuple:
    """``a`` and ``b`` (ints or integer expressions) in one integer dtype (the wider one)."""
    da = str(a.ty.dtype) if not isinstance(a, int) else "int32"
    db = str(b.ty.dtype) if not isinstance(b, int) else "int32"
    dtype = "int64" if "int64" in (da, db) else "int32"

    def conv(x: Any) -> Any:
        if isinstance(x, int):
            return tirx.IntImm(dtype, x)
        return x if str(x.ty.dtype) == dtype else tirx.Cast(dtype, x)

    return conv(a), conv(b), dtype


def expand_print(frontend: Any, stmt: Any, ctx: Any) -> Any:
    """The statements of one ``T.print`` marker (see the module docstring), for the frontend step.

    ``frontend`` is the :class:`~.frontend.Frontend` (its options say GPU or CPU; its
    ``_parallel_gpu`` spreads the staging copy of a fragment over the threads) and ``ctx`` its
    context (``ctx.kernel``: block loop variables, thread variables, linear thread id, threads).
    """
    kind, loc, label, *payload = print_marker(stmt)
    kind, loc, label = kind.value, loc.value, label.value
    kernel = ctx.kernel
    if kernel is None:
        raise LoweringError(
            f"{loc}: T.print outside a T.Kernel: a printed line names the block (and thread) it comes "
            "from, so write T.print inside the 'with T.Kernel(...)' body"
        )
    gpu = frontend.opt.gpu
    origin = _origin(kernel, gpu)
    if kind == "msg":
        return _line(loc, origin + [label])
    if kind == "value":
        value, *indices = payload
        at: list = []
        for k, index in enumerate(indices):  # an element at computed indices: their values too
            at += [" at [" if k == 0 else ", ", _as_int64(index)]
        return _line(loc, origin + [label] + at + (["]"] if at else []) + [" = ", value])
    return _expand_tile(frontend, stmt, ctx, loc, label, origin, payload)


def thread_dependent_prints(body: Any) -> list:
    """The ``T.print`` marker statements of a GPU kernel ``body`` that only some of the block's
    threads may run: under an ``if``/``while`` whose condition (or a loop whose bounds) depends on
    the thread index (``T.get_thread_binding``, a variable bound to it, a ``T.alloc_var`` or local
    buffer stored from it). Best effort: conditions the kernel computes otherwise are not seen."""
    from .intrinsics import parse as parse_intrinsic

    tainted: list = []  # variables and buffers holding thread-dependent values
    found: list = []

    def depends(expr: Any) -> bool:
        hits: list = []

        def on_call(call: Any) -> Any:
            m = parse_intrinsic(call)
            if m is not None and m.name == "thread_binding":
                hits.append(call)
            return call

        def on_var(var: Any) -> Any:
            if any(var.same_as(t) for t in tainted):
                hits.append(var)
            return var

        def on_load(load: Any) -> Any:
            if any(load.source.same_as(t) for t in tainted):
                hits.append(load)
            return load

        checked_map(expr, [(tvm.ir.Call, on_call), (tvm.ir.Var, on_var), (tvm.ir.TensorLoad, on_load)])
        return bool(hits)

    def walk(stmt: Any, divergent: bool) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                walk(s, divergent)
        elif isinstance(stmt, tirx.IfThenElse):
            inner = divergent or depends(stmt.condition)
            walk(stmt.then_case, inner)
            if stmt.else_case is not None:
                walk(stmt.else_case, inner)
        elif isinstance(stmt, tirx.While):
            walk(stmt.body, divergent or depends(stmt.condition))
        elif isinstance(stmt, tirx.For):
            walk(stmt.body, divergent or depends(stmt.min) or depends(stmt.extent))
        elif isinstance(stmt, tirx.BufferStore):
            if divergent or depends(stmt.value):
                tainted.append(stmt.buffer)
        elif isinstance(stmt, tirx.Evaluate):
            if divergent and print_marker(stmt) is not None:
                found.append(stmt)
        else:
            if isinstance(stmt, (tirx.Bind, tirx.LetStmt)) and depends(stmt.value):
                tainted.append(stmt.var)
            child = getattr(stmt, "body", None)  # attributes, lets, allocations
            if isinstance(child, tirx.Stmt):
                walk(child, divergent)

    walk(body, False)
    return found


#: Bytes of the shared tile a GPU fragment is printed through: a larger fragment goes through
#: it in chunks (static shared memory is limited to 48 KiB per block).
FRAGMENT_CHUNK_BYTES = 16384


def _unravel(flat: Any, shape: list) -> list:
    """Row-major indices of element ``flat`` of a static ``shape``."""
    out, rest = [], flat
    for k in range(len(shape) - 1, -1, -1):
        out.append(tirx.floormod(rest, shape[k]) if k else rest)
        rest = tirx.floordiv(rest, shape[k])
    return list(reversed(out))


def _expand_fragment(frontend: Any, ctx: Any, loc: str, label: str, origin: list, buffer: Any, starts: list,
                     extents: list, lane: int) -> Any:
    """A GPU fragment (or a region of one) printed by thread ``lane``, through a shared tile.

    The fragment's row-major elements go through the tile in chunks of ``chunk`` elements: the
    owners copy a chunk in (``T.Parallel``-style over the chunk, a multiple of the block's threads
    when there is more than one chunk, so that the thread of chunk element ``g`` owns fragment
    element ``c * chunk + g``), then the printing thread prints the chunk's elements that lie in
    the region. TVM's ``ThreadSync`` puts the barriers between the copy and the reads and between
    one chunk's reads and the next chunk's copy."""
    from .frontend import _seq

    name, dtype = str(buffer), str(buffer.ty.dtype)
    shape = [static_int(d) for d in buffer.ty.shape]
    if any(d is None for d in shape):
        raise LoweringError(f"{loc}: T.print({name}): a fragment needs a static shape on GPU targets, "
                            f"got {list(buffer.ty.shape)}")
    threads = ctx.kernel["threads"]
    numel = 1
    for d in shape:
        numel *= d
    budget = max(1, FRAGMENT_CHUNK_BYTES // max(1, tvm.runtime.DataType(dtype).bits // 8))
    chunk = numel if numel <= budget else max(threads, budget // threads * threads)
    chunks = -(-numel // chunk)
    staging = tirx.decl_buffer([chunk], dtype, name=f"{name}_printed", scope="shared")
    c = tirx.Var(f"{name}_print_chunk", "int32") if chunks > 1 else tirx.IntImm("int32", 0)

    def flat_of(g: Any) -> Any:
        return g if chunks == 1 else c * chunk + g

    g = tirx.Var(f"{name}_print_g", "int32")
    copy = tirx.BufferStore(staging, buffer[tuple(_unravel(flat_of(g), shape))], [g])
    if numel % chunk:
        copy = tirx.IfThenElse(flat_of(g) < numel, copy, None)
    loop = tirx.For(g, tirx.IntImm("int32", 0), tirx.IntImm("int32", chunk), tirx.ForKind.SERIAL,
                    tirx.Evaluate(tirx.IntImm("int32", 0)))
    stage = frontend._parallel_gpu([loop], copy, ctx)
    p = tirx.Var(f"{name}_print_i", "int32")
    indices = _unravel(flat_of(p), shape)
    conds = [flat_of(p) < numel] if numel % chunk else []
    for index, start, extent, dim in zip(indices, starts, extents, shape):
        s0, e0 = static_int(start), static_int(extent)
        if s0 == 0 and e0 == dim:
            continue
        i, st, _ = _wider(index, start)
        i2, end, _ = _wider(index, start + extent)
        conds += [i >= st, i2 < end]
    parts = list(origin) + ([f"{label}: "] if label else []) + [f"{name}["]
    for k, index in enumerate(indices):
        parts += [", " if k else "", _as_int64(index)]
    body = _line(loc, parts + ["] = ", staging[p]])
    if conds:
        body = tirx.IfThenElse(all_of(conds), body, None)
    body = tirx.For(p, tirx.IntImm("int32", 0), tirx.IntImm("int32", chunk), tirx.ForKind.SERIAL, body)
    tid = ctx.kernel["tid"]
    body = tirx.IfThenElse(tid == tirx.IntImm(str(tid.ty.dtype), lane), body, None)
    per_chunk = _seq([stage, body])
    if chunks > 1:
        per_chunk = tirx.For(c, tirx.IntImm("int32", 0), tirx.IntImm("int32", chunks), tirx.ForKind.SERIAL, per_chunk)
    return _seq([tirx.AllocBuffer(staging), per_chunk])


def _expand_tile(frontend: Any, stmt: Any, ctx: Any, loc: str, label: str, origin: list, payload: list) -> Any:
    from .frontend import _seq

    address, lane, *extents = payload
    load = address.args[0]
    buffer, starts = load.source, list(load.indices)
    lane = int(lane.value)
    name = str(buffer)
    scope = str(buffer.ty.storage_scope) or "global"
    gpu = frontend.opt.gpu
    kernel = ctx.kernel
    stmts: list = []
    if gpu:
        threads = kernel["threads"]
        if lane >= threads:
            raise LoweringError(
                f"{loc}: T.print({name}): the printing thread warp_group_id * 128 + warp_id * 32 = {lane} "
                f"does not exist: the block has {threads} threads"
            )
        if "print_divergent" not in kernel:
            kernel["print_divergent"] = thread_dependent_prints(kernel["body"])
        divergent = ctx.in_parallel or any(stmt.same_as(s) for s in kernel["print_divergent"])
        if scope == FRAGMENT_SCOPE:
            if ctx.in_parallel:
                raise LoweringError(
                    f"{loc}: T.print({name}) of a fragment inside a T.Parallel loop: the tile is copied "
                    "through shared memory by all the block's threads, so print it after the loop"
                )
            if divergent:
                raise LoweringError(
                    f"{loc}: T.print({name}) of a fragment under a condition that depends on the thread index: "
                    "the tile is first copied through shared memory by all the block's threads, so write the "
                    "T.print where every thread runs it (one thread prints; choose it with warp_group_id / warp_id)"
                )
            return _expand_fragment(frontend, ctx, loc, label, origin, buffer, starts, extents, lane)
        if scope == "global" and not divergent:
            # what the block's other threads wrote just before is visible after a barrier (shared
            # tiles get theirs from TVM's ThreadSync)
            stmts.append(tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", tvm.ir.StringImm("shared"))))
    loop_vars, indices, conds = [], [], []
    analyzer = tvm.sym.Analyzer()
    for k, (start, extent, dim) in enumerate(zip(starts, extents, buffer.ty.shape)):
        start, extent, dtype = _wider(start, extent)
        var = tirx.Var(f"{name}_print_i{k}", dtype)
        loop_vars.append((var, extent))
        index = var if static_int(start) == 0 else start + var
        indices.append(index)
        index_w, dim_w, _ = _wider(start + extent, dim)
        if not analyzer.can_prove(index_w <= dim_w):
            i, d, _ = _wider(index, dim)
            conds.append(i < d)
    value = buffer[tuple(indices)]
    parts = list(origin) + ([f"{label}: "] if label else []) + [f"{name}["]
    for k, index in enumerate(indices):
        parts += [", " if k else "", _as_int64(index)]
    body = _line(loc, parts + ["] = ", value])
    if conds:
        body = tirx.IfThenElse(all_of(conds), body, None)
    for var, extent in reversed(loop_vars):
        body = tirx.For(var, tirx.IntImm(str(var.ty.dtype), 0), extent, tirx.ForKind.SERIAL, body)
    if gpu:
        tid = kernel["tid"]
        body = tirx.IfThenElse(tid == tirx.IntImm(str(tid.ty.dtype), lane), body, None)
    return _seq(stmts + [body])


# --------------------------------------------------------------------------------------------
# target step
# --------------------------------------------------------------------------------------------

#: Helper parameter types per argument kind (see :func:`_value_arg`): C, CUDA, LLVM IR, and the
#: cast of the ``printf`` argument (``%lld``/``%llu`` take ``long long``s).
_ARG = {
    "bool": ("int32_t", "int", "i32", None),
    "int": ("int32_t", "int", "i32", None),
    "uint": ("uint32_t", "unsigned int", "i32", None),
    "int64": ("int64_t", "long long", "i64", "long long"),
    "uint64": ("uint64_t", "unsigned long long", "i64", "unsigned long long"),
    "double": ("double", "double", "double", None),
}


def _value_arg(value: Any, loc: str, where: str) -> tuple[Any, str, str]:
    """``(argument expression, kind, printf conversion)`` of one printed value."""
    dtype = str(value.ty.dtype)
    t = tvm.runtime.DataType(dtype)
    if dtype == "bool":
        return tirx.Cast("int32", value), "bool", "%s"
    if t.type_code == tvm.runtime.DataTypeCode.INT:
        if t.bits == 64:
            return value, "int64", "%lld"
        return (value if t.bits == 32 else tirx.Cast("int32", value)), "int", "%d"
    if t.type_code == tvm.runtime.DataTypeCode.UINT:
        if t.bits == 64:
            return value, "uint64", "%llu"
        if t.bits == 32:
            return value, "uint", "%u"
        return tirx.Cast("int32", value), "int", "%d"
    if dtype.startswith("float8"):
        if where != "cuda":
            raise LoweringError(
                f"{loc}: T.print of a {dtype} value on a CPU target: TVM 0.27 cannot convert 8-bit floats "
                "on CPU targets (c, llvm); print it in a kernel lowered for cuda"
            )
        return tirx.Cast("float64", tirx.Cast("float32", value)), "double", f"%.{_FLOAT8_DIGITS}g"
    if dtype in FLOAT_DIGITS:
        f32 = value if dtype in ("float32", "float64") else tirx.Cast("float32", value)
        wide = f32 if dtype == "float64" else tirx.Cast("float64", f32)
        return wide, "double", f"%.{FLOAT_DIGITS[dtype]}g"
    raise LoweringError(f"{loc}: T.print cannot print a value of dtype {dtype}")


class _Helpers:
    """The helper functions of one kernel's lines: one per distinct (format, argument kinds)."""

    def __init__(self, where: str):
        self.where = where
        self.by_key: dict = {}

    def call(self, args: list) -> Any:
        """The helper call replacing a line marker's arguments ``[loc, text0, v0, ..., textN]``."""
        loc = args[0].value
        pieces = [a.value for a in args[1::2]]
        values = args[2::2]
        fmt, kinds, call_args = "", [], []
        for k, text in enumerate(pieces):  # one line per print: a newline in a message is shown as \n
            fmt += text.replace("%", "%%").replace("\n", "\\n").replace("\r", "\\r")
            if k < len(values):
                arg, kind, conv = _value_arg(values[k], loc, self.where)
                fmt += conv
                kinds.append(kind)
                call_args.append(arg)
        key = (fmt + "\n", tuple(kinds))
        if key not in self.by_key:  # named after its content: kernels merged into one file share helpers
            digest = hashlib.sha1(repr(key).encode("utf-8")).hexdigest()[:12]
            self.by_key[key] = f"tl_print_{digest}"
        return tirx.Evaluate(tirx.call_extern("int32", self.by_key[key], *call_args))

    def c_text(self) -> str:
        """C definitions of the helpers (``printf`` + ``fflush(stdout)``)."""
        defs = []
        for (fmt, kinds), name in self.by_key.items():
            params = ", ".join(f"{_ARG[k][0]} a{i}" for i, k in enumerate(kinds)) or "void"
            args = "".join(f", {_c_arg(k, f'a{i}')}" for i, k in enumerate(kinds))
            defs.append(
                f'__attribute__((visibility("hidden"))) int32_t {name}({params}) {{\n'
                f"  printf({c_string(fmt)}{args});\n  fflush(stdout);\n  return 0;\n}}\n"
            )
        return c_definitions("\n/* tilelang T.print: one printf per line, flushed (lowering/debug_print.py) */\n"
                             "#include <stdio.h>\n#include <stdint.h>\n", defs)

    def cuda_text(self) -> str:
        """CUDA definitions of the helpers (device ``printf``)."""
        defs = []
        for (fmt, kinds), name in self.by_key.items():
            params = ", ".join(f"{_ARG[k][1]} a{i}" for i, k in enumerate(kinds)) or "void"
            args = "".join(f", {_c_arg(k, f'a{i}')}" for i, k in enumerate(kinds))
            guard = name.upper()
            defs.append(f"#ifndef {guard}\n#define {guard}\n__device__ __noinline__ int {name}({params}) {{\n"
                        f"  printf({c_string(fmt)}{args});\n  return 0;\n}}\n#endif\n")
        return (f"\n{CUDA_HELPERS_BEGIN}\n/* tilelang T.print: device printf (lowering/debug_print.py) */\n"
                "#ifndef __CUDACC_RTC__\n#include <cstdio>\n#endif\n" + "".join(defs) + f"{CUDA_HELPERS_END}\n")

    def llvm_text(self) -> str:
        """LLVM IR of the helpers: a variadic ``printf`` call, then ``fflush(NULL)``."""
        out = ["declare i32 @printf(ptr, ...)", "declare i32 @fflush(ptr)",
               '@tl_print_true = private unnamed_addr constant [5 x i8] c"true\\00"',
               '@tl_print_false = private unnamed_addr constant [6 x i8] c"false\\00"']
        for (fmt, kinds), name in self.by_key.items():
            data = fmt.encode("utf-8") + b"\0"
            out.append(f"@{name}_format = private unnamed_addr constant [{len(data)} x i8] c\"{_ll_bytes(data)}\"")
            params = ", ".join(f"{_ll_type(k)} %a{i}" for i, k in enumerate(kinds))
            body, call_args = [], []
            for i, k in enumerate(kinds):
                if k == "bool":
                    body += [f"  %c{i} = icmp ne i32 %a{i}, 0",
                             f"  %s{i} = select i1 %c{i}, ptr @tl_print_true, ptr @tl_print_false"]
                    call_args.append(f"ptr %s{i}")
                else:
                    call_args.append(f"{_ll_type(k)} %a{i}")
            out += [f"define hidden i32 @{name}({params}) {{", "entry:", *body,
                    f"  %r = call i32 (ptr, ...) @printf(ptr @{name}_format{''.join(', ' + a for a in call_args)})",
                    "  %f = call i32 @fflush(ptr null)", "  ret i32 0", "}"]
        return "\n".join(out) + "\n"


def _c_arg(kind: str, name: str) -> str:
    """The ``printf`` argument of helper parameter ``name`` (C and CUDA)."""
    if kind == "bool":
        return f'({name} ? "true" : "false")'
    cast = _ARG[kind][3]
    return f"({cast}){name}" if cast else name


def _ll_type(kind: str) -> str:
    return _ARG[kind][2]


def _ll_bytes(data: bytes) -> str:
    """``data`` as the body of an LLVM IR ``c"..."`` string (printable ASCII as is, else ``\\XX``)."""
    return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)


def _lower_lines(body: Any, where: str) -> tuple[Any, _Helpers]:
    helpers = _Helpers(where)

    def on_evaluate(stmt: Any) -> Any:
        marker = print_marker(stmt)
        if marker is not None:  # the frontend expands every marker it reaches
            raise LoweringError(f"{marker[1].value}: T.print in a place the kernel's frontend step does not reach; "
                                "write it in the T.Kernel body, in a loop or branch of it")
        args = marker_args(stmt, LINE_CALL)
        return stmt if args is None else helpers.call(args)

    return checked_map(body, [(tirx.Evaluate, on_evaluate)]), helpers


def lower_cpu_prints(func: tirx.PrimFunc, language: str) -> tirx.PrimFunc:
    """``func`` with its printed lines calling helpers defined in its source (``language``:
    ``"c"``, a ``pragma_import_c`` text; ``"llvm"``, a ``pragma_import_llvm`` one)."""
    body, helpers = _lower_lines(func.body, language)
    if not helpers.by_key:
        return func
    if language == "llvm":
        return func.with_body(with_import(body, "pragma_import_llvm", helpers.llvm_text()))
    return func.with_body(with_import(body, "pragma_import_c", helpers.c_text()))


def lower_gpu_prints(func: tirx.PrimFunc, kind: str) -> tuple[tirx.PrimFunc, str]:
    """``func`` with its printed lines calling CUDA helpers, and their definitions ("" when the
    kernel prints nothing). Other GPU targets have no ``printf``: a :class:`LoweringError`."""
    if kind != "cuda" and has_prints(func):
        loc = _first_location(func)
        why = "the Metal Shading Language has no printf" if kind == "metal" else f"it is not lowered for {kind} yet"
        raise LoweringError(f"{loc}: T.print cannot print on target {kind} ({why}); debug the kernel on "
                            "cuda or a CPU target (c, llvm), or remove the T.print")
    body, helpers = _lower_lines(func.body, kind)
    if not helpers.by_key:
        return func, ""
    return func.with_body(body), helpers.cuda_text()


def _first_location(func: tirx.PrimFunc) -> str:
    """``file:line`` of the first ``T.print`` in ``func``."""
    found: list = []

    def on_evaluate(stmt: Any) -> Any:
        marker, line = print_marker(stmt), marker_args(stmt, LINE_CALL)
        if not found and (marker or line):
            found.append((marker[1] if marker else line[0]).value)
        return stmt

    checked_map(func.body, [(tirx.Evaluate, on_evaluate)])
    return found[0] if found else "<unknown>"
