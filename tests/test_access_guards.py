"""Accesses of global memory outside their tensor are skipped (stores, atomics) or read 0 (loads).

lowering/access_guards.py: in serial loops and straight-line kernel code too, not only in
``T.Parallel``; a store past a tensor's edge would otherwise corrupt the memory after it. Each
tensor below is a view into a larger one whose tail holds canaries, so a stray store shows.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge, the GPU emulator

CANARY = 123.0


def _with_canaries(n: int, fill: float = 0.0, dtype=torch.float32):
    """``(view of n elements, the whole storage)``: the 64 elements after the view are canaries."""
    storage = torch.full((n + 64,), CANARY, dtype=dtype)
    storage[:n] = fill
    return storage[:n], storage


def _serial_tail(n: int, block: int = 32):
    """Each block copies ``block`` elements with a serial loop: the last block crosses the edge."""

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for j in T.serial(block):
                B[bx * block + j] = A[bx * block + j] + 1.0

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_serial_loop_across_the_edge_neither_reads_nor_writes_outside(path):
    """Before: the last block stored 28 elements past B (into the canaries) and read past A."""
    kernel = compile_on(_serial_tail(100), path)
    a = torch.randn(100)
    b, storage = _with_canaries(100)
    kernel(a, b)
    torch.testing.assert_close(b, a + 1.0)
    assert torch.all(storage[100:] == CANARY)


def _dynamic_serial_tail(block: int = 16):
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for j in T.serial(block):
                B[bx * block + j] = A[bx * block + j] * 3.0

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("n", [1, 16, 37])
def test_dynamic_shape_serial_tail_stays_inside(path, n):
    kernel = compile_on(_dynamic_serial_tail(), path)
    a = torch.randn(n)
    b, storage = _with_canaries(n)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3.0)
    assert torch.all(storage[n:] == CANARY)


def _loads_past_the_edge(n: int, block: int = 8):
    """Loads past A's edge read 0: the last block's sum counts only the elements inside A."""

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), S: T.Tensor((T.ceildiv(n, block),), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            acc = T.alloc_var("float32", init=0.0)
            for j in T.serial(block):
                acc = acc + A[bx * block + j]
            S[bx] = acc

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_loads_outside_a_tensor_read_zero(path):
    n = 21
    kernel = compile_on(_loads_past_the_edge(n), path)
    # A is a view whose storage continues with large values: an unguarded read would add them
    a, storage = _with_canaries(n)
    a.copy_(torch.randn(n))
    s = torch.zeros(3)
    kernel(a, s)
    expected = torch.nn.functional.pad(a, (0, 3)).view(3, 8).sum(dim=1)
    torch.testing.assert_close(s, expected)


def _histogram(n: int, bins: int):
    """An atomic histogram over indices read from memory, some of them outside ``H``."""

    @T.prim_func
    def k(Idx: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "float32")):
        with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
            for i in T.Parallel(16):
                T.atomic_add(H[Idx[bx * 16 + i]], 1.0)

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_atomics_at_indices_outside_the_tensor_are_skipped(path):
    """``T.atomic_add(H[idx[i]], 1)`` with idx values below 0 and past the last bin: those updates
    are skipped (before: written into the memory around H); the index is read once per element."""
    n, bins = 48, 5
    kernel = compile_on(_histogram(n, bins), path)
    idx = torch.randint(-3, bins + 3, (n,), dtype=torch.int32)
    h, storage = _with_canaries(bins)
    kernel(idx, h)
    inside = idx[(idx >= 0) & (idx < bins)].long()
    torch.testing.assert_close(h, torch.bincount(inside, minlength=bins).float())
    assert torch.all(storage[bins:] == CANARY)


def _atomic_prev(n: int):
    @T.prim_func
    def k(H: T.Tensor((n,), "float32"), P: T.Tensor((n + 4,), "float32")):
        with T.Kernel(1) as _:
            for j in T.serial(n + 4):
                P[j] = T.atomic_add(H[j], 1.0, return_prev=True)

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_atomic_value_outside_the_tensor_is_zero(path):
    """``return_prev=True`` outside the tensor: no update, and the returned value is 0."""
    kernel = compile_on(_atomic_prev(6), path)
    h, storage = _with_canaries(6, fill=2.0)
    p = torch.full((10,), -1.0)
    kernel(h, p)
    assert torch.all(h == 3.0)
    torch.testing.assert_close(p, torch.tensor([2.0] * 6 + [0.0] * 4))
    assert torch.all(storage[6:] == CANARY)


def _safe_value_in_serial_code(n: int):
    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n + 3,), "float32")):
        with T.Kernel(1) as _:
            T.annotate_safe_value({A: -5.0})
            for j in T.serial(n + 3):
                B[j] = A[j]

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_annotated_safe_value_holds_outside_parallel_loops(path):
    kernel = compile_on(_safe_value_in_serial_code(4), path)
    a = torch.randn(4)
    b = torch.zeros(7)
    kernel(a, b)
    torch.testing.assert_close(b, torch.cat([a, torch.full((3,), -5.0)]))


def _ifs(source: str) -> int:
    return len(re.findall(r"\bif \(", source))


def test_no_guard_where_the_ranges_prove_the_access_inside():
    """Tiles that divide the shape: no condition at all (the loops keep their vectorizable form)."""
    source = compile_on(_serial_tail(128), CYTHON_C).get_kernel_source()
    assert _ifs(source) == 0, source


def test_an_explicit_bounds_check_is_not_repeated():
    """A kernel (or a tile operator) that checks the index itself gets no second condition."""

    @T.prim_func
    def k(A: T.Tensor((100,), "float32"), B: T.Tensor((100,), "float32")):
        with T.Kernel(4) as bx:
            for j in T.serial(32):
                if bx * 32 + j < 100:
                    B[bx * 32 + j] = A[bx * 32 + j]

    source = compile_on(k, CYTHON_C).get_kernel_source()
    assert _ifs(source) == 1 and "condval" not in source, source


@pytest.fixture(scope="module")
def cuda_sources():
    from tilelang_core.lowering import lower

    return {"histogram": lower(_histogram(48, 5), target="cuda"),
            "dynamic_tail": lower(_dynamic_serial_tail(), target="cuda")}


def test_cuda_sources_carry_the_guards(cuda_sources):
    hist = cuda_sources["histogram"].device_source
    assert re.search(r"if \(\(0 <= guarded_index\) && \(guarded_index < 5\)\)", hist), hist


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_sources, tmp_path):
    CU.compile_translation_units(cuda_sources, tmp_path)


@CU.emulator
def test_emulated_gpu_histogram_skips_indices_outside(cuda_sources, tmp_path):
    """The CUDA kernel run on the emulated GPU of tests/test_tileops_cuda.py (no GPU here)."""
    run = CU._emulated(cuda_sources["histogram"], tmp_path)
    idx = torch.randint(-3, 8, (48,), dtype=torch.int32)
    h, storage = _with_canaries(5)
    run(idx, h)
    inside = idx[(idx >= 0) & (idx < 5)].long()
    torch.testing.assert_close(h, torch.bincount(inside, minlength=5).float())
    assert torch.all(storage[5:] == CANARY)


def test_the_guards_can_be_turned_off_by_the_upstream_pass_config():
    """``tl.disable_safe_memory_legalize`` (upstream's key): the kernel's own accesses are left as
    written, for kernels whose indices are known to be inside."""
    import tilelang

    func = _serial_tail(100)
    guarded = tilelang.compile(func, target="c").get_kernel_source()
    plain = tilelang.compile(func, target="c", pass_configs={"tl.disable_safe_memory_legalize": True}).get_kernel_source()
    assert _ifs(guarded) > 0 and _ifs(plain) == 0, plain


def test_cpu_loop_nests_get_a_guard_free_copy_for_the_blocks_inside():
    """A dynamic shape leaves the guard in place, but the loop is versioned: blocks whose whole
    tile is inside the tensor run a copy without it (bench/access_guards.py: LLVM vectorizes that
    copy, the guarded loop it did not)."""
    source = compile_on(_dynamic_serial_tail(), CYTHON_C).get_kernel_source()
    lines = [line.strip() for line in source.splitlines()]
    stores = [k for k, line in enumerate(lines) if line.startswith("B_ptr[")]
    assert len(stores) == 2, source
    guarded = [lines[k - 1].startswith("if (") for k in stores]
    assert sorted(guarded) == [False, True], source
    assert re.search(r"if \(\(?\w+ \+ 15\)? < n\) \{", source), source  # the whole tile is inside


def test_no_versioning_when_a_guard_depends_on_memory():
    """A gather index read from memory: the guard cannot be checked per tile, so one loop."""
    source = compile_on(_histogram(48, 5), CYTHON_C).get_kernel_source()
    assert source.count("tl_atomic_add_f32_relaxed((&(H_ptr[") == 1, source


def _counter_index():
    @T.prim_func
    def k(A: T.Tensor((2,), "float32")):
        with T.Kernel(1) as _:
            c = T.alloc_var("int32", init=0)
            for _j in T.serial(3):
                T.atomic_add(c, 1)
            A[c] = 5.0  # c is 3 here: outside A
            c = 1
            A[c] = 7.0  # c is known to be 1: no guard needed

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_scalar_updated_through_its_address_is_not_taken_for_its_last_value(path):
    """The proofs use the values of per-thread scalars (``c = 1``), but not after an atomic (or an
    extern call) may have changed one through its address."""
    kernel = compile_on(_counter_index(), path)
    a, storage = _with_canaries(2)
    kernel(a)
    assert a.tolist() == [0.0, 7.0]
    assert torch.all(storage[2:] == CANARY)
    if path == CYTHON_C:
        assert _ifs(kernel.get_kernel_source()) == 1


def _tile_2d_reversed(block: int = 8):
    """A 2-D tile across both edges of a dynamic-shape tensor, read in reverse along the rows:
    the guards decrease in one loop variable and increase in the other (the versioned copy's
    condition must take the right corner of the tile)."""
    m, n = T.dynamic("m, n")

    @T.prim_func
    def k(A: T.Tensor((m, n), T.float32), B: T.Tensor((m, n), T.float32)):
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block)) as (bx, by):
            for i, j in T.Parallel(block, block):
                B[by * block + i, bx * block + j] = A[m - 1 - (by * block + i), bx * block + j] + 1.0

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("shape", [(8, 8), (13, 21), (5, 3), (16, 9)])
def test_two_dimensional_tiles_with_reversed_rows(path, shape):
    m, n = shape
    kernel = compile_on(_tile_2d_reversed(), path)
    a = torch.randn(m, n)
    flat, storage = _with_canaries(m * n)
    b = flat.view(m, n)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0) + 1.0)
    assert torch.all(storage[m * n:] == CANARY)


def _assumed_gather():
    """``T.assume`` on a scalar read from memory, then a store into that scalar and into the
    index tensor: the promise covers the statements before each write, not after."""
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), Idx: T.Tensor((4,), "int32"), Out: T.Tensor((4, 3), "float32"),
          lo: T.int32):
        with T.Kernel(1):
            for i in T.serial(4):
                x = T.alloc_var("int32")
                x = Idx[i]
                T.assume(0 <= x and x < n)
                Out[i, 0] = A[x]                  # promised inside: no guard
                x = x + 1
                Out[i, 1] = A[x]                  # x changed: guarded
            for j in T.serial(4):
                T.assume(0 <= lo + j and lo + j < n)
                A[lo + j] = A[lo + j] * 2.0       # promised inside: no guard
            T.assume(Idx[0] < n and Idx[0] >= 0)
            Out[0, 2] = A[Idx[0]]                 # promised inside: no guard
            Idx[0] = Idx[0] + 1000
            Out[1, 2] = A[Idx[0]]                 # Idx changed: guarded

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_assume_removes_the_guards_it_promises(path):
    """The kernel's T.assume drops the guards it proves (TileLang's use of it), until a store
    writes what the condition reads; results stay right where the promise is kept."""
    kernel = compile_on(_assumed_gather(), path)
    a, storage = _with_canaries(10)
    a.copy_(torch.arange(10, dtype=torch.float32))
    idx = torch.tensor([0, 3, 9, 5], dtype=torch.int32)
    out = torch.zeros(4, 3)
    kernel(a, idx, out, 2)
    want_a = torch.arange(10, dtype=torch.float32)
    want_a[2:6] *= 2
    torch.testing.assert_close(a, want_a)
    base = torch.arange(10, dtype=torch.float32)
    torch.testing.assert_close(out[:, 0], base[[0, 3, 9, 5]])
    torch.testing.assert_close(out[:, 1], torch.tensor([1.0, 4.0, 0.0, 6.0]))  # x = 10 is outside: 0
    assert out[0, 2] == 0.0 and out[1, 2] == 0.0  # Idx[0] + 1000 is outside: 0
    assert torch.all(storage[10:] == CANARY)
    if path == CYTHON_C:
        source = kernel.get_kernel_source()
        # one guard for x + 1 and one for Idx[0] + 1000; none where the promises hold
        assert len(re.findall(r"\(0 <= ", source)) == 2, source


def _scalar_in_loop_body():
    """A loop body that allocates a scalar (``T.alloc_var``) and has affine guards: the versioned
    copy must declare its own scalar (C code generation stopped with "Need input to be in SSA
    form dup acc" when both copies declared the same buffer)."""
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32)) as bx:
            for i in T.serial(32):
                acc = T.alloc_var("float32")
                acc = A[bx * 32 + i] * 2.0
                C[bx * 32 + i] = acc + 1.0

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_versioned_loop_with_a_scalar_in_its_body(path):
    kernel = compile_on(_scalar_in_loop_body(), path)
    a = torch.randn(70)
    c, storage = _with_canaries(70)
    kernel(a, c)
    torch.testing.assert_close(c, a * 2.0 + 1.0)
    assert torch.all(storage[70:] == CANARY)
    if path == CYTHON_C:
        source = kernel.get_kernel_source()
        assert len(re.findall(r"float acc\w*\[1\];", source)) == 2, source  # one scalar per copy of the loop


