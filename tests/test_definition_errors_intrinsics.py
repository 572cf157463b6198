"""Wrong operands of the TileLang compatibility intrinsics (fast math, IEEE rounding, align_up,
dp4a, warp votes and shuffles, __ldg, atomics' return_prev, T.alloc_global) and of element
stores, found by fuzzing kernel definitions: each is a LoweringError at the kernel's line that
names the operator, the operand, what was expected and what was given. Before, a buffer given to
``T.__exp`` or ``T.ieee_add`` failed when lowering with TVM's FFI signature and no line, ``T.align_up``
with ``None`` crashed the process, a ``mask=None`` of a warp vote was "Cannot dispatch a null
expression", and buffers, strings or floats given to shuffles, ``T.match_any_sync`` and
``T.__ldg`` were compiled without a word (as were ``width=-1``, ``return_prev="x"`` and a
``T.dp4a`` operand of 2 elements)."""

from __future__ import annotations

import pathlib
import sys

import pytest
import tilelang.language as T

from tilelang_core.errors import LoweringError

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from source_lines import marked_line, message_at  # noqa: E402
_SCALAR = "must be a scalar expression (a number, an element A[i], a T.alloc_var)"


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


def _message(build, marker: str, error: type = LoweringError) -> str:
    """The message of the LoweringError (an ``error``) raised while defining a kernel, without its
    ``file:line: `` prefix (checked to be the marked line)."""
    return message_at(_THIS, marker, build, error, raised=LoweringError)


def test_math_intrinsics_refuse_a_buffer_operand():
    def fast():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((16,), "float32")
                A[0] = T.__exp(S)  # <fast-buffer>

    assert _message(fast, "fast-buffer", TypeError) == (
        f"T.__exp: the operand x {_SCALAR}, got the buffer S (16,) float32 (index it, S[...], for one element)")

    def ieee():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((2, 8), "float32")
                A[0] = T.ieee_add(A[1], S, "rz")  # <ieee-buffer>

    assert _message(ieee, "ieee-buffer", TypeError) == (
        f"T.ieee_add: the operand y {_SCALAR}, got the buffer S (2, 8) float32 (index it, S[...], for one element)")


