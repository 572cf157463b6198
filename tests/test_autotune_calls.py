"""Which calls of an ``@tilelang.autotune`` function share a tuning result, on the test-kit backend.

* ``f()`` and ``f(<the default>)`` are one call (tuned once, one record);
* calls in ``set_autotune_inputs`` blocks with inputs of other shapes are tuned each on its own;
* ``do_not_specialize``: a process calling with another value than the tuned one reads the stored
  result (no tuning), and gets a kernel compiled for its own value even when this process's
  memory already holds the result of another value;
* a ``ref_prog`` that tunes (another kernel, or this one with other arguments) works, and one
  that calls the function with the arguments being tuned stops at once with NestedTuningError.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.autotuner import AutoTuner, NestedTuningError, set_autotune_inputs  # noqa: E402
from tilelang_core.testkit import on_path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import autotune_kernels as K  # noqa: E402


@pytest.fixture
def kit(tmp_path, monkeypatch):
    K.install_tunekit(tmp_path / "site")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TL_TEST_BUILD_LOG", str(tmp_path / "builds.log"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    AutoTuner.clear_memory()
    with on_path(tmp_path / "site"):
        yield tmp_path
    AutoTuner.clear_memory()


def builds(tmp: Path) -> list[str]:
    log = tmp / "builds.log"
    return [line.split()[1] for line in log.read_text().splitlines()] if log.exists() else []


def records(tmp: Path) -> list[Path]:
    return sorted((tmp / "cache" / "autotune").glob("*/*.json"))


@tilelang.jit(out_idx=-1, execution_backend=K.TUNEKIT, target="c")
def vadd_n64(n=64, speed=1):
    return K.vadd_func(f"vadd_s{speed}", n)


def test_a_default_argument_and_its_value_are_one_call(kit):
    tuned = tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=2)(vadd_n64)
    first = tuned()
    assert tuned(64) is first and tuned(n=64) is first
    assert len(tuned._tuner_cache) == 1 and len(records(kit)) == 1  # was 2 and 2: tuned twice
    assert sorted(builds(kit)) == ["vadd_s1", "vadd_s20"]


@tilelang.jit(out_idx=-1, execution_backend=K.TUNEKIT, target="c")
def vadd_dynamic(speed=1):
    return K.vadd_func(f"vadd_s{speed}", T.dynamic("n"))


def test_inputs_of_another_shape_are_tuned_on_their_own(kit, monkeypatch):
    calls = []
    tuned = tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=2)(vadd_dynamic)
    with set_autotune_inputs(torch.ones(64), torch.ones(64)):
        small = tuned()
        assert tuned() is small  # the same block: one tuning
    run = AutoTuner._tune

    def counting(self, *args, **kwargs):
        calls.append(self._tuning_inputs()[0].shape[0])
        return run(self, *args, **kwargs)

    monkeypatch.setattr(AutoTuner, "_tune", counting)
    with set_autotune_inputs(torch.ones(4096), torch.ones(4096)):
        tuned()
    assert calls == [4096]  # it used to return the 64-element result without tuning
    assert len(tuned._tuner_cache) == 2 and len(records(kit)) == 2
    with set_autotune_inputs(torch.zeros(64), torch.zeros(64)):
        assert tuned() is small  # by shape, not by value, as the stored result's key


def dns_tuned():
    return tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=3, do_not_specialize=["n"])(K.kit_vadd)


def test_do_not_specialize_reads_the_stored_result_for_another_value(kit, caplog):
    caplog.set_level(logging.INFO, logger="tilelang.autotuner")
    dns_tuned()(16)
    AutoTuner.clear_memory()  # as a new process: only the stored result is left
    (path,) = records(kit)
    tuned = dns_tuned()
    kernel = tuned(32)
    (result,) = tuned._tuner_cache.values()
    assert result.from_cache and kernel.params[0].shape == [32] and kernel.name == "vadd_s1"
    assert "tuning again" not in caplog.text  # it compared n=32's kernel key with n=16's: tuned again
    assert builds(kit).count("vadd_s20") == 1  # only by the first tuning
    assert records(kit) == [path]


def test_do_not_specialize_never_returns_the_kernel_of_another_value_from_memory(kit):
    first, second = dns_tuned(), dns_tuned()
    assert first(16).params[0].shape == [16]
    kernel = second(32)  # the process's memory holds n=16's result under the same tuning key
    assert kernel.params[0].shape == [32] and kernel.name == "vadd_s1"  # was n=16's kernel
    x = torch.ones(32)
    torch.testing.assert_close(kernel(x, x), x + x)


def call_within(fn, seconds: float):
    """``fn()``'s result or exception, failing the test when it does not return in ``seconds``."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_reference_that_tunes_another_kernel_when_timed_does_not_wait_for_its_own_lock(kit, caplog):
    """skip_check: the reference is first called by its timing, under the device lock."""
    caplog.set_level(logging.WARNING, logger="tilelang.autotuner")
    inner = tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=2)(K.kit_vadd)
    outer = tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=2, skip_check=True,
                              ref_prog=lambda a, b: inner(a.shape[0])(a, b))(K.kit_vadd)
    start = time.monotonic()
    kernel = call_within(lambda: outer(64), 120)
    assert kernel.config == {"speed": 1} and time.monotonic() - start < 60  # it waited 300 s
    assert "alongside" not in caplog.text and len(inner._tuner_cache) == 1


def test_a_reference_calling_the_tuned_function_works_with_other_arguments_and_stops_with_the_same(kit):
    def ref(a, b):
        if a.shape[0] == 64:  # a half-size problem, tuned on the way
            half = outer(32)
            return torch.cat([half(a[:32], b[:32]), half(a[32:], b[32:])])
        return a + b

    outer = tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=2, ref_prog=ref)(K.kit_vadd)
    kernel = call_within(lambda: outer(64), 120)  # hung for ever (a Lock taken twice)
    assert kernel.config == {"speed": 1} and len(outer._tuner_cache) == 2

    same = tilelang.autotune(configs=[{"speed": 20}, {"speed": 1}], warmup=0, rep=2,
                             ref_prog=lambda a, b: same(a.shape[0])(a, b))(K.kit_vadd)
    with pytest.raises(NestedTuningError, match=r"kit_vadd is being tuned for these arguments.*ref_prog"):
        call_within(lambda: same(16), 120)
    assert isinstance(NestedTuningError("x"), ValueError)