def _tile_histogram(n: int, bins: int = 16):
    """A histogram in a fragment tile and a shared tile, indexed with values read from memory."""

    @T.prim_func
    def k(idx: T.Tensor((n,), "int32"), out: T.Tensor((2, bins), "float32")):
        with T.Kernel(1, threads=1) as bx:
            h = T.alloc_fragment((bins,), "float32")
            s = T.alloc_shared((bins,), "float32")
            T.fill(h, 0.0)
            T.fill(s, 0.0)
            for i in T.serial(n):
                h[idx[i]] = h[idx[i]] + 1.0
                s[idx[i]] += 1.0
            T.copy(h, out[0, :])
            T.copy(s, out[1, :])

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_tile_indices_outside_the_tile_are_skipped_on_cpu(path):
    """Before: an index of 100000 into a 16-element tile killed the process (SIGSEGV), a
    smaller one wrote over the stack; now such a store is skipped, as outside a tensor. The
    call runs in the test's own process: without the guard it would crash it."""
    kernel = compile_on(_tile_histogram(64), path)
    idx = torch.randint(0, 16, (64,), dtype=torch.int32)
    idx[[3, 9, 20, 40]] = torch.tensor([100000, -5000000, 16, -1], dtype=torch.int32)
    out = torch.zeros(2, 16)
    kernel(idx, out)
    inside = idx[(idx >= 0) & (idx < 16)].long()
    expected = torch.bincount(inside, minlength=16).float()
    torch.testing.assert_close(out, torch.stack([expected, expected]))


def test_tile_operators_on_tiles_keep_guard_free_loops():
    """The guards go only where the index is not proven inside: the fills and copies of the tiles
    get none; every condition is about an index read from ``idx``."""
    source = compile_on(_tile_histogram(64), CYTHON_C).get_kernel_source()
    conditions = re.findall(r"\bif \((.*)\) \{", source)
    assert conditions and all("guarded_index" in c or "idx_ptr[i]" in c for c in conditions), source