def test_align_up_needs_integers_and_a_positive_alignment():
    def none():
        @T.prim_func
        def k(A: T.Tensor((16,), "int32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.align_up(A[1], None)  # <align-none>

    assert _message(none, "align-none", TypeError) == f"T.align_up: y (the alignment) {_SCALAR}, got NoneType None"

    def float_x():
        @T.prim_func
        def k(A: T.Tensor((16,), "int32"), D: T.Tensor((16,), "float64")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.align_up(D[0], 8)  # <align-float>

    assert _message(float_x, "align-float", TypeError) == (
        "T.align_up: x must be an int or an integer expression, got the float64 expression D[0]")

    def zero():
        @T.prim_func
        def k(A: T.Tensor((16,), "int32")):
            with T.Kernel(1, threads=1) as _:
                A[0] = T.align_up(A[1], 0)  # <align-zero>

    assert _message(zero, "align-zero", ValueError) == "T.align_up: y (the alignment) must be at least 1, got 0"


def test_warp_votes_and_shuffles_check_their_operands():
    def mask_none():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as _:
                B[0] = T.all_sync(A[0] > 0, mask=None)  # <mask-none>

    assert _message(mask_none, "mask-none", TypeError) == f"T.all_sync: mask {_SCALAR}, got NoneType None"

    def mask_float():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                A[0] = T.shfl_up(A[1], 2, mask=1.5)  # <mask-float>

    assert _message(mask_float, "mask-float", TypeError) == (
        "T.shfl_up: mask must be a lane mask: an int such as 0xFFFFFFFF (every lane) or an integer expression, "
        "got float 1.5")

    def value_buffer():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                S = T.alloc_shared((32,), "float32")
                A[0] = T.shfl_sync(S, 0)  # <shfl-buffer>

    assert _message(value_buffer, "shfl-buffer", TypeError) == (
        f"T.shfl_sync: the value {_SCALAR}, got the buffer S (32,) float32 (index it, S[...], for one element)")

    def lane_float():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), H: T.Tensor((32,), "float16")):
            with T.Kernel(1, threads=32) as _:
                A[0] = T.shfl_sync(A[1], H[0])  # <shfl-lane>

    assert _message(lane_float, "shfl-lane", TypeError) == (
        "T.shfl_sync: srcLane must be an int or an integer expression, got the float16 expression H[0]")

    def width():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                A[0] = T.shfl_xor(A[1], 1, width=-1)  # <shfl-width>

    assert _message(width, "shfl-width", ValueError) == (
        "T.shfl_xor: width must be a power of two from 1 to 32 (lanes per shuffle group), got -1")

    def match_string():
        @T.prim_func
        def k(B: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as _:
                B[0] = T.cast(T.match_any_sync("x"), "int32")  # <match-str>

    assert _message(match_string, "match-str", TypeError) == f"T.match_any_sync: the value {_SCALAR}, got str 'x'"

    def ldg_element_and_index():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                B[0] = T.__ldg(A[0], 3)  # <ldg-index>

    assert _message(ldg_element_and_index, "ldg-index", ValueError) == (
        "T.__ldg: an index is given only with a buffer (T.__ldg(x, i)); the first operand is the float32 "
        "expression A[0], so give it alone (T.__ldg(x[i])), got the index int 3")


def test_dp4a_operands_reach_four_elements():
    def short():
        @T.prim_func
        def k(Q: T.Tensor((4, 8), "int8"), C: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                T.dp4a(Q[0, 0:2], Q[1, 0:4], C[0])  # <dp4a-short>

    assert _message(short, "dp4a-short") == (
        "T.dp4a(Q[0, 0:2], Q[1, 0:4], C[0]): A must reach 4 int8 elements along its last dimension, but the "
        "region Q[0, 0:2] has 2; give A[..., k:k + 4] or the first element A[..., k]")

    def end_of_row():
        @T.prim_func
        def k(Q: T.Tensor((4, 8), "int8"), C: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                T.dp4a(Q[0, 0], Q[1, 6], C[0])  # <dp4a-end>

    assert _message(end_of_row, "dp4a-end") == (
        "T.dp4a(Q[0, 0], Q[1, 6], C[0]): B must reach 4 int8 elements along its last dimension: from index 6 "
        "the last dimension of 'Q' (8) has only 2; start at most at 4")


def test_atomic_return_prev_must_be_a_bool():
    def rmw():
        @T.prim_func
        def k(M: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_and(M[0], M[1], return_prev="x")  # <and-prev>

    assert _message(rmw, "and-prev", TypeError) == "T.atomic_and(M[0], M[1]): return_prev must be True or False, got 'x'"

    def addx2():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_addx2(B[0:2], A[0:2], return_prev=None)  # <x2-prev>

    assert _message(addx2, "x2-prev", TypeError) == (
        "T.atomic_addx2(B[0:2], A[0:2]): return_prev must be True or False, got None")


def test_alloc_global_checks_dtype_and_shape():
    def dtype():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            G = T.alloc_global((16,), "rz")  # <global-dtype>
            with T.Kernel(1, threads=1) as _:
                G[0] = A[0]

    assert _message(dtype, "global-dtype", TypeError) == (
        "T.alloc_global: unknown dtype 'rz': expected a dtype string such as 'float32', 'float16', 'int32' "
        "or a constant such as T.float32")

    def shape():
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            G = T.alloc_global((0,), "float32")  # <global-shape>
            with T.Kernel(1, threads=1) as _:
                A[0] = G[0]

    assert _message(shape, "global-shape", ValueError) == (
        "T.alloc_global: shape (0,): every extent must be at least 1, got 0 (a tile needs at least one element)")


def test_alloc_global_on_a_device_source_backend_says_what_to_use():
    from tilelang_core.lowering import lower

    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):  # <global-def>
        G = T.alloc_global((16,), "float32")
        with T.Kernel(1, threads=16) as _:
            for i in T.Parallel(16):
                G[i] = A[i]
            for i in T.Parallel(16):
                B[i] = G[i] * 2.0

    with pytest.raises(LoweringError) as info:
        lower(k, target="cuda")
    assert str(info.value) == (
        f"{_THIS}:{_line_of('global-def')}: the workspace 'G' (T.alloc_global) is allocated by the kernel's host "
        "code, which this backend does not run (it launches the device source alone); compile with an execution "
        "backend that consumes a runtime module (one that runs the host code), or pass the workspace as a tensor "
        "parameter of the kernel")


def test_element_store_with_a_slice_index_and_one_value():
    def sliced():
        @T.prim_func
        def k(B: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                B[0, 0:4] = 1.0  # <store-slice>

    assert _message(sliced, "store-slice") == (
        "B[0, 0:4] = ...: the index 0:4 is a slice, so this stores 4 elements at once, but the value is a single "
        "element (float 1.0); fill them with T.fill(B[0, 0:4], value), or store each element in a loop "
        "(for i in T.Parallel(n): B[..., i] = ...)")

    def open_slice():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                B[0, 2:] = A[0, 0]  # <store-open>

    assert _message(open_slice, "store-open") == (
        "B[0, 2:] = ...: the index 2: is a slice, so this stores its elements at once, but the value is a single "
        "element (the float32 expression A[0, 0]); fill them with T.fill(B[0, 2:], value), or store each element "
        "in a loop (for i in T.Parallel(n): B[..., i] = ...)")


def test_suggested_fill_of_a_slice_runs():
    """What the slice-store message proposes, ``T.fill(B[0, 0:4], 1.0)``, fills those elements (c)."""
    import tilelang
    import torch

    @T.prim_func
    def k(B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=1) as _:
            T.fill(B[0, 0:4], 1.0)

    kernel = tilelang.compile(k, target="c", execution_backend="cython")
    b = torch.zeros(4, 8)
    kernel(b)
    expected = torch.zeros(4, 8)
    expected[0, 0:4] = 1.0
    assert torch.equal(b, expected)


def test_atomic_addx2_element_operands_reach_their_lanes():
    """The element form of ``T.atomic_addx2/x4`` names the first of 2/4 consecutive elements: a
    ``T.alloc_var`` (one element) or an element too close to the row's end read or updated past it."""
    def scalar_value():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                v = T.alloc_var("float32")
                v = A[0, 0]
                T.atomic_addx2(B[0, 0:2], v)  # <x2-var>

    assert _message(scalar_value, "x2-var") == (
        "T.atomic_addx2(B[0, 0:2], v): value v: 'v' has 1 element(s) along its last dimension, but "
        "T.atomic_addx2 reads 2 consecutive elements there; give a region such as X[..., j:j + 2] "
        "(a scalar is not spread over the lanes)")

    def end_of_row():
        @T.prim_func
        def k(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1) as _:
                T.atomic_addx4(B[0, 6], A[0, 0:4])  # <x4-end>

    assert _message(end_of_row, "x4-end") == (
        "T.atomic_addx4(B[0, 6], A[0, 0:4]): destination B[0, 6]: the first of 4 consecutive elements must be at "
        "most at index 4 of the last dimension of 'B' (8), got 6; the update would reach past the row")


def test_ldg_reads_global_memory_only():
    """``T.__ldg`` of a ``T.alloc_var`` or a shared tile was compiled into ``__ldg(&v[0])``: a
    read-only global load of a local or shared address, undefined in CUDA."""
    def local():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                v = T.alloc_var("float32")
                v = A[0]
                B[0] = T.__ldg(v)  # <ldg-local>

    assert _message(local, "ldg-local") == (
        "T.__ldg(v): T.__ldg reads global memory (a kernel parameter or T.alloc_global) through the read-only "
        "data cache, but 'v' is in local memory; read the element directly (v), without T.__ldg")

    def shared():
        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                S = T.alloc_shared((32,), "float32")
                T.copy(A, S)
                B[0] = T.__ldg(S, 3)  # <ldg-shared>

    assert _message(shared, "ldg-shared") == (
        "T.__ldg(S): T.__ldg reads global memory (a kernel parameter or T.alloc_global) through the read-only "
        "data cache, but 'S' is in shared memory; read the element directly (S[3]), without T.__ldg")


def test_finalize_of_a_v2_reducer_without_init_says_how_to_start_it():
    """Dropping ``replication=`` turns a v1 reducer (plain updates, ``T.clear``) into a v2 one; the
    error at ``T.finalize_reducer`` said only "before T.reducer_init"."""
    def no_init():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((16,), "float32", op="sum")
                T.clear(acc)
                for i, j in T.Parallel(16, 16):
                    acc[i] += A[i, j]
                T.finalize_reducer(acc)  # <finalize-v2>

    assert _message(no_init, "finalize-v2") == (
        "T.finalize_reducer(acc): T.finalize_reducer before T.reducer_init of 'acc': a reducer allocated without "
        "replication= is TileLang's v2 form; start it with T.reducer_init(acc) and update it with "
        "T.reducer_update, or give T.alloc_reducer(..., replication='all') for plain updates started by "
        "T.clear/T.fill")


def test_slice_stores_that_match_still_run():
    """A 4-lane value at a 4-element slice, and a one-element slice with one value, still store (llvm)."""
    import tilelang
    import torch

    @T.prim_func
    def k(B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=1) as _:
            B[0, 0:4] = T.Broadcast(T.float32(1.0), 4)
            B[1, 2:3] = 2.0

    kernel = tilelang.compile(k, target="llvm", execution_backend="tvm_ffi")
    b = torch.zeros(4, 8)
    kernel(b)
    expected = torch.zeros(4, 8)
    expected[0, 0:4] = 1.0
    expected[1, 2] = 2.0
    assert torch.equal(b, expected)


def test_alloc_reducer_checks_dtype_and_shape():
    """An unknown reducer dtype was TVM's "unknown dtype" pointing at the first update's line."""
    def dtype():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((16,), "relaxed", op="sum", replication="all")  # <reducer-dtype>
                T.clear(acc)
                for i, j in T.Parallel(16, 16):
                    acc[i] += A[i, j]

    assert _message(dtype, "reducer-dtype", TypeError) == (
        "T.alloc_reducer: unknown dtype 'relaxed': expected a dtype string such as 'float32', 'float16', 'int32' "
        "or a constant such as T.float32")

    def shape():
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as _:
                acc = T.alloc_reducer((0,), "float32", replication="all")  # <reducer-shape>
                T.clear(acc)

    assert _message(shape, "reducer-shape", ValueError) == (
        "T.alloc_reducer: shape (0,): every extent must be at least 1, got 0 (a tile needs at least one element)")
