"""Reference kernels of the conformance suite, written in the kernel language.

Each factory returns a fresh ``T.prim_func``; the suite compiles it with ``tilelang.compile`` for
the backend and target under test, through the real lowering pipeline, so a backend is checked
with what users will hand it. One-dimensional kernels run in blocks of :data:`BLOCK` threads, so
the same kernels lower for CPU and GPU targets.
"""

from __future__ import annotations

from typing import Any, Callable

import tilelang_core.language as T

BLOCK = 64


def vadd(N: int = 16) -> Any:
    """``C = A + B`` over ``N`` float32 values (static shape)."""

    @T.prim_func
    def vadd(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    C[bx * BLOCK + i] = A[bx * BLOCK + i] + B[bx * BLOCK + i]

    return vadd


def vadd_dyn() -> Any:
    """``C = A + B`` over ``n`` float32 values (``n`` dynamic)."""
    n = T.dynamic("n")

    @T.prim_func
    def vadd_dyn(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    C[bx * BLOCK + i] = A[bx * BLOCK + i] + B[bx * BLOCK + i]

    return vadd_dyn


def rows() -> Any:
    """``Y = X * S[:, None]`` with X, Y of shape ``(n, 4)`` (one dynamic and one static dimension)."""
    n = T.dynamic("n")

    @T.prim_func
    def rows(X: T.Tensor((n, 4), "float32"), S: T.Tensor((n,), "float32"), Y: T.Tensor((n, 4), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i, j in T.Parallel(BLOCK, 4):
                if bx * BLOCK + i < n:
                    Y[bx * BLOCK + i, j] = X[bx * BLOCK + i, j] * S[bx * BLOCK + i]

    return rows


def pad() -> Any:
    """``Out = [0, A..., 0]``: an output whose length is the expression ``n + 2``."""
    n = T.dynamic("n")

    @T.prim_func
    def pad(A: T.Tensor((n,), "float32"), Out: T.Tensor((n + 2,), "float32")):
        with T.Kernel(T.ceildiv(n + 2, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n + 2:
                    Out[bx * BLOCK + i] = T.if_then_else(
                        bx * BLOCK + i >= 1 and bx * BLOCK + i <= n, A[bx * BLOCK + i - 1], T.float32(0)
                    )

    return pad


def colmajor() -> Any:
    """``Y = X`` where X of shape ``(n, 4)`` has the explicit strides ``(1, n)`` (column-major)."""
    n = T.dynamic("n")

    @T.prim_func
    def colmajor(X: T.Tensor((n, 4), "float32", strides=(1, n)), Y: T.Tensor((n, 4), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i, j in T.Parallel(BLOCK, 4):
                if bx * BLOCK + i < n:
                    Y[bx * BLOCK + i, j] = X[bx * BLOCK + i, j]

    return colmajor


def to_colmajor() -> Any:
    """``Y = X`` where the output Y of shape ``(n, 4)`` has the declared strides ``(1, n)``: an
    ``out_idx`` output the backend must allocate with those strides."""
    n = T.dynamic("n")

    @T.prim_func
    def to_colmajor(X: T.Tensor((n, 4), "float32"), Y: T.Tensor((n, 4), "float32", strides=(1, n))):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i, j in T.Parallel(BLOCK, 4):
                if bx * BLOCK + i < n:
                    Y[bx * BLOCK + i, j] = X[bx * BLOCK + i, j]

    return to_colmajor


def rowstride() -> Any:
    """``Y = X`` where X of shape ``(m, 4)`` has the row stride ``s``, a symbol only that stride gives
    (read from the tensor at call time: backends that declare ``dynamic_strides``)."""
    m, s = T.dynamic("m"), T.dynamic("s")

    @T.prim_func
    def rowstride(X: T.StridedTensor((m, 4), (s, 1), "float32"), Y: T.Tensor((m, 4), "float32")):
        with T.Kernel(T.ceildiv(m, BLOCK), threads=BLOCK) as bx:
            for i, j in T.Parallel(BLOCK, 4):
                if bx * BLOCK + i < m:
                    Y[bx * BLOCK + i, j] = X[bx * BLOCK + i, j]

    return rowstride


def halves() -> Any:
    """``Q *= 2`` and ``K *= 3`` in place, where Q and K of shape ``(m, 4)`` have the row stride 8:
    the two column halves of one ``(m, 8)`` matrix, whose byte ranges meet but which share no byte
    (the q and k halves of a fused projection)."""
    m = T.dynamic("m")

    @T.prim_func
    def halves(Q: T.StridedTensor((m, 4), (8, 1), "float32"), K: T.StridedTensor((m, 4), (8, 1), "float32")):
        with T.Kernel(T.ceildiv(m, BLOCK), threads=BLOCK) as bx:
            for i, j in T.Parallel(BLOCK, 4):
                if bx * BLOCK + i < m:
                    Q[bx * BLOCK + i, j] = Q[bx * BLOCK + i, j] * 2
                    K[bx * BLOCK + i, j] = K[bx * BLOCK + i, j] * 3

    return halves


def iota() -> Any:
    """``A[i] = 3 * i`` where the length ``m`` is a scalar parameter (a symbol bound from a scalar)."""
    m = T.dynamic("m")

    @T.prim_func
    def iota(A: T.Tensor((m,), "int32"), m: m):
        with T.Kernel(T.ceildiv(m, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < m:
                    A[bx * BLOCK + i] = (bx * BLOCK + i) * 3

    return iota


def sumdiff() -> Any:
    """Two outputs: ``S = A + B`` and ``D = A - B`` over ``n`` float32 values."""
    n = T.dynamic("n")

    @T.prim_func
    def sumdiff(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), S: T.Tensor((n,), "float32"),
                D: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    S[bx * BLOCK + i] = A[bx * BLOCK + i] + B[bx * BLOCK + i]
                    D[bx * BLOCK + i] = A[bx * BLOCK + i] - B[bx * BLOCK + i]

    return sumdiff


def scalars() -> Any:
    """``Y[0] = i32 + f32 + flag + u8 + i64 + u64`` (as float64): one scalar of each kind for the error table."""

    @T.prim_func
    def scalars(Y: T.Tensor((1,), "float64"), i32: T.int32, f32: T.float32, flag: T.bool, u8: T.uint8,
                i64: T.int64, u64: T.uint64):
        with T.Kernel(1, threads=1) as bx:
            for i in T.Parallel(1):
                Y[bx + i] = (T.Cast("float64", i32) + T.Cast("float64", f32) + T.Cast("float64", flag)
                             + T.Cast("float64", u8) + T.Cast("float64", i64) + T.Cast("float64", u64))

    return scalars


def fill(dtype: str) -> Any:
    """``A[:] = v`` for a scalar ``v`` of ``dtype`` (``n`` dynamic)."""
    n = T.dynamic("n")
    scalar = getattr(T, dtype)

    @T.prim_func
    def fill(A: T.Tensor((n,), dtype), v: scalar):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    A[bx * BLOCK + i] = v

    return fill


def copy(dtype: str) -> Any:
    """``B = A`` over ``n`` values of ``dtype``."""
    n = T.dynamic("n")

    @T.prim_func
    def copy(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    B[bx * BLOCK + i] = A[bx * BLOCK + i]

    return copy


def ieee() -> Any:
    """IEEE float semantics that value-changing flags (``-ffast-math``) break: ``Clean = A`` with
    NaN replaced by 0 (``A != A`` is true only for NaN), and ``Zeroed = A * 0`` (NaN for an
    infinite or NaN ``A``, ``-0.0`` for a negative one)."""
    n = T.dynamic("n")

    @T.prim_func
    def ieee(A: T.Tensor((n,), "float32"), Clean: T.Tensor((n,), "float32"), Zeroed: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    Clean[bx * BLOCK + i] = T.if_then_else(A[bx * BLOCK + i] != A[bx * BLOCK + i], T.float32(0),
                                                           A[bx * BLOCK + i])
                    Zeroed[bx * BLOCK + i] = A[bx * BLOCK + i] * T.float32(0)

    return ieee


#: The message of :func:`positive`'s assertion.
POSITIVE_MESSAGE = "A must be positive"


def positive() -> Any:
    """``B = A`` after ``T.device_assert(A[i] > 0, ...)`` for each element (a failed assertion
    stops the call: status -3 from a C entry point)."""
    n = T.dynamic("n")

    @T.prim_func
    def positive(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    T.device_assert(A[bx * BLOCK + i] > 0, POSITIVE_MESSAGE)
                    B[bx * BLOCK + i] = A[bx * BLOCK + i]

    return positive


def quotient() -> Any:
    """``C = A // B`` of int32 tensors (a 0 in ``B`` stops the call on CPU targets: status -3
    from a C entry point, lowering/checked_divisions.py)."""
    n = T.dynamic("n")

    @T.prim_func
    def quotient(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32"), C: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    C[bx * BLOCK + i] = A[bx * BLOCK + i] // B[bx * BLOCK + i]

    return quotient


#: Kernel id -> (factory, out_idx). Ids with a dtype are ``"fill:<dtype>"`` / ``"copy:<dtype>"``.
FACTORIES: dict[str, tuple[Callable[[], Any], Any]] = {
    "vadd": (vadd, None),
    "vadd_out": (vadd, [2]),
    "vadd_dyn": (vadd_dyn, [2]),
    "rows": (rows, None),
    "rows_out": (rows, [2]),
    "pad": (pad, None),
    "pad_out": (pad, [1]),
    "colmajor": (colmajor, [1]),
    "rowstride": (rowstride, [1]),
    "to_colmajor": (to_colmajor, [1]),
    "halves": (halves, None),
    "iota": (iota, None),
    "iota_out": (iota, [0]),
    "sumdiff": (sumdiff, [2, 3]),
    "scalars": (scalars, [0]),
    "ieee": (ieee, [1, 2]),
    "positive": (positive, [1]),
    "quotient": (quotient, [2]),
}


def make(kernel_id: str) -> tuple[Any, Any]:
    """``(prim_func, out_idx)`` of a reference kernel id (see :data:`FACTORIES`)."""
    if ":" in kernel_id:
        family, dtype = kernel_id.split(":", 1)
        return {"fill": fill, "copy": copy}[family](dtype), ([1] if family == "copy" else None)
    factory, out_idx = FACTORIES[kernel_id]
    return factory(), out_idx


#: A hand-written ``c`` artifact whose entry returns 7, for backends that consume ``c`` device
#: source (the kernel language cannot make a kernel fail on purpose).
STATUS7_SOURCE = "#include <stdint.h>\nint32_t status7_kernel(float *A) { (void)A; return 7; }\n"


def status7_artifact() -> Any:
    """The artifact of ``status7(A: float32[4])``, whose entry function returns the status 7."""
    from .. import schema
    from ..artifact import KernelArtifact

    return schema.validate_python(KernelArtifact, {
        "name": "status7", "target": "c", "target_kind": "c",
        "params": [{"kind": "tensor", "name": "A", "dtype": "float32", "shape": [4], "device": "cpu"}],
        "device_kernels": [{"name": "status7_kernel", "return_type": "int32",
                            "args": [{"name": "A", "kind": "pointer", "dtype": "float32", "param_index": 0}]}],
        "device_source": STATUS7_SOURCE, "device_language": "c",
    })
