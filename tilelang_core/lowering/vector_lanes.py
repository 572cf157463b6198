"""``T.vectorized`` loops split into vectors TVM's CUDA code generator prints right.

TVM 0.27 vectorizes a ``T.vectorized(n)`` loop into values of ``n`` lanes, and its CUDA code
generator prints some of them wrong or not at all:

* a broadcast of more than 4 lanes (but float16/bfloat16) is ``make_ulonglong4``/``make_int4``
  with 8 arguments (``B[i] = A[i] * 3`` of float32, int32 or int16 over 8 lanes, of int8 over 8
  or 16), and a read or write that is not contiguous (``S[1023 - i]``, ``A[2 * i]``) of more than
  4 lanes ``make_uint4`` with 8 arguments: nvcc and NVRTC refuse both;
* 16 lanes of 16- or 32-bit values, 8 of 64-bit ones and 8 of ``bool`` have no CUDA type ("Cannot
  convert type T.float16x16 to CUDA type");
* ``bool`` vectors of 2 or 4 lanes are loaded and stored as ``ushort2``/``ushort4``, two bytes a
  lane where a ``bool`` tensor has one: wrong values without an error;
* float8: a conversion of more than 4 lanes is refused (lowering/float8_cuda.py: cuda_fp8.h
  converts 2 and 4), and a gather or scatter reads lanes as ``.x``/``.y``, which ``__nv_fp8x2_*``
  lacks.

:func:`SplitWideVectors` runs right before TVM's ``VectorizeLoop`` on CUDA. For each innermost
vectorized loop of a constant extent ``n`` it vectorizes the loop on its own and looks at the
values that result; when one of them is of a kind above (:func:`printable`), the loop becomes an
unrolled loop over ``n / m`` vectorized loops of ``m`` lanes, with ``m`` the largest divisor of
``n`` whose vectors all print right (1 at worst: the lanes one after the other). The loop computes
the same values either way; the contiguous loads and stores of the vectors CUDA has (up to 16
bytes: ``float4``, ``uint4`` of 8 float16, ``int4`` of 16 int8) are kept.

On ``llvm``, a vector's lane count is a 16-bit field of TVM's ``DataType``: ``T.vectorized(n)``
with a constant ``n`` of 65536 or more wrapped to ``n mod 65536`` lanes and wrote only those
elements (65537: one element of 65537) without an error, and 32768 <= ``n`` < 65536 stopped with
TVM's "Check failed: lanes < 32768". LLVM also takes time that grows faster than the lanes for
wide vectors (``exp(a) * 2 + a`` of float32: 0.6 s to compile 1024 lanes, 3 s for 4096, 44 s for
16384, 207 s for 32767); 40000 lanes, negative as a 16-bit number, even stopped the process
("LLVM ERROR: Cannot implicitly convert a scalable size"). :func:`VectorLoopsForLlvm` runs right
before ``VectorizeLoop`` on ``llvm``: an innermost vectorized loop of a constant extent ``n`` above
:data:`LLVM_MAX_LANES` becomes a serial loop over ``n // LLVM_MAX_LANES`` vectorized loops of
``LLVM_MAX_LANES`` lanes, then one vectorized loop of the ``n % LLVM_MAX_LANES`` lanes left
(:func:`chunk_lanes`). The lanes of a loop that reaches ``VectorizeLoop`` are independent
(lowering/vector_lane_collisions.py made the others serial), so running the chunks one after
another writes the same values. A narrower loop that does not start at 0 (``T.vectorized(5,
13)``, which stopped ``llvm`` with TVM's "Check failed: (is_zero(op->min))") starts at 0 and
adds its start to the variable (:func:`rebased`).
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, substitute

__all__ = [
    "LLVM_MAX_LANES", "RunTimeVectorsSerial", "SplitWideVectors", "VectorLoopsForLlvm", "chunk_lanes", "printable",
    "rebased", "serial_vectors_pass", "split_lanes",
]

#: Most lanes of a value the generator prints, by element bits; ``bool`` (8 bits in TVM) has its own.
_MAX_LANES = {8: 16, 16: 8, 32: 8, 64: 4}
_MAX_BOOL_LANES = 4
#: Most lanes of any vector the generator prints right.
_WIDEST_PRINTABLE = max(_MAX_LANES.values())
#: Most lanes of a broadcast (``make_<type>(...)``), a gather or scatter index and its values.
_MAX_SPREAD = 4
#: Element dtypes whose broadcast the generator prints for 8 lanes too (as packed pairs).
_PAIRED_BROADCAST = ("float16", "bfloat16")
#: Most lanes of one vector on ``llvm`` (module docstring): 256 float32 lanes are 16 AVX-512
#: registers (256 int8 lanes 4), enough for LLVM to unroll and interleave, far below TVM's 32767, and
#: compiled in a fraction of a second. Measured (4096 elements, ``exp(a) * 2 + a``): chunks of 16 to
#: 256 lanes ran in 9.3-9.5 us a call, one 4096-lane vector in 17 us after 2.8 s of compiling; and
#: loops of up to 256 lanes (the usual tile widths) keep their single vector.
LLVM_MAX_LANES = 256


def _constant(expr: Any) -> Optional[int]:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _dtype(node: Any) -> Any:
    ty = getattr(node, "ty", None)
    return ty.dtype if isinstance(ty, tvm.ir.PrimType) else None


def _contiguous(index: Any) -> bool:
    return isinstance(index, tirx.Ramp) and _constant(index.stride) == 1


def _wide_float8(expr: Any) -> bool:
    """A float8 vector of more than 4 lanes (cuda_fp8.h converts 2 and 4 lanes; lowering/float8_cuda.py)."""
    dtype = _dtype(expr) if isinstance(expr, tirx.Expr) else None
    return dtype is not None and dtype.lanes > _MAX_SPREAD and str(dtype.with_lanes(1)).startswith("float8")


def printable(stmt: Any) -> bool:
    """Whether every vector value of ``stmt`` (a vectorized loop after TVM's ``VectorizeLoop``) is
    one TVM's CUDA code generator prints right."""
    skip: list = []  # the indices of contiguous accesses: printed as a pointer, not as a vector
    bad: list = []

    def on_access(access: Any) -> Any:
        indices = list(access.indices)
        dtype = _dtype(access) if isinstance(access, tvm.ir.TensorLoad) else _dtype(access.value)
        if dtype is not None and dtype.is_bool and dtype.lanes > 1:
            bad.append(access)  # bool vectors are ushort2/ushort4 in memory: 2 bytes a lane, not 1
        if indices and _contiguous(indices[-1]):
            skip.append(indices[-1])
        elif dtype is not None and dtype.lanes > 1 and str(dtype.with_lanes(1)).startswith("float8"):
            bad.append(access)  # a float8 gather or scatter reads lanes as .x/.y, which __nv_fp8x2_* lacks
        elif indices and (_dtype(indices[-1]) is not None and _dtype(indices[-1]).lanes > _MAX_SPREAD):
            bad.append(access)  # a gather or scatter of more lanes than make_<type>4 takes
        return access

    def on_expr(expr: Any) -> Any:
        dtype = _dtype(expr)
        if not isinstance(expr, tvm.ir.TensorLoad):
            operands = [getattr(expr, n, None) for n in ("a", "b", "value")] + list(getattr(expr, "args", None) or [])
            if any(_wide_float8(x) for x in [expr, *operands]):
                bad.append(expr)  # float8 conversions (arithmetic is converted too) of more than 4 lanes
        if dtype is None or dtype.lanes == 1 or any(expr.same_as(s) for s in skip):
            return expr
        if dtype.lanes > (_MAX_BOOL_LANES if dtype.is_bool else _MAX_LANES.get(dtype.bits, 1)):
            bad.append(expr)
        elif isinstance(expr, tirx.Broadcast) and dtype.lanes > _MAX_SPREAD and \
                str(dtype.with_lanes(1)) not in _PAIRED_BROADCAST:
            bad.append(expr)
        return expr

    tvm_ffi.structural_map(stmt, [(tvm.ir.TensorLoad, on_access), (tirx.BufferStore, on_access)])
    tvm_ffi.structural_map(stmt, [(tirx.Expr, on_expr)])
    return not bad


def split_lanes(loop: Any, lanes: int) -> Any:
    """``loop`` (vectorized, ``extent`` a multiple of ``lanes``) as an unrolled loop over
    vectorized loops of ``lanes`` lanes (a plain unrolled loop for 1 lane)."""
    extent = _constant(loop.extent)
    dtype = str(loop.loop_var.ty.dtype)
    if lanes == extent:
        return loop
    outer = tirx.Var(f"{loop.loop_var.name}_outer", dtype)
    if lanes == 1:
        body = substitute(loop.body, [(loop.loop_var, loop.min + outer)])
        return tirx.For(outer, tirx.const(0, dtype), tirx.const(extent, dtype), tirx.ForKind.UNROLLED, body)
    inner = tirx.Var(f"{loop.loop_var.name}_inner", dtype)
    index = loop.min + outer * tirx.const(lanes, dtype) + inner
    body = substitute(loop.body, [(loop.loop_var, index)])
    vector = tirx.For(inner, tirx.const(0, dtype), tirx.const(lanes, dtype), tirx.ForKind.VECTORIZED, body)
    return tirx.For(outer, tirx.const(0, dtype), tirx.const(extent // lanes, dtype), tirx.ForKind.UNROLLED, vector)


def _vectorized(stmt: Any) -> Optional[Any]:
    """``stmt`` after TVM's ``VectorizeLoop`` (None when the vectorizer refuses it)."""
    mod = tvm.IRModule({"f": tirx.PrimFunc([], stmt)})
    try:
        return tirx.transform.VectorizeLoop(True)(mod)["f"].body
    except Exception:  # noqa: BLE001 - TVM's refusal; the pipeline's own run reports it
        return None


def _has_inner_vector(body: Any) -> bool:
    return any(loop.kind == tirx.ForKind.VECTORIZED for loop in collect(body, tirx.For))


def _split_if_needed(loop: Any) -> Any:
    extent = _constant(loop.extent)
    step = getattr(loop, "step", None)
    if extent is None or extent < 2 or (step is not None and _constant(step) != 1) or _has_inner_vector(loop.body):
        return loop
    # Wider vectors never print right, and 65536 lanes or more wrap to fewer (module docstring).
    widest = min(extent, _WIDEST_PRINTABLE)
    for lanes in [d for d in range(widest, 0, -1) if extent % d == 0]:
        candidate = split_lanes(loop, lanes)
        vectorized = _vectorized(candidate)
        if lanes == 1 or (vectorized is not None and printable(vectorized)):
            return candidate
    return loop


def SplitWideVectors() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Vectorized loops of CUDA kernels split into vectors of as many lanes as print right (module docstring)."""

    def on_for(loop: Any) -> Any:
        return _split_if_needed(loop) if loop.kind == tirx.ForKind.VECTORIZED else loop

    def transform(func, mod, ctx):  # noqa: ARG001
        target = func.attrs.get("target") if func.attrs is not None else None
        if target is None or target.kind.name != "cuda":
            return func
        body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)])
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.SplitWideVectors")


def chunk_lanes(loop: Any, lanes: int) -> Any:
    """``loop`` (vectorized, constant ``extent`` above ``lanes``, step 1) as a serial loop over
    ``extent // lanes`` vectorized loops of ``lanes`` lanes, then the ``extent % lanes`` lanes left
    (a vectorized loop, or the body itself for one lane). The left-over lanes are a second copy of
    the body: run ``ConvertSSA`` after it (:func:`VectorLoopsForLlvm` does)."""
    extent = _constant(loop.extent)
    dtype = str(loop.loop_var.ty.dtype)
    chunks, left = divmod(extent, lanes)
    outer = tirx.Var(f"{loop.loop_var.name}_chunk", dtype)
    inner = tirx.Var(f"{loop.loop_var.name}_lane", dtype)
    index = loop.min + outer * tirx.const(lanes, dtype) + inner
    body = substitute(loop.body, [(loop.loop_var, index)])
    vector = tirx.For(inner, tirx.const(0, dtype), tirx.const(lanes, dtype), tirx.ForKind.VECTORIZED, body,
                      None, loop.annotations)
    serial = tirx.For(outer, tirx.const(0, dtype), tirx.const(chunks, dtype), tirx.ForKind.SERIAL, vector)
    if left == 0:
        return serial
    start = loop.min + tirx.const(chunks * lanes, dtype)
    if left == 1:
        return tirx.SeqStmt([serial, substitute(loop.body, [(loop.loop_var, start)])])
    rest = tirx.Var(f"{loop.loop_var.name}_left", dtype)
    tail = tirx.For(rest, tirx.const(0, dtype), tirx.const(left, dtype), tirx.ForKind.VECTORIZED,
                    substitute(loop.body, [(loop.loop_var, start + rest)]), None, loop.annotations)
    return tirx.SeqStmt([serial, tail])


def rebased(loop: Any) -> Any:
    """``loop`` (vectorized) as a loop from 0 whose body reads ``min +`` its variable."""
    dtype = str(loop.loop_var.ty.dtype)
    var = tirx.Var(loop.loop_var.name, dtype)
    body = substitute(loop.body, [(loop.loop_var, loop.min + var)])
    return tirx.For(var, tirx.const(0, dtype), loop.extent, tirx.ForKind.VECTORIZED, body, None, loop.annotations)


def _llvm_ready(loop: Any, lanes: int) -> Any:
    """An innermost vectorized loop of step 1 and a constant extent in chunks of at most ``lanes``
    lanes (:func:`chunk_lanes`), or from 0 (:func:`rebased`); any other loop as it is."""
    extent = _constant(loop.extent)
    step = getattr(loop, "step", None)
    if loop.kind != tirx.ForKind.VECTORIZED or extent is None or (step is not None and _constant(step) != 1) \
            or _has_inner_vector(loop.body):
        return loop
    if extent > lanes:
        return chunk_lanes(loop, lanes)
    return loop if _constant(loop.min) == 0 else rebased(loop)


def VectorLoopsForLlvm(lanes: int = LLVM_MAX_LANES) -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Vectorized loops of more than ``lanes`` lanes split into chunks of ``lanes``, narrower ones
    that do not start at 0 rebased (module docstring; ``llvm``: vectors of 32768 lanes or more were
    refused, wrapped or stopped the process, a start other than 0 was refused)."""

    def on_for(loop: Any) -> Any:
        return _llvm_ready(loop, lanes)

    def transform(func, mod, ctx):  # noqa: ARG001
        body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)])
        if body.same_as(func.body):
            return func
        # the left-over lanes repeat the body's variables: each gets its own again
        return tirx.transform.ConvertSSA()(tvm.IRModule({"f": func.with_body(body)}))["f"]

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.VectorLoopsForLlvm")


