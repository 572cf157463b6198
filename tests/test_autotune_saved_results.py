"""``AutotuneResult.save_to_disk`` / ``load_from_disk``: TileLang's way to keep a tuning result
(autotuner/saved_results.py). They were missing (``AttributeError``); upstream's autotuning guide
uses them. Real tuning, the cython backend, the exported kernel loaded back and called."""

from __future__ import annotations

import json

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner
from tilelang.autotuner.param import AutotuneError, AutotuneResult, CompileArgs


@tilelang.jit(out_idx=[-1])
def _scale(N: int, block: int = 8):
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2

    return k


@pytest.fixture(scope="module")
def tuned():
    AutoTuner._memory_cache.clear()
    return (AutoTuner.from_kernel(_scale, configs=[dict(block=8), dict(block=16)])
            .set_kernel_parameters(((64,), {}))
            .set_compile_args(out_idx=[-1], target="c", execution_backend="cython")
            .run(warmup=1, rep=2, progress=False))


def test_a_saved_result_loads_back_with_its_kernel_ready_to_call(tuned, tmp_path):
    folder = tuned.save_to_disk(tmp_path / "best")
    assert sorted(p.name for p in folder.iterdir()) == ["best_config.json", "kernel", "latency.json",
                                                        "tilelang-tuning-result.json"]
    assert json.loads((folder / "best_config.json").read_text()) == tuned.config
    restored = AutotuneResult.load_from_disk(folder, CompileArgs())
    assert isinstance(restored, AutotuneResult) and restored.from_cache
    assert restored.config == tuned.config and restored.latency == tuned.latency
    a = torch.randn(64)
    torch.testing.assert_close(restored.kernel(a), a * 2)
    tuned.save_to_disk(folder)  # a saved result is replaced
    assert AutotuneResult.load_from_disk(folder).config == tuned.config
    assert [p.name for p in tmp_path.iterdir()] == ["best"]  # nothing left beside it


def test_a_path_that_is_not_a_saved_result_is_left_alone(tuned, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is not a saved tuning result"):
        tuned.save_to_disk(mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    with pytest.raises(AutotuneError, match="is not a saved tuning result"):
        AutotuneResult.load_from_disk(mine)
    with pytest.raises(AutotuneError, match="has no kernel to save"):
        AutotuneResult().save_to_disk(tmp_path / "empty")


def test_upstreams_module_path_is_the_tuners_own_module():
    """``from tilelang.autotuner.param import ...`` loaded a second copy of the module, whose
    ``AutotuneResult`` was not the class the tuner returns (tilelang/__init__.py, _CoreAliasFinder)."""
    import tilelang_core.autotuner.param as core
    import tilelang_core.profiler.supply as supply

    import tilelang.profiler.supply

    assert AutotuneResult is core.AutotuneResult and CompileArgs is core.CompileArgs
    assert tilelang.profiler.supply is supply
