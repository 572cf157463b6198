"""Autotuner fixes from a bug hunt, on real kernels compiled for the CPU (target "c").

* the tuning key covers what a ``functools.partial`` binds and the object of a bound method
  (two partials of one maker shared a key, and the second got the first one's kernel);
* elements a candidate leaves unwritten fail the check whatever ``max_mismatched_ratio`` allows;
* with ``executor=``, a candidate whose call never returns is recorded as ``timeout``;
* a slow ``ref_prog`` is not charged to the candidates (they all timed out);
* ``rep=0`` is accepted (as upstream) and the decorator's options are checked where it is applied;
* ``set_compile_args`` keeps the ``@tilelang.jit`` function's arguments it is not given;
* ``manual_check_prog`` returning False fails the candidate;
* inconsistent stored records are refused, and a config listed twice is marked best once.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.autotuner import AutotuneConfigError, AutotuneError, AutoTuner  # noqa: E402
from tilelang_core.autotuner import tuner as tuner_module  # noqa: E402
from tilelang_core.autotuner.key import Undescribable, describe_value  # noqa: E402
from tilelang_core.autotuner.records import TuningStore  # noqa: E402
from tilelang_core.cache import CacheWarning  # noqa: E402


def make_add(N, block=32, bias=0.0):
    """``C = A + B + bias``, tail guarded."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i] + bias

    return main


def make_add_no_tail(N, block=32):
    """``C = A + B`` on ``N // block`` blocks: the tail is never written when block does not divide N."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def make_spin(N, block=32, spin=0):
    """``C = A + 1``; with ``spin`` > 0 each element first runs ``spin * 2**20`` serial steps (a call
    that does not return within any test: minutes for spin=1000)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                acc = T.alloc_var("float32")
                acc = A[bx * block + i]
                for s in T.serial(spin * 1024):
                    for t in T.serial(1024):
                        acc = acc * 0.999999 + A[(s + t) % N]
                C[bx * block + i] = acc if spin > 0 else A[bx * block + i] + 1

    return main


def plus_one(a):
    return a + 1


class Maker:
    """A kernel maker whose bias is the object's state (a default repr: ``<Maker object at 0x...>``)."""

    def __init__(self, bias):
        self.bias = bias

    def make(self, N, block=32):
        return make_add(N, block, bias=self.bias)


class Opaque:
    """An object known only by its address: a default repr and no attributes."""

    __slots__ = ()

    def make(self, N, block=32):
        return make_add(N, block)


@tilelang.jit(out_idx=-1)
def jit_add(N, block=32):
    return make_add(N, block)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    AutoTuner.clear_memory()
    yield tmp_path / "cache"
    AutoTuner.clear_memory()


def tune(fn, configs=({"block": 16}, {"block": 64}), args=(8,), **profile):
    profile = {"warmup": 1, "rep": 2, **profile}
    return (
        AutoTuner.from_kernel(fn, list(configs))
        .set_kernel_parameters((args, {}))
        .set_compile_args(out_idx=[-1], target="c")
        .set_profile_args(**profile)
        .run(progress=False)
    )


# -- 1. partials and bound methods ------------------------------------------------------------------


def test_partials_binding_other_sizes_get_their_own_kernels():
    results = {}
    for n in (16, 48):
        results[n] = tune(functools.partial(make_add, n), args=())
    assert results[16].cache_key != results[48].cache_key
    for n, result in results.items():
        assert [tuple(p.shape) for p in result.kernel.artifact.params] == [(n,)] * 3
        a = torch.ones(n)
        assert torch.equal(result.kernel(a, a), a + a)
    again = tune(functools.partial(make_add, 16), args=())  # the same partial again: the same result
    assert again.cache_key == results[16].cache_key and again.kernel is results[16].kernel


def test_partial_keywords_and_bound_methods_are_in_the_key():
    a = torch.zeros(8)
    plain = tune(functools.partial(make_add, bias=0.0))
    biased = tune(functools.partial(make_add, bias=5.0))
    assert plain.cache_key != biased.cache_key
    assert plain.kernel(a, a).tolist() == [0.0] * 8 and biased.kernel(a, a).tolist() == [5.0] * 8
    one = tune(Maker(1.0).make)
    seven = tune(Maker(7.0).make)
    assert one.cache_key != seven.cache_key
    assert one.kernel(a, a).tolist() == [1.0] * 8 and seven.kernel(a, a).tolist() == [7.0] * 8
    # by content, never by address: equal objects share a key (also in another process)
    assert describe_value(Maker(3.0).make) == describe_value(Maker(3.0).make)
    assert describe_value(Maker(3.0).make) != describe_value(Maker(4.0).make)


