"""Autotuner fixes from a second bug hunt, on real kernels compiled for the CPU (target "c").

* a kernel that writes an input never changes the tensors it is tuned on, and every candidate
  is checked on the original inputs (before: the given tensors changed, and every candidate but
  the first failed as ``wrong_result``);
* a torch tensor passed by keyword to an ``@tilelang.autotune`` function is refused, as
  ``@tilelang.jit`` refuses it (before: keyed by shape only, a later call got another's kernel);
* a ``supply_prog`` that refills the same buffers gets a reference per candidate;
* a run in which the executor lost candidates is not stored;
* a file in place of the timing lock directory times without the lock (with a warning);
* the tuning lock's timeout warning speaks of tuning;
* ``ref_prog``, ``supply_prog`` and ``configs`` errors name the callback; malformed
  ``set_kernel_parameters`` and a non-finite ``timeout`` are refused with a clear message.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import fcntl
import logging
import math
import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.autotuner import AutotuneConfigError, AutoTuner, set_autotune_inputs  # noqa: E402
from tilelang_core.autotuner import CallbackError  # noqa: E402
from tilelang_core.autotuner.candidate import CandidateJob  # noqa: E402
from tilelang_core.autotuner.records import TuningStore  # noqa: E402
from tilelang_core.cache import CacheWarning  # noqa: E402


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A kernel cache of the test's own, and no results tuned by earlier tests in memory."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    AutoTuner.clear_memory()
    yield tmp_path / "cache"
    AutoTuner.clear_memory()


BACKEND = "cython"
CONFIGS = [{"v": 0}, {"v": 1}, {"v": 2}]


def make_increment(n, v=0):
    """``A += 1; C = A * 2`` (writes its input ``A``); ``v`` changes nothing."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                A[i] = A[i] + T.float32(1)
                C[i] = A[i] * T.float32(2) + T.float32(v) * T.float32(0)

    return main


def make_sum(n, v=0):
    """``C = A + B``; ``v`` changes nothing."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                C[i] = A[i] + B[i] + T.float32(v) * T.float32(0)

    return main


def increment_twice(a):
    return (a + 1) * 2


def tuner(fn, configs=CONFIGS, args=(64,), **profile):
    profile = {"warmup": 1, "rep": 2, **profile}
    return (AutoTuner.from_kernel(fn, list(configs))
            .set_kernel_parameters((args, {}))
            .set_compile_args(out_idx=[-1], target="c", execution_backend=BACKEND)
            .set_profile_args(**profile))


def statuses(result):
    return [t.status for t in result.trials]


# -- 1. candidates never write the shared inputs -----------------------------------------------------


def test_a_kernel_writing_its_input_leaves_the_given_tensors_alone_and_every_candidate_passes():
    a = torch.zeros(64)
    with set_autotune_inputs(a):
        result = tuner(make_increment, ref_prog=increment_twice).run(progress=False)
    assert a.eq(0).all(), "tuning wrote the tensor given to set_autotune_inputs"
    assert statuses(result) == ["ok", "ok", "ok"], result.report()


def test_a_kernel_writing_its_input_passes_with_cached_input_tensors():
    result = tuner(make_increment, ref_prog=increment_twice, cache_input_tensors=True).run(progress=False)
    assert statuses(result) == ["ok", "ok", "ok"], result.report()


# -- 2. tensors by keyword -----------------------------------------------------------------------------


@tilelang.autotune(configs=[{"v": 0}, {"v": 1}], warmup=1, rep=2)
@tilelang.jit(out_idx=-1, target="c", execution_backend=BACKEND)
def scaled(n, table, v=0):
    s = float(table[0])

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                C[i] = A[i] * T.float32(s) + T.float32(v) * T.float32(0)

    return main


def test_a_tensor_keyword_argument_is_refused_as_jit_refuses_it():
    with pytest.raises(TypeError, match=r"scaled\(\): pass tensors positionally.*table"):
        scaled(8, table=torch.tensor([1.0]))


# -- 3. a supply_prog refilling its buffers --------------------------------------------------------------


def test_a_supply_prog_refilling_the_same_buffers_gets_a_fresh_reference_per_candidate():
    buffers = [torch.empty(64), torch.empty(64)]

    def supply(params):
        for t in buffers:
            t.uniform_(-1, 1)
        return buffers

    result = tuner(make_sum, ref_prog=lambda a, b: a + b, supply_prog=supply).run(progress=False)
    assert statuses(result) == ["ok", "ok", "ok"], result.report()


# -- 4. an executor that loses candidates ----------------------------------------------------------------


class LosingExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs jobs in threads, except the config ``{"v": 1}``: its worker is "lost"."""

    def submit(self, fn, *args, **kwargs):
        if args and isinstance(args[0], CandidateJob) and args[0].config == {"v": 1}:
            future = concurrent.futures.Future()
            future.set_exception(concurrent.futures.process.BrokenProcessPool("a worker died"))
            return future
        return super().submit(fn, *args, **kwargs)