def RunTimeVectorsSerial() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """``T.vectorized`` loops whose extent is known only at run time (``T.vectorized(n)`` of a
    ``T.dynamic`` size) become serial loops, right before ``VectorizeLoop``.

    TVM's vectorizer makes vectors of a constant number of lanes (a run-time count needs a
    scalable-vector target), and it stopped such a kernel on llvm and CUDA with "Failed to
    vectorize loop with extent n". The lanes of a vectorized loop are independent, so running them
    one after another gives the same values; the C target already did so (its vectorized loops are
    serial under ``#pragma omp simd``), and the C and LLVM compilers still vectorize the loop.
    A loop whose extent simplified to 0 or less (``T.vectorized(bx)`` in a one-block grid, where
    ``bx`` is 0) runs no iteration; it too becomes serial (the vectorizer stopped with "Failed to
    vectorize loop with extent 0"). So does a vectorized loop that holds another one (nested
    ``T.vectorized``): the innermost stays a vector, the loops around it run its vectors one after
    another (TVM's vectorizer warned "Detect vectorize inside vectorized loop, ignoring", left the
    inner loop as it was, and ``llvm`` stopped with "cannot handle for type vectorized").
    """

    def no_constant_lanes(loop: Any) -> bool:
        lanes = _constant(loop.extent)
        inner_vectors = any(inner.kind == tirx.ForKind.VECTORIZED for inner in collect(loop.body, tirx.For))
        return lanes is None or lanes < 1 or inner_vectors

    return serial_vectors_pass(no_constant_lanes, "tl.RunTimeVectorsSerial")


def serial_vectors_pass(make_serial: Any, name: str) -> tvm.transform.Pass:
    """A pass that makes each ``T.vectorized`` loop for which ``make_serial(loop)`` holds a serial
    loop (the same body, variable, bounds and annotations)."""

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.VECTORIZED or not make_serial(loop):
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body,
                        loop.thread_binding, loop.annotations, getattr(loop, "step", None))

    def transform(func, mod, ctx):  # noqa: ARG001
        body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)])
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name=name)