def test_an_object_known_only_by_its_address_is_not_cached():
    with pytest.raises(Undescribable, match="known only by its address"):
        describe_value(Opaque().make)
    tuner = (AutoTuner.from_kernel(Opaque().make, [{"block": 16}]).set_kernel_parameters(((8,), {}))
             .set_compile_args(out_idx=[-1], target="c").set_profile_args(warmup=1, rep=2))
    with pytest.warns(RuntimeWarning, match="not kept .* known only by its address"):
        assert tuner.generate_cache_key() is None
    with pytest.warns(RuntimeWarning, match="not kept"):
        result = tuner.run(progress=False)
    assert result.cache_key is None and not AutoTuner._memory_cache


# -- 2. unwritten elements --------------------------------------------------------------------------


def test_a_config_that_leaves_its_tail_unwritten_fails_within_max_mismatched_ratio():
    n = 1030  # block 1024 leaves 6 elements (0.58% < max_mismatched_ratio=1%) unwritten
    result = tune(make_add_no_tail, configs=[{"block": 1024}, {"block": 2}], args=(n,),
                  ref_prog=lambda a, b: a + b, max_mismatched_ratio=0.01)
    status = {t.index: (t.status, t.reason) for t in result.trials}
    assert status[0][0] == "wrong_result", status
    assert "6 element(s) of the kernel's output still hold" in status[0][1]
    assert "at 1024, 1025, 1026, 1027, 1028, 1029" in status[0][1] and "max_mismatched_ratio" in status[0][1]
    assert status[1][0] == "ok" and result.config == {"block": 2}

    kernel = tilelang.compile(make_add_no_tail(n, 1024), out_idx=[-1], target="c")
    with pytest.raises(AssertionError, match=r"C: 6 element\(s\) .* at 1024, 1025"):
        kernel.get_profiler().assert_allclose(lambda a, b: a + b, max_mismatched_ratio=0.5)


# -- 3. a candidate that never returns on an executor ------------------------------------------------


def test_a_hanging_candidate_on_an_executor_is_a_timeout_and_the_run_goes_on(monkeypatch):
    monkeypatch.setattr(tuner_module, "EXECUTOR_GRACE_S", 0.5)  # waits 3 x 1.5 s + 1.5 s for the hung one
    for spin in (0, 1000):  # built here first: the workers find them in the kernel cache, well within 1.5 s
        tilelang.compile(make_spin(64, 32, spin), out_idx=[-1], target="c")
    pool = concurrent.futures.ProcessPoolExecutor(2)
    try:
        start = time.monotonic()
        result = (AutoTuner.from_kernel(make_spin, [{"spin": 1000}, {"spin": 0}])
                  .set_kernel_parameters(((64,), {}))
                  .set_compile_args(out_idx=[-1], target="c")
                  .set_profile_args(warmup=1, rep=2, timeout=1.5, ref_prog=plus_one)
                  .run(progress=False, executor=pool))
        took = time.monotonic() - start
    finally:
        processes = list(pool._processes.values())  # the hung worker is ours: end it
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.kill()
    status = {t.index: (t.status, t.reason) for t in result.trials}
    assert status[1][0] == "ok" and result.config == {"spin": 0}
    assert status[0][0] == "timeout" and "the executor gave no result for it within 6 s" in status[0][1], status
    assert "may still be running it" in status[0][1]
    assert took < 30


# -- 4. a slow reference ------------------------------------------------------------------------------


def test_a_slow_reference_is_not_charged_to_the_candidates(caplog):
    calls = []

    def slow_ref(a, b):
        calls.append(time.monotonic())
        time.sleep(1.2)  # longer than the timeout
        return a + b

    with caplog.at_level(logging.WARNING, logger="tilelang.autotuner"):
        result = tune(make_add, args=(64,), timeout=1, ref_prog=slow_ref, cache_input_tensors=True)
    assert [t.status for t in result.trials] == ["ok", "ok"]
    # its outputs once for both candidates (they share their inputs), one call of its timing
    assert len(calls) == 2
    assert result.ref_latency is None
    assert "ref_prog test_a_slow_reference_is_not_charged_to_the_candidates.<locals>.slow_ref took" in caplog.text
    assert "is too slow to time" in caplog.text


# -- 5. rep=0 and the decorator's options --------------------------------------------------------------


