"""``T.PersistentTileScheduler`` on Metal, on the executing stand-in (mps_standin.py).

The scheduler's state (``m_idx``, ``n_idx``, ...) was allocated in scope ``local.var``, which
TVM's Metal code generator does not know: every kernel using it stopped with "Unknown storage
scope `local.var`" (language/tile_schedule.py now allocates it as ``T.alloc_var`` does, ``local``).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

import tilelang

from mps_standin import StandinRuntime, have_cxx

pytestmark = [pytest.mark.skipif(not have_cxx(), reason="g++ is not installed")]

SCHEDULED = '''
import tilelang.language as T


@T.prim_func
def main(A: T.Tensor((6, 4), "int32")):
    with T.Kernel(3, threads=1) as worker:
        sched = T.PersistentTileScheduler(6, 4, num_workers=3)
        sched.init(worker)
        while sched.valid():
            A[sched.m_idx, sched.n_idx] = A[sched.m_idx, sched.n_idx] + 1
            sched.next_tile()
'''


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def test_persistent_scheduler_visits_every_tile_once_with_executing_standin(tmp_path):
    path = tmp_path / "metal_scheduled.py"
    path.write_text(SCHEDULED)
    spec = importlib.util.spec_from_file_location("metal_scheduled", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runtime = StandinRuntime(execute=True, build_dir=tmp_path / "standin")
    kernel = tilelang.compile(module.main, target="metal", execution_backend="metal").runner.with_runtime(runtime)
    assert "local.var" not in tilelang.lower(module.main, target="metal").kernel_source
    visited = torch.zeros(6, 4, dtype=torch.int32)
    kernel(visited)
    assert torch.equal(visited, torch.ones_like(visited))