def test_a_run_in_which_the_executor_lost_candidates_is_not_stored(cache):
    with LosingExecutor(1) as pool, pytest.warns(RuntimeWarning, match="executor did not run 1 of 3"):
        first = tuner(make_sum).run(progress=False, executor=pool)
    assert statuses(first) == ["ok", "error", "ok"] and "executor failed to run it" in first.trials[1].reason
    assert not list((cache / "autotune").glob("*/*.json")), "the incomplete run was stored"
    again = tuner(make_sum).run(progress=False)
    assert not again.from_cache and statuses(again) == ["ok", "ok", "ok"]
    AutoTuner.clear_memory()  # as a later process
    assert tuner(make_sum).run(progress=False).from_cache  # a complete run is stored as before


# -- 5. the timing lock directory ------------------------------------------------------------------------


def test_a_file_in_place_of_the_timing_lock_directory_times_without_the_lock(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"tilelang-timing-{os.getuid()}").write_text("")
    with caplog.at_level(logging.WARNING, logger="tilelang.autotuner"):
        result = tuner(make_sum).run(progress=False)
    assert statuses(result) == ["ok", "ok", "ok"], result.report()
    assert "timing without the device lock: its directory" in caplog.text


# -- 6. the tuning lock's timeout ------------------------------------------------------------------------


def test_the_tuning_lock_timeout_warning_speaks_of_tuning(cache, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_LOCK_TIMEOUT", "0.2")
    t = tuner(make_sum)
    key = t.generate_cache_key()
    store = TuningStore.active()
    store.disk.prepare()
    fd = os.open(store.disk.root / "locks" / f"autotune-{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # "another process" tuning the same key
        with pytest.warns(CacheWarning, match=r"another process has been tuning key .* tuning it here too") as seen:
            result = t.run(progress=False)
    finally:
        os.close(fd)
    assert not any("building the kernel" in str(w.message) for w in seen)
    assert statuses(result) == ["ok", "ok", "ok"]


# -- 7. clear errors -------------------------------------------------------------------------------------


def test_a_ref_prog_that_raises_stops_the_run_naming_ref_prog_after_one_call():
    calls = []

    def broken_ref(a, b):
        calls.append(1)
        return 1 / 0

    with pytest.raises(CallbackError, match=r"ref_prog .*broken_ref raised ZeroDivisionError") as info:
        tuner(make_sum, ref_prog=broken_ref).run(progress=False)
    assert isinstance(info.value.__cause__, ZeroDivisionError) and len(calls) == 1


def test_a_ref_prog_with_the_wrong_signature_is_named():
    with pytest.raises(CallbackError, match=r"ref_prog .* raised TypeError when called with the kernel's 2 input"):
        tuner(make_sum, ref_prog=lambda a: a).run(progress=False)


@pytest.mark.parametrize("returned, message", [
    (None, r"supply_prog .* must return a list of 2 input\(s\) \(A, B\).*got NoneType"),
    ([torch.zeros(64)], r"supply_prog .* must return 2 input\(s\) \(A, B\).*got 1"),
])
def test_a_supply_prog_returning_the_wrong_thing_is_named(returned, message):
    with pytest.raises(CallbackError, match=message):
        tuner(make_sum, supply_prog=lambda params: returned).run(progress=False)


def test_a_configs_callable_that_raises_is_named():
    def configs(n):
        return [{"v": n // 0}]

    t = (AutoTuner.from_kernel(make_sum, configs).set_kernel_parameters(((64,), {}))
         .set_compile_args(out_idx=[-1], target="c", execution_backend=BACKEND))
    with pytest.raises(AutotuneConfigError, match=r"configs .*configs \(called with the kernel arguments \(64,\), \{\}.*raised ZeroDivisionError") as info:
        t.run(progress=False)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("given", [(64,), ((64,), {}, 1), (64, {}), ((64,), 5)])
def test_malformed_kernel_parameters_say_what_is_expected(given):
    with pytest.raises(AutotuneConfigError, match=r"k_parameters must be a pair \(args, kwargs\), e.g. \(\(64,\), \{\}\)"):
        AutoTuner.from_kernel(make_sum, CONFIGS).set_kernel_parameters(given)


@pytest.mark.parametrize("timeout", [math.nan, math.inf])
def test_a_non_finite_timeout_is_refused_where_the_decorator_is_applied(timeout):
    with pytest.raises(AutotuneConfigError, match="timeout must be a finite number of seconds"):
        tilelang.autotune(configs=CONFIGS, timeout=timeout)(tilelang.jit(out_idx=-1, target="c")(make_sum))
