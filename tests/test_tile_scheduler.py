"""``T.PersistentTileScheduler``: persistent workers share a 2-D tile grid (language/tile_schedule.py).

Each worker walks ``init(worker)``, ``while valid()``, ``next_tile()``; every tile of the grid
must be visited exactly once, in the order the module documents (traversal order, swizzle
panels, clusters), on every CPU backend and target (compared with a Python model of that
order), and the CUDA source must compile with nvcc.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_scheduler")

CPU_PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


def visit_kernel(m_tiles, n_tiles, workers, swizzle, column_major, cluster):
    rows = -(-m_tiles // cluster)

    @T.prim_func
    def visit(Visited: T.Tensor((rows, n_tiles), T.int32), Order: T.Tensor((rows, n_tiles), T.int32)):
        with T.Kernel(workers, threads=1) as worker:
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=swizzle,
                                              column_major=column_major, cluster_size=cluster)
            sched.init(worker)
            while sched.valid():
                Visited[sched.m_idx, sched.n_idx] += 1
                Order[sched.m_idx, sched.n_idx] = sched.linear_idx * 100 + sched.current_iter
                sched.next_tile()

    return visit


def model(m_tiles, n_tiles, workers, swizzle, column_major, cluster) -> dict:
    """(m, n) -> linear tile number, from the order language/tile_schedule.py documents."""
    rows = -(-m_tiles // cluster)
    fast_n, slow_n = (rows, n_tiles) if column_major else (n_tiles, rows)
    order = {}
    tile = 0
    for first in range(0, slow_n, swizzle):  # panels of the slow axis
        width = min(swizzle, slow_n - first)
        for fast in range(fast_n):
            for slow in range(first, first + width):
                order[(fast, slow) if column_major else (slow, fast)] = tile
                tile += 1
    return order


CASES = [
    (4, 2, 1, 1, True, 1),
    (5, 7, 3, 2, True, 1),
    (6, 9, 4, 4, False, 1),
    (7, 5, 2, 3, False, 2),
    (8, 3, 5, 1, True, 2),
]


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
@pytest.mark.parametrize("case", CASES, ids=[f"{m}x{n}-w{w}-s{s}-{'col' if c else 'row'}-c{k}" for m, n, w, s, c, k in CASES])
def test_every_tile_once_in_the_documented_order(backend, target, case):
    m_tiles, n_tiles, workers, swizzle, column_major, cluster = case
    kernel = tilelang.compile(visit_kernel(*case), target=target, execution_backend=backend)
    rows = -(-m_tiles // cluster)
    visited = torch.zeros(rows, n_tiles, dtype=torch.int32)
    order = torch.full((rows, n_tiles), -1, dtype=torch.int32)
    kernel(visited, order)
    assert torch.equal(visited, torch.ones_like(visited)), visited
    expected = torch.empty_like(order)
    for (m, n), tile in model(*case).items():
        expected[m, n] = tile * 100 + tile // workers  # the worker's iteration: tile // workers
    assert torch.equal(order, expected), (order, expected)


def test_stateless_decoding_in_a_wave_loop():
    m_tiles, n_tiles, workers = 5, 6, 4
    waves = -(-m_tiles * n_tiles // workers)

    @T.prim_func
    def waves_kernel(Visited: T.Tensor((m_tiles, n_tiles), T.int32)):
        with T.Kernel(workers, threads=1) as worker:
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=2, stateful=False)
            for w in T.serial(waves):
                bx, by = sched.coord(w * workers + worker)
                if w * workers + worker < m_tiles * n_tiles:
                    Visited[bx, by] += 1

    assert "local.var" not in waves_kernel.script()  # no state
    kernel = tilelang.compile(waves_kernel, target="c")
    visited = torch.zeros(m_tiles, n_tiles, dtype=torch.int32)
    kernel(visited)
    assert torch.equal(visited, torch.ones_like(visited))


def test_the_state_is_named_after_the_variable():
    script = visit_kernel(4, 2, 1, 1, True, 1).script()
    for field in ("m_idx", "n_idx", "linear_idx", "current_iter"):
        assert f"sched_{field}" in script
    assert "while sched_linear_idx < 8" in script


def test_num_workers_is_required():
    with pytest.raises(LoweringError, match=r"test_tile_scheduler.py:\d+: T.PersistentTileScheduler: num_workers is required"):

        @T.prim_func
        def no_workers(A: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=1) as worker:
                sched = T.PersistentTileScheduler(2, 2)
                sched.init(worker)


@pytest.mark.parametrize("field,value", [("swizzle_size", 0), ("cluster_size", 2.5)])
def test_bad_sizes_are_refused(field, value):
    with pytest.raises(LoweringError, match=rf"{field} must be an int of at least 1, got {value}"):

        @T.prim_func
        def bad(A: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=1) as worker:
                sched = T.PersistentTileScheduler(2, 2, num_workers=2, **{field: value})
                sched.init(worker)


def test_a_stateless_scheduler_has_no_state():
    with pytest.raises(LoweringError, match=r"made with stateful=False has no m_idx; use coord\(tile\)"):

        @T.prim_func
        def stateless(A: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=1) as worker:
                sched = T.PersistentTileScheduler(2, 2, num_workers=2, stateful=False)
                A[0] = sched.m_idx


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_scheduler_cuda_source_compiles_with_nvcc(tmp_path):
    CU.compile_translation_units({"visit": lower(visit_kernel(7, 5, 2, 3, False, 2), target="cuda")}, tmp_path)
