"""Tiles and workspaces get the size the kernel needs, on the heap where the stack cannot hold
them (lowering/workspaces.py).

1. A tile of a size known at call time only, ``T.alloc_shared((n, m), "float32")`` (or a
   ``T.alloc_global`` workspace), was allocated with ``4 * (n * m)`` bytes, ``n * m`` computed in
   int32 after ``FlattenBuffer``: for n = m = 65536 that is 0 (``malloc(1)``), for 46341 it is
   negative, and the kernel wrote past the allocation on every CPU path (SIGABRT, SIGSEGV or a
   hang in ``malloc``). The size is now computed in int64 with every step checked, and a call
   whose sizes give more elements than the tile's 32-bit indices reach fails before anything is
   allocated: the C entry returns its workspace status (-2; cython and ctypes raise
   ``RuntimeError('... a workspace ... could not be allocated: ... (error -2)')``, tvm_ffi's C
   module ``MemoryError``, both with the remedy), an ``llvm`` module
   raises ``RuntimeError`` naming the tile, its line, its size and the remedy (int64 sizes), which
   works: a 2 GiB tile of int64 sizes runs. A tile of int64 sizes whose byte count passes int64
   (``(2**22,) * 3``: 2**66 wrapped to 0) fails the call the same way.
2. A large tile declared inside a loop of its block (8 MiB in a ``T.Pipelined`` loop) stayed a
   stack array of the C entry (a segfault on target ``c``, every backend); a run-time sized one
   there was TVM's raw "Can only handle constant size stack allocation". Both come from the heap
   now: allocated once before the loop, or in each iteration where the size depends on the loop.

Every kernel runs in a child process: a crash is a failed test, not the end of the test run.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from backend_pairs import compile_on, cpu_pairs  # noqa: E402
from private_modules import run_in_child  # noqa: E402

PAIRS = cpu_pairs()
C_PAIRS = [p for p in PAIRS if p.values[1] == "c"]

#: Seconds a child may take: before the fix a corrupted heap could hang it in malloc.
CHILD_TIMEOUT = 300

BLOCKS = 4


def _shared_tile():
    """A tile (n, m) of int32 sizes per block; each block writes and reads its last row."""
    n, m = T.dynamic("n m")

    @T.prim_func
    def last_row(B: T.Tensor((n,), "float32"), C: T.Tensor((m,), "float32"), D: T.Tensor((BLOCKS, m), "float32")):
        with T.Kernel(BLOCKS) as bx:
            S = T.alloc_shared((n, m), "float32")
            for j in T.serial(m):
                S[n - 1, j] = C[j] + bx
            for j in T.serial(m):
                D[bx, j] = S[n - 1, j]

    return last_row


def _global_workspace():
    """A workspace (n, m) of int32 sizes for the call; block bx uses row bx."""
    n, m = T.dynamic("n m")

    @T.prim_func
    def row_per_block(B: T.Tensor((n,), "float32"), C: T.Tensor((m,), "float32"), D: T.Tensor((BLOCKS, m), "float32")):
        G = T.alloc_global((n, m), "float32")
        with T.Kernel(BLOCKS) as bx:
            for j in T.serial(m):
                G[bx, j] = C[j] + bx
            for j in T.serial(m):
                D[bx, j] = G[bx, j]

    return row_per_block


def _int64_cube():
    """A tile (n, m, k) of int64 sizes, int8: its last row written and read."""
    n, m, k = T.dynamic("n m k", "int64")

    @T.prim_func
    def cube(B: T.Tensor((n,), "int8"), C: T.Tensor((m,), "int8"), E: T.Tensor((k,), "int8"), D: T.Tensor((k,), "int8")):
        with T.Kernel(1) as _:
            S = T.alloc_shared((n, m, k), "int8")
            for j in T.serial(k):
                S[n - 1, m - 1, j] = E[j] + 1
            for j in T.serial(k):
                D[j] = S[n - 1, m - 1, j]

    return cube


def _int64_plane():
    """A tile (n, m) of int64 sizes, int8: its last row written and read."""
    n, m = T.dynamic("n m", "int64")

    @T.prim_func
    def plane(B: T.Tensor((n,), "int8"), C: T.Tensor((m,), "int8"), D: T.Tensor((m,), "int8")):
        with T.Kernel(1) as _:
            S = T.alloc_shared((n, m), "int8")
            for j in T.serial(m):
                S[n - 1, j] = C[j] + 1
            for j in T.serial(m):
                D[j] = S[n - 1, j]

    return plane


def _pipelined_rowsum(rows: int, cols: int, chunk: int):
    """Row sums through an 8 MiB tile declared inside the ``T.Pipelined`` loop of each block."""

    @T.prim_func
    def rowsum(A: T.Tensor((rows, cols), "float32"), S: T.Tensor((rows,), "float32")):
        with T.Kernel(rows) as bx:
            acc = T.alloc_var("float32", 0)
            for ko in T.Pipelined(cols // chunk, num_stages=1):
                A_s = T.alloc_shared((chunk,), "float32")
                T.copy(A[bx, ko * chunk], A_s)
                for i in T.serial(chunk):
                    acc += A_s[i]
            S[bx] = acc

    return rowsum


def _local_per_round():
    """A tile (n,) declared in a serial loop of each block: rounds r = 0, 1 write it reversed."""
    n = T.dynamic("n")

    @T.prim_func
    def rounds(A: T.Tensor((n,), "float32"), D: T.Tensor((2, 2, n), "float32")):
        with T.Kernel(2) as bx:
            for r in T.serial(2):
                S = T.alloc_local((n,), "float32")
                for j in T.serial(n):
                    S[j] = A[j] * (r + 1) + bx
                for j in T.serial(n):
                    D[bx, r, j] = S[n - 1 - j]

    return rounds


def _local_sized_by_round():
    """A tile (n * r,) declared in the loop over r, whose size changes each round."""
    n = T.dynamic("n")

    @T.prim_func
    def growing(A: T.Tensor((n,), "float32"), D: T.Tensor((2, 3, n), "float32")):
        with T.Kernel(2) as bx:
            for r in T.serial(1, 3):
                S = T.alloc_local((n * r,), "float32")
                for j in T.serial(n * r):
                    S[j] = A[j % n] + r
                for j in T.serial(n):
                    D[bx, r, j] = S[n * r - 1 - j]

    return growing


def _error(call) -> list:
    """``[class name, message]`` of what ``call()`` raised (``[None, None]`` when nothing)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the class is what the test checks
        return [type(exc).__name__, str(exc)]
    return [None, None]


