"""The autotuner on a real blocked CPU matmul (TVM lowering, the C compiler, the default CPU
backend): the choice between configs over 10x apart, failures, a second process, a Dask cluster.

Timing figures (how close the choice is to the fastest config, how fast the second process is)
are printed by bench/autotune.py; these tests check the choice and that nothing is rebuilt.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
from tilelang.autotuner import AutoTuner  # noqa: E402

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import autotune_kernels as K  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    AutoTuner._memory_cache.clear()
    K.matmul_tuned._tuner_cache.clear()
    yield tmp_path / "cache"
    AutoTuner._memory_cache.clear()
    K.matmul_tuned._tuner_cache.clear()


def check_matmul_result(result):
    assert result.config == K.MATMUL_FASTEST
    status = {t.index: (t.status, t.reason) for t in result.trials}
    assert status[0][0] == status[1][0] == "ok"
    assert status[2][0] == "compile_error" and "division or modulo by zero" in status[2][1]
    assert status[3][0] == "wrong_result" and "differ between kernel and reference" in status[3][1]
    assert result.trials[0].latency > result.trials[1].latency
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    torch.testing.assert_close(result.kernel(a, b), a @ b, atol=1e-3, rtol=1e-3)


SECOND_PROCESS = """
import json, sys
sys.path.insert(0, {tests!r})
import tilelang_core.jit.compile as C
import tilelang_core.lowering as L
counts = {{"build": 0, "lower": 0}}
build, lower = C.build_kernel, L.lower
def counting_build(*a, **k):
    counts["build"] += 1
    return build(*a, **k)
def counting_lower(*a, **k):
    counts["lower"] += 1
    return lower(*a, **k)
C.build_kernel, L.lower = counting_build, counting_lower
import autotune_kernels as K
kernel = K.matmul_tuned(128, 128, 128)
print(json.dumps({{"config": kernel.config, **counts}}))
"""


def test_autotune_picks_the_fast_matmul_and_a_second_process_compiles_nothing(cache):
    kernel = K.matmul_tuned(128, 128, 128)
    (result,) = K.matmul_tuned._tuner_cache.values()
    check_matmul_result(result)
    assert kernel is result.kernel and not result.from_cache
    proc = subprocess.run([sys.executable, "-c", SECOND_PROCESS.format(tests=str(TESTS))], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"config": K.MATMUL_FASTEST, "build": 0, "lower": 0}


def test_a_dask_cluster_tunes_the_same_matmul_with_the_same_choice(cache, monkeypatch):
    distributed = pytest.importorskip("distributed")
    import tilelang_core.jit.compile as C

    builds_here = []
    real_build = C.build_kernel
    monkeypatch.setattr(C, "build_kernel", lambda *a, **k: builds_here.append(1) or real_build(*a, **k))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as client:
        result = (
            AutoTuner.from_kernel(K.matmul, K.MATMUL_CONFIGS, cache_key="matmul-dask")
            .set_kernel_parameters(((128, 128, 128), {}))
            .set_profile_args(ref_prog=K.matmul_reference, warmup=2, rep=10, atol=1e-3, rtol=1e-3)
            .run(executor=client.get_executor())
        )
        workers = set(client.scheduler_info()["workers"])
    check_matmul_result(result)
    assert len(workers) == 2
    assert builds_here == []  # the workers built every candidate; this process loaded the best one
    assert result.kernel.cache_key == result.kernel_cache_key
    assert {t.worker.split(":")[0] for t in result.trials} != {""}
    # the stored result is the one a local run with the same arguments reads back (from disk)
    AutoTuner._memory_cache.clear()
    again = (AutoTuner.from_kernel(K.matmul, K.MATMUL_CONFIGS, cache_key="matmul-dask")
             .set_kernel_parameters(((128, 128, 128), {}))
             .set_profile_args(ref_prog=K.matmul_reference, warmup=2, rep=10, atol=1e-3, rtol=1e-3).run())
    assert again.from_cache and again.config == K.MATMUL_FASTEST and again.cache_key == result.cache_key
    assert builds_here == []