def test_rep_zero_counts_as_one_and_bad_decorator_options_fail_where_applied():
    tuned = tilelang.autotune(configs=[{"block": 16}, {"block": 64}], warmup=0, rep=0)(jit_add)
    kernel = tuned(64)
    a = torch.ones(64)
    assert torch.equal(kernel(a, a), a + a)
    with pytest.raises(AutotuneConfigError, match="rep must be an int >= 0"):
        tilelang.autotune(configs=[{"block": 16}], rep=-1)(jit_add)
    with pytest.raises(AutotuneConfigError, match="timer must be one of"):
        tilelang.autotune(configs=[{"block": 16}], timer="stopwatch")(jit_add)
    with pytest.raises(AutotuneConfigError, match="early_stop_factor must be a number >= 1.0"):
        tilelang.autotune(configs=[{"block": 16}], early_stop=True, early_stop_factor=0.5)(jit_add)


# -- 6. the jit's compile arguments ------------------------------------------------------------------


def test_set_compile_args_keeps_the_jits_arguments_it_is_not_given():
    tuner = AutoTuner.from_kernel(jit_add, [{"block": 16}, {"block": 64}]).set_kernel_parameters(((64,), {}))
    assert tuner.compile_args.out_idx == -1
    tuner.set_compile_args(target="c")
    assert tuner.compile_args.out_idx == -1 and tuner.compile_args.target == "c"
    result = tuner.set_profile_args(warmup=1, rep=2, ref_prog=lambda a, b: a + b).run(progress=False)
    assert [t.status for t in result.trials] == ["ok", "ok"]
    assert tuner.set_compile_args(out_idx=None).compile_args.out_idx is None  # given: given
    assert AutoTuner.from_kernel(make_add, [{}]).set_compile_args(target="c").compile_args.out_idx is None


# -- 7. manual_check_prog's verdict ------------------------------------------------------------------


def test_manual_check_prog_returning_false_fails_the_candidate():
    def same(outs, refs):
        return torch.allclose(outs[0], refs[0])

    result = tune(make_add, configs=[{"bias": 1.0}, {"bias": 0.0}], args=(64,), ref_prog=lambda a, b: a + b,
                  manual_check_prog=same)
    status = {t.index: (t.status, t.reason) for t in result.trials}
    assert status[0] == ("wrong_result", "manual_check_prog test_manual_check_prog_returning_false_fails_the_candidate"
                                         ".<locals>.same returned False: the kernel's outputs failed its check")
    assert status[1][0] == "ok" and result.config == {"bias": 0.0}
    with pytest.raises(AutotuneError, match="wrong_result"):
        tune(make_add, configs=[{"bias": 1.0}], args=(64,), ref_prog=lambda a, b: a + b,
             manual_check_prog=lambda outs, refs: False)


# -- 8. stored records ----------------------------------------------------------------------------------


def _stored(cache):
    (path,) = sorted((cache / "autotune").glob("*/*.json"))
    return path


@pytest.mark.parametrize("damage", ["nan", "negative", "best_index"])
def test_inconsistent_records_are_removed_and_tuned_again(cache, damage):
    first = tune(make_add, args=(64,))
    path = _stored(cache)
    doc = json.loads(path.read_text())
    if damage == "nan":
        doc["latency"] = float("nan")
    elif damage == "negative":
        doc["latency"] = -1.0
    else:
        doc["best_index"] = 99
    path.write_text(json.dumps(doc))
    AutoTuner.clear_memory()
    with pytest.warns(CacheWarning, match="removed unusable tuning result .* invalid"):
        again = tune(make_add, args=(64,))
    assert not again.from_cache and again.cache_key == first.cache_key
    assert TuningStore.active().load(first.cache_key) is not None  # the new result was stored


def test_a_record_that_cannot_be_removed_is_not_said_to_be_removed(cache):
    first = tune(make_add, args=(64,))
    path = _stored(cache)
    path.unlink()
    path.mkdir()
    AutoTuner.clear_memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = tune(make_add, args=(64,))
    texts = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert any(t.startswith("ignored unusable tuning result") and "could not be removed" in t for t in texts), texts
    assert not any(t.startswith("removed") for t in texts), texts
    assert not again.from_cache and again.cache_key == first.cache_key


def test_a_config_listed_twice_is_marked_best_once_and_stored_consistently(cache):
    result = tune(make_add, configs=[{"block": 64}, {"block": 64}], args=(256,))
    assert result.report().count("*") == 1
    best = result.trials[result.best_index]
    assert best.ok and best.latency == result.latency and best.config == result.config
    doc = json.loads(_stored(cache).read_text())
    stored = {t["index"]: t["latency"] for t in doc["trials"]}
    assert stored[doc["best_index"]] == doc["latency"] == result.latency
    AutoTuner.clear_memory()
    read_back = tune(make_add, configs=[{"block": 64}, {"block": 64}], args=(256,))
    assert read_back.from_cache and read_back.best_index == result.best_index
    assert read_back.report().count("*") == 1