# -- the children's jobs -------------------------------------------------------------------------


def too_large_for_32_bits(backend: str, target: str) -> dict:
    """Each int32-sized kernel called with sizes whose product passes int32, then with small ones."""
    out: dict = {}
    for name, make in (("shared", _shared_tile), ("global", _global_workspace)):
        kernel = compile_on(make(), (backend, target))
        errors = []
        for n in (65536, 46341):  # n * n is 0 / negative in int32
            c = torch.arange(n, dtype=torch.float32)
            errors.append(_error(lambda: kernel(torch.ones(n), c, torch.zeros(BLOCKS, n))))
        c = torch.arange(1000, dtype=torch.float32)
        d = torch.zeros(BLOCKS, 1000)
        kernel(torch.ones(BLOCKS), c, d)
        out[name] = {"errors": errors, "small": torch.equal(d, c + torch.arange(float(BLOCKS))[:, None])}
    return out


def int64_sizes(backend: str, target: str) -> dict:
    """A 2 GiB int8 tile of int64 sizes (runs), and a tile of 2**66 bytes (fails the call)."""
    plane = compile_on(_int64_plane(), (backend, target))
    c = torch.arange(32769).remainder(100).to(torch.int8)
    d = torch.zeros(32769, dtype=torch.int8)
    plane(torch.zeros(65536, dtype=torch.int8), c, d)  # 65536 * 32769 elements: past 2**31
    cube = compile_on(_int64_cube(), (backend, target))
    side = 1 << 22
    big = torch.zeros(side, dtype=torch.int8)
    error = _error(lambda: cube(big, big, big, torch.zeros(side, dtype=torch.int8)))
    e = torch.arange(10).to(torch.int8)
    small = torch.zeros(10, dtype=torch.int8)
    cube(torch.zeros(3, dtype=torch.int8), torch.zeros(5, dtype=torch.int8), e, small)
    return {"plane": torch.equal(d, c + 1), "error": error, "small": torch.equal(small, e + 1)}


