"""The correctness check never passes a kernel on output values it did not write.

A kernel with ``out_idx`` allocates its outputs with ``torch.empty``; the allocator hands back
memory freed just before, which often holds the right answer (the previous candidate's output
when the tuner reuses its inputs, a reference's temporary). A kernel that writes half its output
used to pass. The checked call now runs with torch's fill of uninitialized memory (NaN, integers
their largest value): real kernels, the real C compiler, the cython backend.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.autotuner import AutoTuner  # noqa: E402
from tilelang_core.profiler.poison import poisoned_allocations  # noqa: E402

N = 4096


def copy_prefix(n_written: int, dtype: str = "float32"):
    """``C[i] = A[i] + B[i]`` for the first ``n_written`` of N elements: the rest is never written."""

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(1) as _:
            for i in T.serial(n_written):
                C[i] = A[i] + B[i]

    return main


def make(half=0, dtype="float32"):
    return copy_prefix(N // 2 if half else N, dtype)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    AutoTuner.clear_memory()
    yield
    AutoTuner.clear_memory()


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_the_profiler_check_fails_a_kernel_that_leaves_a_freed_right_answer_in_place(dtype):
    full = tilelang.compile(make(0, dtype), out_idx=-1, target="c", execution_backend="cython")
    half = tilelang.compile(make(1, dtype), out_idx=-1, target="c", execution_backend="cython")
    a = torch.arange(N).to(getattr(torch, dtype))
    b = torch.ones(N, dtype=a.dtype)
    expected = a + b  # a reference that allocates nothing at check time (computed once)
    profiler = half.get_profiler()
    # Each round frees a right answer just before the check; the allocator hands it to the half
    # kernel's output in most rounds (17 to 20 of 20 passed the check before the fill).
    for _ in range(10):
        del_after = full(a, b)
        del del_after
        with pytest.raises(AssertionError, match=r"2048 element\(s\) of the kernel's output still hold .* did not"):
            profiler.assert_allclose(lambda x, y: expected, input_tensors=[a, b])
    full.get_profiler().assert_allclose(lambda x, y: expected, input_tensors=[a, b])  # a full write passes
    assert not torch.are_deterministic_algorithms_enabled()  # the fill is for the checked call only


def test_tuning_with_cached_inputs_skips_a_config_that_writes_half_its_output():
    memo = {}

    def ref(a, b):  # inputs are cached, so the reference computes once: nothing allocated later
        return memo.setdefault((a.data_ptr(), b.data_ptr()), a + b)

    result = (
        AutoTuner.from_kernel(make, [{"half": 0}, {"half": 1}])
        .set_compile_args(out_idx=-1, target="c", execution_backend="cython")
        .set_profile_args(warmup=1, rep=3, ref_prog=ref, cache_input_tensors=True)
        .run(progress=False)
    )
    status = {t.index: (t.status, t.reason) for t in result.trials}
    assert status[0][0] == "ok"
    assert status[1][0] == "wrong_result" and "2048 of 4096 elements" in status[1][1], status[1]
    assert result.config == {"half": 0}


def test_the_fill_restores_the_callers_torch_settings_and_counts_threads():
    import threading

    import torch.utils.deterministic as fill

    old = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
           fill.fill_uninitialized_memory)
    try:
        fill.fill_uninitialized_memory = False
        with poisoned_allocations():
            assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
            assert torch.isnan(torch.empty(8)).all() and (torch.empty(8, dtype=torch.int64) == 2**63 - 1).all()
            inside = threading.Event()
            leave = threading.Event()

            def other():
                with poisoned_allocations():
                    inside.set()
                    leave.wait(10)

            thread = threading.Thread(target=other)
            thread.start()
            inside.wait(10)
        assert torch.are_deterministic_algorithms_enabled()  # the other thread is still inside
        leave.set()
        thread.join(10)
        assert not torch.are_deterministic_algorithms_enabled() and fill.fill_uninitialized_memory is False

        torch.use_deterministic_algorithms(True)  # the caller's strict mode is not weakened to warn_only
        with poisoned_allocations():
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(old[0], warn_only=old[1])
        fill.fill_uninitialized_memory = old[2]


def test_the_fill_leaves_torch_inductor_unloaded_and_sets_its_flag_once_it_is_loaded():
    """torch.use_deterministic_algorithms imports torch._inductor (2.3 s the first time in a
    process, paid by the first checked call of every process): the fill sets torch's flag without
    it, and where inductor is loaded already its own flag follows as well."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from tilelang_core.profiler.poison import poisoned_allocations\n"
        "with poisoned_allocations():\n"
        "    assert torch.are_deterministic_algorithms_enabled() and torch.isnan(torch.empty(4)).all()\n"
        "assert not torch.are_deterministic_algorithms_enabled()\n"
        "print('inductor' if 'torch._inductor' in sys.modules else 'no inductor')\n"
        "import torch._inductor.config as cfg\n"
        "with poisoned_allocations():\n"
        "    assert cfg.deterministic is True and torch.are_deterministic_algorithms_enabled()\n"
        "assert cfg.deterministic is False and not torch.are_deterministic_algorithms_enabled()\n"
        "print('done')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["no", "inductor", "done"]