def pipelined_rowsum(backend: str, target: str) -> dict:
    """The 8 MiB tile of each block's pipelined loop: the sums, and where the source puts the tile."""
    rows, cols, chunk = 8, 1 << 22, 1 << 21
    kernel = compile_on(_pipelined_rowsum(rows, cols, chunk), (backend, target))
    a = torch.rand(rows, cols).round()  # integer values: every order of the additions is exact
    s = torch.zeros(rows)
    kernel(a, s)
    source = kernel.get_kernel_source() or ""
    return {"sums": torch.equal(s, a.sum(1)), "heap": "A_s_heap" in source,
            "stack": "A_s_ptr[" in source}


def tiles_in_rounds(backend: str, target: str) -> dict:
    """The run-time sized tiles declared in a loop of their blocks, against torch."""
    n = 100_000
    a = torch.randn(n)
    rounds = compile_on(_local_per_round(), (backend, target))
    d = torch.zeros(2, 2, n)
    rounds(a, d)
    want = torch.stack([torch.stack([(a * (r + 1) + b).flip(0) for r in range(2)]) for b in range(2)])
    growing = compile_on(_local_sized_by_round(), (backend, target))
    g = torch.zeros(2, 3, n)
    growing(a, g)
    grown = torch.zeros(2, 3, n)
    for r in (1, 2):
        grown[:, r] = (a.repeat(r) + r).flip(0)[:n]
    return {"rounds": torch.equal(d, want), "growing": torch.equal(g, grown)}


# -- the tests -------------------------------------------------------------------------------------


def _child(job: str, backend: str, target: str) -> dict:
    return run_in_child("test_workspace_sizes", job, backend, target, timeout=CHILD_TIMEOUT)


def _check_refused(error: list, backend: str, target: str, tile: str, size: str) -> None:
    """``error`` is the refusal of a call whose sizes make ``tile`` too large, on ``(backend, target)``."""
    kind, text = error
    assert kind is not None, f"the call ran with a tile of {size}, which cannot be allocated"
    if target == "llvm":
        assert kind == "RuntimeError", error
        assert "test_workspace_sizes.py:" in text, text  # the tile's line
        assert f"the tile '{tile}' of {size}" in text and "is too large for the sizes of this call" in text, text
    elif backend == "tvm_ffi":  # the C entry's status -2 (lowering/c_runtime.py)
        assert kind == "MemoryError" and "a workspace (T.alloc_global, or a tile whose size is known at call time only) could not be allocated" in text, error
        assert "declare the sizes int64" in text, error
    else:  # the status's text from calling.STATUS_TEXTS (cython: its library's __tl_cy_error_string)
        assert kind == "RuntimeError" and "a workspace (T.alloc_global, or a tile whose size is known at call time only) could not be allocated" in text and text.endswith("(error -2)"), error
        assert "declare the sizes int64" in text, error


@pytest.mark.slow
@pytest.mark.parametrize("backend,target", PAIRS)
def test_a_tile_past_32_bit_indices_fails_the_call(backend, target):
    result = _child("too_large_for_32_bits", backend, target)
    for name, tile in (("shared", "S"), ("global", "G")):
        for error in result[name]["errors"]:
            _check_refused(error, backend, target, tile, "n * m float32 elements")
            if target == "llvm":
                assert "32-bit indices" in error[1] and "T.dynamic('n', 'int64')" in error[1], error
        assert result[name]["small"], f"{name}: the next call with small sizes went wrong"


@pytest.mark.slow
@pytest.mark.parametrize("backend,target", PAIRS)
def test_int64_sizes_pass_two_gib_and_a_tile_past_int64_fails_the_call(backend, target):
    result = _child("int64_sizes", backend, target)
    assert result["plane"], "the 2 GiB tile of int64 sizes (the remedy the error names) went wrong"
    _check_refused(result["error"], backend, target, "S", "n * m * k int8 elements")
    if target == "llvm":
        assert "more bytes than int64 counts" in result["error"][1], result["error"]
    assert result["small"], "the next call with small sizes went wrong"


@pytest.mark.slow
@pytest.mark.parametrize("backend,target", C_PAIRS)
def test_a_large_tile_declared_in_a_loop_of_its_block_comes_from_the_heap(backend, target):
    # llvm kept it in TVM's workspace pool already; the C entry made it a stack array
    result = _child("pipelined_rowsum", backend, target)
    assert result["sums"], "wrong row sums"
    assert result["heap"] and not result["stack"], result


@pytest.mark.slow
@pytest.mark.parametrize("backend,target", C_PAIRS)
def test_run_time_sized_tiles_declared_in_a_loop_of_their_block_run(backend, target):
    result = _child("tiles_in_rounds", backend, target)
    assert result == {"rounds": True, "growing": True}, result
